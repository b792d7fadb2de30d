"""What a namespace directory holds: its objects, their names and their stored alarms.

Both the admin API (``GET /objects``, with a server running) and the CLI (reading the persist dir
when none runs) list objects; this is the one reading of a namespace directory they share. It
opens files read-only and never creates or writes one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..alarms import load_alarms
from ..persist import metadata_file, object_file, stored_ids
from .readers import read_names

__all__ = ["StoredObject", "scan_namespace"]


@dataclass(frozen=True, slots=True)
class StoredObject:
    """One object of a namespace directory: id, the name it was created from, stored alarm."""

    id: str
    name: str | None
    alarm: float | None


async def scan_namespace(
    directory: Path,
    *,
    also: Iterable[str] = (),
    names: Mapping[str, str | None] | None = None,
) -> list[StoredObject]:
    """Every object with a file in ``directory`` (plus the ids in ``also``), sorted by id.

    A name comes from ``names`` (what a running server knows), else from the alarm table (which
    keeps the name of every object with an alarm), else from the object's own file. The alarm is
    what the namespace's alarm table holds.
    """
    alarms = {
        actor_id: (when, name)
        for actor_id, when, name in await load_alarms(metadata_file(directory), read_only=True)
    }
    ids = sorted(set(stored_ids(directory)) | set(also))
    known = dict(names or {})
    found: dict[str, str | None] = {}
    for hex_id in ids:
        found[hex_id] = known.get(hex_id) or alarms.get(hex_id, (None, None))[1]
    # An object without an alarm, and unknown to the server, keeps its name only in its file.
    unnamed = [h for h in ids if found[h] is None]
    files = [object_file(directory, h) for h in unnamed]
    found.update(zip(unnamed, await read_names(files), strict=True))
    return [
        StoredObject(hex_id, found[hex_id], alarms.get(hex_id, (None, None))[0]) for hex_id in ids
    ]
