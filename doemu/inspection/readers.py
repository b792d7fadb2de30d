"""Read-only views of object files for the admin API and the CLI.

Inspection never goes through a live object's connection: it opens the file read-only
(``mode=ro``; WAL lets a reader run beside the writer), so looking at an object can neither wake
it, block it, nor write to it, and it sees exactly what has been committed. Writes requested
through the admin API are routed through the object's own event queue instead (see
``doemu.server.admin``).
"""

from __future__ import annotations

import asyncio
import base64
import math
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiosqlite

from .. import clone
from ..errors import SqlError

__all__ = ["ReadOnlySqlError", "jsonable", "read_kv", "read_meta", "read_names", "read_sql"]

#: What a read-only query may do: read tables and call functions (pragmas too: on a ``mode=ro``
#: connection a writing pragma fails anyway, and a connection setting dies with the connection).
_READ_ACTIONS = frozenset(
    {
        sqlite3.SQLITE_SELECT,
        sqlite3.SQLITE_READ,
        sqlite3.SQLITE_FUNCTION,
        sqlite3.SQLITE_RECURSIVE,
        sqlite3.SQLITE_PRAGMA,
    }
)

#: Authorizer action codes by name, to say which part of a refused statement would write.
_ACTION_NAMES = {
    getattr(sqlite3, f"SQLITE_{name}"): name.replace("_", " ")
    for name in (
        "ALTER_TABLE ANALYZE ATTACH CREATE_INDEX CREATE_TABLE CREATE_TEMP_INDEX "
        "CREATE_TEMP_TABLE CREATE_TEMP_TRIGGER CREATE_TEMP_VIEW CREATE_TRIGGER CREATE_VIEW "
        "CREATE_VTABLE DELETE DETACH DROP_INDEX DROP_TABLE DROP_TEMP_INDEX DROP_TEMP_TABLE "
        "DROP_TEMP_TRIGGER DROP_TEMP_VIEW DROP_TRIGGER DROP_VIEW DROP_VTABLE INSERT REINDEX "
        "SAVEPOINT TRANSACTION UPDATE"
    ).split()
}

_SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_schema", "sqlite_temp_master"})
_WRITES = frozenset({sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE})


class ReadOnlySqlError(SqlError):
    """A read-only query tried to do more than read (write mode runs inside the object)."""


def jsonable(value: Any) -> Any:
    """A JSON-safe rendering of a stored value (bytes → ``{"$bytes": base64}``).

    JSON has no bytes and no NaN/Infinity, and an admin client must be able to parse every
    answer, so those become tagged objects instead of failing or producing invalid JSON.
    """
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$bytes": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, float) and not math.isfinite(value):
        return {"$float": repr(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return repr(value)


def _uri(path: Path) -> str:
    # Percent-encode the path: '?', '#' or '%' in a persist dir would otherwise break the URI.
    return f"file:{quote(str(path), safe='/')}?mode=ro"


def _missing_table(exc: sqlite3.OperationalError) -> bool:
    return str(exc).startswith("no such table")


async def read_kv(
    path: Path, *, prefix: str = "", limit: int = 1000, after: str | None = None
) -> list[dict[str, Any]]:
    """The object's KV pairs (decoded), in key order; ``[]`` for an object without storage.

    ``after``: only keys after this one (the last key of the previous page, for paging).
    """
    if not await asyncio.to_thread(path.exists):
        return []
    start = prefix if after is None or after < prefix else after
    operator = ">=" if after is None or after < prefix else ">"
    async with aiosqlite.connect(_uri(path), uri=True) as db:
        try:
            cursor = await db.execute(
                f"SELECT key, value FROM _cf_KV WHERE key {operator} ? ORDER BY key LIMIT ?",
                (start, limit),
            )
        except sqlite3.OperationalError as exc:
            if _missing_table(exc):
                return []  # the object never used KV
            raise
        rows = await cursor.fetchall()
    out = []
    for key, raw in rows:
        if not str(key).startswith(prefix):
            break
        try:
            value = jsonable(clone.decode(raw))
        except Exception as exc:  # one corrupt value must not hide the others
            value = {"$error": f"undecodable value: {exc}"}
        out.append({"key": key, "value": value})
    return out


def _meta_sync(path: Path, key: str) -> Any:
    if not path.exists():
        return None
    db = sqlite3.connect(_uri(path), uri=True)
    try:
        row = db.execute("SELECT value FROM _cf_METADATA WHERE key = ?", (key,)).fetchone()
    except sqlite3.OperationalError as exc:
        if _missing_table(exc):
            return None
        raise
    finally:
        db.close()
    if row is None:
        return None
    try:
        return clone.decode(row[0])
    except Exception:  # an unreadable entry reads as absent, as for an object without one
        return None


async def read_meta(path: Path, key: str) -> Any:
    """One entry of the object's ``_cf_METADATA`` table (e.g. ``"name"``), or None."""
    return await asyncio.to_thread(_meta_sync, path, key)


def _names_sync(paths: Sequence[Path]) -> list[str | None]:
    names: list[str | None] = []
    for path in paths:
        name = _meta_sync(path, "name")
        names.append(name if isinstance(name, str) else None)
    return names


async def read_names(paths: Sequence[Path]) -> list[str | None]:
    """The name each object was created from (None for unique ids and missing files).

    One worker thread reads them all, so listing thousands of objects does not start thousands
    of threads.
    """
    if not paths:
        return []
    return await asyncio.to_thread(_names_sync, paths)


async def read_sql(
    path: Path, query: str, params: list[Any] | None = None, limit: int = 1000
) -> dict[str, Any]:
    """Run one read-only statement; at most ``limit`` rows come back.

    An authorizer refuses anything but reading before the statement runs, so a write is reported
    as such (:class:`ReadOnlySqlError`) rather than as SQLite's "attempt to write a readonly
    database", and ``ATTACH`` cannot reach other files.
    """
    refused: list[int] = []

    def authorize(action: int, target: str | None, *_: str | None) -> int:
        # DDL first asks to write the schema table, then for its own action code. Letting the
        # first through (the mode=ro connection could not write it anyway) lets the refusal
        # name the statement ("CREATE TABLE") instead of an internal table.
        if action in _READ_ACTIONS or (action in _WRITES and target in _SCHEMA_TABLES):
            return sqlite3.SQLITE_OK
        refused.append(action)
        return sqlite3.SQLITE_DENY

    async with aiosqlite.connect(_uri(path), uri=True) as db:
        await db.set_authorizer(authorize)
        try:
            cursor = await db.execute(query, params or [])
        except sqlite3.DatabaseError as exc:
            if refused:
                what = _ACTION_NAMES.get(refused[0], f"action {refused[0]}")
            elif getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_READONLY:
                what = query.split(None, 1)[0].upper()  # e.g. a pragma that sets a value
            else:
                raise
            raise ReadOnlySqlError(
                f"read-only SQL cannot run {what}; only reads run here. Send "
                '"write": true (doemu sql --write) to run it inside the object.'
            ) from None
        columns = [d[0] for d in cursor.description or []]
        rows = await cursor.fetchmany(limit)
    return {"columns": columns, "rows": [[jsonable(v) for v in row] for row in rows]}
