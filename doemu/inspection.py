"""Read-only views of object files for the admin API and the CLI.

Inspection never goes through a live object's connection: it opens the file read-only with
aiosqlite (WAL lets a reader run beside the writer), so looking at an object can neither wake
it, block it, nor write to it. Writes requested through the admin API are routed through the
object's own event queue instead (see ``doemu.admin``).
"""

from __future__ import annotations

import asyncio
import base64
import math
import sqlite3
from pathlib import Path
from typing import Any

import aiosqlite

from . import clone

__all__ = ["jsonable", "read_kv", "read_meta", "read_sql"]


def jsonable(value: Any) -> Any:
    """A JSON-safe rendering of a stored value (bytes → ``{"$bytes": base64}``)."""
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
    return f"file:{path}?mode=ro"


async def read_kv(path: Path, *, prefix: str = "", limit: int = 1000) -> list[dict[str, Any]]:
    """The object's KV pairs (decoded), in key order."""
    if not await asyncio.to_thread(path.exists):
        return []
    async with aiosqlite.connect(_uri(path), uri=True) as db:
        try:
            cursor = await db.execute(
                "SELECT key, value FROM _cf_KV WHERE key >= ? ORDER BY key LIMIT ?",
                (prefix, limit),
            )
        except sqlite3.OperationalError:
            return []  # no KV table yet
        rows = await cursor.fetchall()
    out = []
    for key, raw in rows:
        if not str(key).startswith(prefix):
            break
        try:
            value = jsonable(clone.decode(raw))
        except Exception as exc:
            value = {"$error": f"undecodable value: {exc}"}
        out.append({"key": key, "value": value})
    return out


async def read_meta(path: Path, key: str) -> Any:
    if not await asyncio.to_thread(path.exists):
        return None
    async with aiosqlite.connect(_uri(path), uri=True) as db:
        try:
            cursor = await db.execute("SELECT value FROM _cf_METADATA WHERE key = ?", (key,))
        except sqlite3.OperationalError:
            return None
        row = await cursor.fetchone()
    if row is None:
        return None
    try:
        return clone.decode(row[0])
    except Exception:
        return None


async def read_sql(
    path: Path, query: str, params: list[Any] | None = None, limit: int = 1000
) -> dict[str, Any]:
    """Run ``query`` on a read-only connection; writes fail with SQLite's read-only error."""
    async with aiosqlite.connect(_uri(path), uri=True) as db:
        cursor = await db.execute(query, params or [])
        columns = [d[0] for d in cursor.description or []]
        rows = await cursor.fetchmany(limit)
    return {"columns": columns, "rows": [[jsonable(v) for v in row] for row in rows]}
