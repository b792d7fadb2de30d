"""``ctx.storage.kv``: the synchronous KV API of SQLite-backed objects.

Same table, values, limits and ``list()`` options as the async API, but calls return directly
(``api/sync-kv.c++``): ``get(key)`` → value or None, ``put(key, value)``, ``delete(key)`` → bool,
``list(options)`` → an iterator of ``(key, value)`` pairs (JavaScript yields ``[key, value]``
arrays; tuples unpack the same way). ``kv.put(key, None)`` stores ``None``.

``list()`` reads its whole range when called, so the iterator is a stable snapshot and, unlike
workerd's, is not invalidated by a later ``list()`` call.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from doemu.storage.connection import StorageConnection
from doemu.storage.kv import KvStore, check_key

__all__ = ["SyncKvStorage"]


class SyncKvStorage:
    """``ctx.storage.kv``."""

    __slots__ = ("_conn", "_kv")

    def __init__(self, conn: StorageConnection, kv: KvStore) -> None:
        self._conn = conn
        self._kv = kv

    def get(self, key: str) -> Any:
        """The value stored under ``key``, or None."""
        self._conn.check_open()
        return self._kv.get(check_key(key))

    def put(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key``."""
        self._conn.check_open()
        self._kv.put(check_key(key), value)

    def delete(self, key: str) -> bool:
        """Delete ``key``; True if it existed."""
        self._conn.check_open()
        return self._kv.delete(check_key(key))

    def list(
        self, options: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> Iterator[tuple[str, Any]]:
        """``(key, value)`` pairs in key order; options as for ``storage.list()``."""
        self._conn.check_open()
        merged = {**options, **kwargs} if options else kwargs
        return iter(self._kv.list(merged))
