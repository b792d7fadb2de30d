"""What a part of the inspector page from a module of its own is (see :mod:`.inspector_page`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Section", "Slot"]

Slot = Literal["overview", "object", "sidebar"]


@dataclass(frozen=True)
class Section:
    """A part of the inspector page: markup for one of its slots, plus style and script.

    ``slot``: ``overview`` (under the objects list), ``object`` (in an opened object's view) or
    ``sidebar`` (beside the timeline). ``html`` is static markup (no data: the script fills it
    through the core's ``doemu`` object and its hooks).
    """

    name: str
    slot: Slot
    html: str
    script: str = ""
    style: str = ""
