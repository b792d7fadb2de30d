"""Reading a persist dir when no server runs: what ``doemu objects``, ``alarms`` and ``sql`` fall
back on when no admin API answers.

A different way to reach the same data as the admin API: straight from the object files,
strictly read-only (the CLI must never write a server's files, and a server may start at any
moment). Expected failures are :class:`OfflineError` with a one-line message, which the CLI
prints.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from ..config import DurableObjectBinding, WorkerConfig, display_path
from ..errors import DoemuError, error_text
from ..ids import IdFactory, is_hex_id
from ..persist import namespace_dir, object_file
from .objects import scan_namespace
from .readers import ReadOnlySqlError, read_sql

__all__ = ["OfflineError", "find_object_file", "read_only_sql", "scan_objects"]


class OfflineError(DoemuError):
    """The persist dir cannot answer what was asked (no such object, bad SQL, a write)."""


def scan_objects(
    worker: WorkerConfig, root: Path, bindings: list[DurableObjectBinding]
) -> list[dict[str, Any]]:
    """The objects of ``bindings`` stored under ``root``, as the admin API's ``/objects`` lists
    them (all evicted, with their names and alarms)."""
    return asyncio.run(_scan(worker, root, bindings))


async def _scan(
    worker: WorkerConfig, root: Path, bindings: list[DurableObjectBinding]
) -> list[dict[str, Any]]:
    """Every stored object, read-only; bindings of one class share a directory, listed once."""
    out: list[dict[str, Any]] = []
    seen: set[Path] = set()
    for binding in bindings:
        directory = namespace_dir(root, worker.unique_key(binding))
        if directory in seen or not directory.is_dir():
            continue
        seen.add(directory)
        for found in await scan_namespace(directory):
            out.append(
                {
                    "binding": binding.name,
                    "id": found.id,
                    "state": "evicted",
                    "name": found.name,
                    "alarm": found.alarm,
                }
            )
    return out


def find_object_file(
    worker: WorkerConfig, root: Path, binding: DurableObjectBinding, name: str
) -> Path:
    """The file of object NAME (a name, or a 64-hex id of this namespace, as the admin API)."""
    key = worker.unique_key(binding)
    ids = IdFactory(key)
    try:
        object_id = ids.from_string(name) if is_hex_id(name) else ids.from_name(name)
    except DoemuError as exc:
        raise OfflineError(f"{binding.name}/{name}: {error_text(exc)}") from None
    return object_file(namespace_dir(root, key), str(object_id))


def read_only_sql(file: Path, query: str, label: str) -> dict[str, Any]:
    """QUERY's result on the object file FILE (``label`` is its ``BINDING/NAME``), read-only."""
    if not file.exists():
        raise OfflineError(f"{label} has no storage in {display_path(file.parent)}")
    try:
        return asyncio.run(read_sql(file, query))
    except ReadOnlySqlError:
        raise OfflineError(f"{label}: read-only SQL; --write needs a running server") from None
    except (sqlite3.Error, DoemuError) as exc:
        raise OfflineError(f"{label}: {error_text(exc)}") from None
