"""A KV namespace's entries in one SQLite file: values, expirations, metadata, listing order.

The store knows nothing of the JS surface (argument forms, error texts, result shapes: those are
:mod:`doemu.bindings.kv.namespace`'s); it keeps entries and answers questions about them on the
doemu clock, so a manual clock moves expiry exactly as it moves alarms. Expired entries are
invisible at once and removed lazily (a read that meets one, a listing, the start-up sweep).

Keys sort as Cloudflare lists them, by their UTF-8 bytes (SQLite's ``BINARY`` collation of UTF-8
text). A listing cursor is the last key returned, base64-encoded, as Miniflare makes it: a cursor
is opaque to user code, and one that decodes to nothing useful lists what comes after it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from dataclasses import dataclass
from pathlib import Path

from ...clock import Clock
from ...storage.durability import SyncPool
from ..sqlite import BindingFile

__all__ = ["KvEntry", "KvListing", "KvStore"]

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS kv_entries ("
    " key TEXT PRIMARY KEY, value BLOB NOT NULL, expiration INTEGER, metadata TEXT)",
    "CREATE INDEX IF NOT EXISTS kv_entries_expiration ON kv_entries(expiration)"
    " WHERE expiration IS NOT NULL",
]


@dataclass(frozen=True, slots=True)
class KvEntry:
    """One live entry: ``expiration`` in seconds since the epoch, ``metadata`` as JSON text."""

    key: str
    value: bytes
    expiration: int | None
    metadata: str | None


@dataclass(frozen=True, slots=True)
class KvListing:
    """One page of a listing: ``(key, expiration, metadata JSON)`` rows, and the next cursor."""

    keys: list[tuple[str, int | None, str | None]]
    cursor: str | None


class KvStore:
    """The entries of one KV namespace (see the module docstring)."""

    def __init__(self, path: Path, clock: Clock, sync_pool: SyncPool | None = None) -> None:
        self.path = path
        self._clock = clock
        self._file = BindingFile(path, _SCHEMA, sync_pool)
        self._db = self._file.conn
        self.sweep()

    def now(self) -> float:
        """Now on the doemu clock, in seconds since the epoch (KV's unit for expirations)."""
        return self._clock.now() / 1000.0

    def get(self, key: str) -> KvEntry | None:
        row = self._db.execute(
            "SELECT value, expiration, metadata FROM kv_entries WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        value, expiration, metadata = row
        if expiration is not None and expiration <= self.now():
            return None
        return KvEntry(key, bytes(value), expiration, metadata)

    def put(
        self, key: str, value: bytes, expiration: int | None, metadata: str | None
    ) -> asyncio.Future[None] | None:
        """Store an entry; returns what the answer waits for (see BindingFile.durable)."""
        with self._file.write() as db:
            db.execute(
                "INSERT OR REPLACE INTO kv_entries (key, value, expiration, metadata) "
                "VALUES (?, ?, ?, ?)",
                (key, value, expiration, metadata),
            )
        return self._file.durable()

    def delete(self, key: str) -> asyncio.Future[None] | None:
        with self._file.write() as db:
            changed = db.execute("DELETE FROM kv_entries WHERE key = ?", (key,)).rowcount
        return self._file.durable() if changed else None

    def list(self, prefix: str, limit: int, cursor: str | None) -> KvListing:
        """Up to ``limit`` live keys starting with ``prefix``, after ``cursor``, in key order."""
        start_after = _decode_cursor(cursor) if cursor else ""
        rows = self._db.execute(
            "SELECT key, expiration, metadata FROM kv_entries "
            "WHERE substr(key, 1, length(:prefix)) = :prefix AND key > :after "
            "AND (expiration IS NULL OR expiration > :now) ORDER BY key LIMIT :limit",
            {"prefix": prefix, "after": start_after, "now": self.now(), "limit": limit + 1},
        ).fetchall()
        more = len(rows) > limit
        keys = [(str(k), e, m) for k, e, m in rows[:limit]]
        next_cursor = _encode_cursor(keys[-1][0]) if more and keys else None
        return KvListing(keys, next_cursor)

    def count(self, prefix: str = "") -> int:
        """Live entries whose key starts with ``prefix`` (the admin API's "200 of N")."""
        row = self._db.execute(
            "SELECT count(*) FROM kv_entries WHERE substr(key, 1, length(:prefix)) = :prefix "
            "AND (expiration IS NULL OR expiration > :now)",
            {"prefix": prefix, "now": self.now()},
        ).fetchone()
        return int(row[0])

    def sweep(self) -> int:
        """Remove expired entries; returns how many (they were invisible already)."""
        with self._file.write() as db:
            removed = db.execute(
                "DELETE FROM kv_entries WHERE expiration IS NOT NULL AND expiration <= ?",
                (self.now(),),
            ).rowcount
        return int(removed)

    def close(self) -> None:
        self._file.close()


def _encode_cursor(key: str) -> str:
    return base64.b64encode(key.encode()).decode("ascii")


def _decode_cursor(cursor: str) -> str:
    """The key a cursor names; a cursor that is not one lists from where it would sort."""
    try:
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), validate=False)
    except (binascii.Error, ValueError):
        return cursor
    return raw.decode("utf-8", "replace")
