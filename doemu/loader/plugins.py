"""Durable Object classes that installed packages provide (entry-point group
``doemu.durable_objects``), looked up for a binding whose class ``main`` does not export::

    [project.entry-points."doemu.durable_objects"]
    Researcher = "mypkg.agents:Researcher"

importlib.metadata (several milliseconds) is imported only here, and only for such a binding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import LoaderError
from .importer import import_from_string

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = [
    "ENTRY_POINT_GROUP",
    "ClassNotFoundError",
    "dist_label",
    "find_entry_point",
    "load_entry_point",
]

ENTRY_POINT_GROUP = "doemu.durable_objects"


class ClassNotFoundError(LoaderError):
    """A binding's ``class_name`` is neither in ``main`` nor provided by an installed package."""


def find_entry_point(
    class_name: str, where: str, main_label: str, candidates: list[str]
) -> EntryPoint:
    """The one installed entry point named ``class_name``; refused when none or several.

    ``candidates`` (class names ``main`` defines) feed the "did you mean" hint when none exists.
    """
    entry_points = _entry_points(class_name)
    if not entry_points:
        import difflib
        import importlib.metadata

        names = [*candidates]
        names += [ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)]
        close = difflib.get_close_matches(class_name, names, n=1)
        hint = f' (did you mean "{close[0]}"?)' if close else ""
        raise ClassNotFoundError(
            f"{where} is not exported by {main_label} and no installed package provides it in "
            f'entry-point group "{ENTRY_POINT_GROUP}"{hint}'
        )
    if len(entry_points) > 1:
        listed = "; ".join(f"{dist_label(ep)} ({ep.value})" for ep in entry_points)
        raise ClassNotFoundError(
            f'{where}: several installed packages provide it in entry-point group "'
            f'{ENTRY_POINT_GROUP}": {listed}; uninstall all but one'
        )
    return entry_points[0]


def load_entry_point(ep: EntryPoint, where: str) -> tuple[object, str, str]:
    """``(object, "module:Class", context for errors)`` of an entry point."""
    value = ep.value.partition("[")[0].strip()  # drop a trailing "[extras]"
    context = f"{where}: entry point {ep.name} = {ep.value!r} of {dist_label(ep)}"
    return import_from_string(value, context=context), value, context


def _entry_points(name: str) -> list[EntryPoint]:
    """Entry points called ``name`` in the group, one per (distribution, value)."""
    import importlib.metadata

    unique: dict[tuple[str, str], EntryPoint] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP).select(name=name):
        dist = ep.dist.name.lower().replace("_", "-") if ep.dist is not None else ""
        unique.setdefault((dist, ep.value), ep)
    return list(unique.values())


def dist_label(ep: EntryPoint) -> str:
    if ep.dist is None:
        return "an unknown distribution"
    return f"{ep.dist.name} {ep.dist.version}"
