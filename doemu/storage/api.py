"""``ctx.storage`` as user code sees it: Cloudflare's ``DurableObjectStorage``, and nothing else.

The runtime drives an object's storage through :class:`~doemu.storage.storage.ObjectStorage`
(commit at the output gate, rollback on abort, close on eviction, the alarm-delivery hooks);
none of that may be reachable from user code, or code that calls it would run here and break on
deploy. So the object's ``ctx.storage`` is this view, whose names are exactly Cloudflare's:
``sql``, ``kv``, ``get``/``put``/``delete``/``list``, ``getAlarm``/``setAlarm``/``deleteAlarm``,
``deleteAll``, ``transaction``, ``transactionSync``, ``sync``.

On Cloudflare, Python reaches ``ctx.storage`` through the SDK's binding wrapper, which converts
what goes in and what comes out (observed on workerd): a ``tuple`` or ``bytearray`` value is
refused at the call (``TypeError: <class 'tuple'> cannot be sent over RPC.``), and what ``get``
and ``list`` return comes back as the SDK gives it — dicts as ``JsDict`` (keys also read as
attributes), bytes as ``memoryview``, ``1.0`` as ``1``, an aware ``datetime`` naive. With the
JavaScript boundary's rules on (:func:`~doemu.jsboundary.is_strict`), this view does the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from doemu.errors import not_emulated
from doemu.jsboundary import check_rpc_value, from_rpc_result, is_strict
from doemu.storage.kv import MISSING
from doemu.storage.resolved import Resolved
from doemu.storage.sql import SqlStorage
from doemu.storage.storage import ObjectStorage
from doemu.storage.sync_kv import SyncKvStorage
from doemu.storage.transactions import Transaction

__all__ = ["DurableObjectStorage"]

T = TypeVar("T")


class DurableObjectStorage:
    """Cloudflare's ``DurableObjectStorage`` (camelCase, exactly as on Cloudflare)."""

    __slots__ = ("_storage",)

    def __init__(self, storage: ObjectStorage) -> None:
        self._storage = storage

    @property
    def sql(self) -> SqlStorage:
        """The SQL API (only for classes created with ``new_sqlite_classes``)."""
        return self._storage.sql

    @property
    def kv(self) -> SyncKvStorage:
        """The synchronous KV API (SQLite-backed classes only, like ``sql``)."""
        return self._storage.kv

    def get(
        self, keys: str | list[str], options: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> Resolved[Any]:
        """``get(key)`` → value (None if missing); ``get([keys])`` → dict in key order."""
        return _as_js(self._storage.get(keys, options, **kwargs))

    def put(
        self,
        key_or_entries: str | Mapping[str, Any],
        value: Any = MISSING,
        options: Mapping[str, Any] | None = None,
        /,
        **kwargs: Any,
    ) -> Resolved[None]:
        """``put(key, value)`` or ``put({key: value, ...})``; options (``allowUnconfirmed``…)
        as a dict after them or as keywords."""
        if is_strict():
            check_rpc_value(key_or_entries if value is MISSING else value)
        return self._storage.put(key_or_entries, value, options, **kwargs)

    def delete(
        self, keys: str | list[str], options: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> Resolved[Any]:
        """``delete(key)`` → bool; ``delete([keys])`` → number of keys that existed."""
        return self._storage.delete(keys, options, **kwargs)

    def list(
        self, options: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> Resolved[dict[str, Any]]:
        """Key/value pairs in key order: ``start``, ``startAfter``, ``end``, ``prefix``,
        ``reverse``, ``limit``, as a dict and/or keyword arguments."""
        return _as_js(self._storage.list(options, **kwargs))

    def getAlarm(
        self, options: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> Resolved[int | None]:
        """The alarm time in whole ms since the epoch, or None."""
        return self._storage.getAlarm(options, **kwargs)

    def setAlarm(
        self, scheduledTime: Any, options: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> Resolved[None]:
        """Set the alarm (ms since the epoch or a datetime; a naive datetime is UTC)."""
        return self._storage.setAlarm(scheduledTime, options, **kwargs)

    def deleteAlarm(
        self, options: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> Resolved[None]:
        """Remove the alarm, if any."""
        return self._storage.deleteAlarm(options, **kwargs)

    def deleteAll(
        self, options: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> Resolved[None]:
        """Delete all SQL tables, all KV data and the alarm, atomically with the turn."""
        return self._storage.deleteAll(options, **kwargs)

    async def transaction(
        self, closure: Callable[[Transaction], Any], options: Mapping[str, Any] | None = None
    ) -> Any:
        """Run ``closure(txn)`` (sync or async) atomically; no other event runs meanwhile."""
        return await self._storage.transaction(closure, options)

    def transactionSync(self, closure: Callable[[], T]) -> T:
        """Run ``closure()`` atomically and return its result; roll back if it raises."""
        return self._storage.transactionSync(closure)

    def sync(self) -> Resolved[None]:
        """Make every write so far durable now (normally done when the turn ends)."""
        return self._storage.sync()

    def __repr__(self) -> str:
        return "<DurableObjectStorage>"

    def __getattr__(self, name: str) -> Any:
        if name in NOT_EMULATED:
            raise not_emulated("ctx.storage", name, NOT_EMULATED[name])
        raise AttributeError(f"'DurableObjectStorage' object has no attribute {name!r}")


#: Cloudflare's ``DurableObjectStorage`` members doemu does not emulate, and what they are.
NOT_EMULATED = {
    "getCurrentBookmark": "point-in-time recovery bookmarks",
    "getBookmarkForTime": "point-in-time recovery bookmarks",
    "onNextSessionRestoreBookmark": "point-in-time recovery",
}


def _as_js(result: Resolved[Any]) -> Resolved[Any]:
    """``result`` as the SDK's wrapper hands it to Python (see the module docstring)."""
    if not is_strict() or result._error is not None:
        return result
    return Resolved(from_rpc_result(result._value))
