"""Reading a persist dir when no server runs: what ``doemu objects``, ``alarms`` and ``sql`` fall
back on when no admin API answers.

It is apart from :mod:`doemu.cli` because it is a different way to reach the same data: straight
from the object files, strictly read-only (the CLI must never write a server's files, and a
server may start at any moment). Expected failures are still the CLI's one-line ``Error: …`` (a
:class:`click.ClickException`), raised from here.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any, NoReturn

import click

from .config import DurableObjectBinding, WorkerConfig, display_path
from .errors import DoemuError
from .ids import IdFactory, is_hex_id

__all__ = ["object_file", "read_only_sql", "scan_objects"]

_ALL_ROWS = 2**31 - 1  # a fetchmany() size meaning "all" (it must fit a C int)


def _fail(message: str) -> NoReturn:
    """An expected failure: the CLI's one-line ``Error: …`` and exit code 1."""
    raise click.ClickException(message)


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
    from .inspection import read_names

    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for b in bindings:
        directory = root / worker.unique_key(b)
        if directory.name in seen or not directory.is_dir():
            continue
        seen.add(directory.name)
        alarms = await _stored_alarms(directory / "metadata.sqlite")
        files = [p for p in sorted(directory.glob("*.sqlite")) if is_hex_id(p.stem)]
        for path, name in zip(files, await read_names(files), strict=True):
            alarm, alarm_name = alarms.get(path.stem, (None, None))
            item = {"binding": b.name, "id": path.stem, "state": "evicted"}
            out.append({**item, "name": name or alarm_name, "alarm": alarm})
    return out


async def _stored_alarms(path: Path) -> dict[str, tuple[float, str | None]]:
    """``_cf_ALARM`` by object id, read-only: the CLI must never write a server's files."""
    from .inspection import read_sql

    query = "SELECT actor_id, scheduled_time, actor_name FROM _cf_ALARM"
    try:
        result = await read_sql(path, query, limit=_ALL_ROWS)
    except sqlite3.Error:
        return {}  # no file or no table yet
    return {str(r[0]): (float(r[1]), r[2]) for r in result["rows"]}


def object_file(worker: WorkerConfig, root: Path, binding: DurableObjectBinding, name: str) -> Path:
    """The file of object NAME (a name, or a 64-hex id of this namespace, as the admin API)."""
    key = worker.unique_key(binding)
    ids = IdFactory(key)
    try:
        object_id = ids.from_string(name) if is_hex_id(name) else ids.from_name(name)
    except DoemuError as exc:
        _fail(f"{binding.name}/{name}: {exc}")
    return root / key / f"{object_id}.sqlite"


def read_only_sql(file: Path, query: str, label: str) -> dict[str, Any]:
    """QUERY's result on the object file FILE (``label`` is its ``BINDING/NAME``), read-only."""
    from .inspection import ReadOnlySqlError, read_sql

    if not file.exists():
        _fail(f"{label} has no storage in {display_path(file.parent)}")
    try:
        return asyncio.run(read_sql(file, query))
    except ReadOnlySqlError:
        _fail(f"{label}: read-only SQL; --write needs a running server")
    except (sqlite3.Error, DoemuError) as exc:
        _fail(f"{label}: {exc}")
