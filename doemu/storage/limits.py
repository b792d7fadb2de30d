"""Production size limits, off by default as in local workerd.

``wrangler dev`` does not enforce Cloudflare's production limits, so code that stores a 200 KiB
value works locally and fails once deployed. ``--limits production`` turns them on in doemu so the
failure shows up on the developer's machine, with Cloudflare's own ``RangeError`` texts
(:class:`~doemu.errors.LimitExceededError` is also a ``ValueError``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

from doemu.errors import LimitExceededError
from doemu.storage import messages

__all__ = ["WORKERD_SQLITE_LIMITS", "StorageLimits", "apply_workerd_limits"]

#: SQLite's run-time limits as workerd sets them for every SQLite-backed object (locally too):
#: 100 bound parameters, 5 terms in a compound SELECT, 100 columns, 50-byte LIKE/GLOB patterns.
WORKERD_SQLITE_LIMITS = (
    (sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 100),
    (sqlite3.SQLITE_LIMIT_COMPOUND_SELECT, 5),
    (sqlite3.SQLITE_LIMIT_COLUMN, 100),
    (sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 50),
)


def apply_workerd_limits(db: sqlite3.Connection) -> None:
    """Set :data:`WORKERD_SQLITE_LIMITS` on ``db`` (what every object's connection has)."""
    for limit, value in WORKERD_SQLITE_LIMITS:
        db.setlimit(limit, value)


# workerd accepts values a little over the advertised size, because its serializer adds a few bytes
# of framing (api/actor-state.c++, ENFORCED_MAX_VALUE_SIZE). msgpack's framing is similar.
_VALUE_CUSHION = 34


@dataclass(frozen=True, slots=True)
class StorageLimits:
    """Which limits to enforce; a field set to ``None`` is not checked."""

    max_key_bytes: int | None = 2048
    """UTF-8 size of one KV key."""
    max_value_bytes: int | None = 128 * 1024
    """Serialized size of one KV value (plus workerd's small framing cushion)."""
    max_batch_keys: int | None = 128
    """Keys in one batch ``get``/``put``/``delete``."""
    max_sql_value_bytes: int | None = 2_000_000
    """Largest string, blob or row SQLite will build (``SQLITE_LIMIT_LENGTH``)."""
    max_sql_statement_bytes: int | None = 100_000
    """Longest SQL text accepted (``SQLITE_LIMIT_SQL_LENGTH``, as in workerd)."""
    max_sql_bindings: int | None = 100
    """Most ``?`` parameters in one statement (``SQLITE_LIMIT_VARIABLE_NUMBER``, as in workerd)."""

    @classmethod
    def production(cls) -> StorageLimits:
        """Cloudflare's production limits (2 KiB keys, 128 KiB values, 128 keys, 2 MB rows)."""
        return cls()

    def apply_sqlite_limits(self, db: sqlite3.Connection) -> None:
        """Set the SQLite run-time limits that mirror Cloudflare's (they apply to all SQL)."""
        if self.max_sql_value_bytes is not None:
            db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, self.max_sql_value_bytes)
        if self.max_sql_statement_bytes is not None:
            db.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, self.max_sql_statement_bytes)
        if self.max_sql_bindings is not None:
            db.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, self.max_sql_bindings)

    def check_key(self, key: str) -> None:
        """A single-key operation (``get(key)``, ``put(key, v)``, ``delete(key)``)."""
        limit = self.max_key_bytes
        if limit is not None and len(key) * 4 > limit and len(key.encode()) > limit:
            raise LimitExceededError(messages.key_too_large(limit))

    def check_batch(self, keys: Iterable[str], count: int, *, pairs: bool = False) -> None:
        """A batch operation: the number of keys, then each key's size."""
        if self.max_batch_keys is not None and count > self.max_batch_keys:
            raise LimitExceededError(messages.MAX_PAIRS if pairs else messages.MAX_KEYS)
        limit = self.max_key_bytes
        if limit is not None:
            for key in keys:
                if len(key) * 4 > limit and len(key.encode()) > limit:
                    raise LimitExceededError(messages.key_too_large_in_batch(key, limit))

    def check_value(self, encoded: bytes, key: str | None = None) -> None:
        """A serialized value; ``key`` is given for batch puts (their text names the key)."""
        limit = self.max_value_bytes
        if limit is not None and len(encoded) > limit + _VALUE_CUSHION:
            if key is None:
                raise LimitExceededError(messages.value_too_large(limit))
            raise LimitExceededError(messages.value_too_large_in_batch(key, limit))
