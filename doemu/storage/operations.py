"""The promise-returning KV and alarm methods, shared by ``ctx.storage`` and ``txn``.

Each method does its work immediately and returns a :class:`~doemu.storage.resolved.Resolved`:
the result, or the error (a rejected promise on Cloudflare), is delivered by ``await`` without
yielding to the event loop. ``_guard`` lets each owner refuse calls (a closed storage, a finished
or rolled-back transaction) with its own message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from doemu.storage.alarms import AlarmStore
from doemu.storage.kv import MISSING, KvStore
from doemu.storage.resolved import Resolved, rejected

__all__ = ["AsyncKvMethods"]


class AsyncKvMethods:
    """``get``/``put``/``delete``/``list`` and the alarm methods, as Cloudflare spells them."""

    __slots__ = ()

    _kv: KvStore
    _alarms: AlarmStore

    def _guard(self, op: str) -> None:
        """Raise if ``op`` may not run now."""
        raise NotImplementedError

    def get(self, keys: str | list[str], options: Mapping[str, Any] | None = None) -> Resolved[Any]:
        """``get(key)`` → value (None if missing); ``get([keys])`` → dict in key order."""
        try:
            self._guard("get")
            return Resolved(self._kv.get_any(keys))
        except Exception as exc:
            return rejected(exc)

    def put(
        self,
        key_or_entries: str | Mapping[str, Any],
        value: Any = MISSING,
        options: Mapping[str, Any] | None = None,
    ) -> Resolved[None]:
        """``put(key, value)`` or ``put({key: value, ...})``."""
        try:
            self._guard("put")
            self._kv.put_any(key_or_entries, value)
            return Resolved(None)
        except Exception as exc:
            return rejected(exc)

    def delete(
        self, keys: str | list[str], options: Mapping[str, Any] | None = None
    ) -> Resolved[Any]:
        """``delete(key)`` → bool; ``delete([keys])`` → number of keys that existed."""
        try:
            self._guard("delete")
            return Resolved(self._kv.delete_any(keys))
        except Exception as exc:
            return rejected(exc)

    def list(
        self, options: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> Resolved[dict[str, Any]]:
        """Key/value pairs in key order, as a dict; options as a dict and/or keyword arguments:
        ``start``, ``startAfter``, ``end``, ``prefix``, ``reverse``, ``limit``."""
        try:
            self._guard("list")
            merged = {**options, **kwargs} if options else kwargs
            return Resolved(dict(self._kv.list(merged)))
        except Exception as exc:
            return rejected(exc)

    def getAlarm(self, options: Mapping[str, Any] | None = None) -> Resolved[float | None]:
        """The alarm time in ms since the epoch, or None."""
        try:
            self._guard("getAlarm")
            return Resolved(self._alarms.get())
        except Exception as exc:
            return rejected(exc)

    def setAlarm(
        self, scheduledTime: Any, options: Mapping[str, Any] | None = None
    ) -> Resolved[None]:
        """Set the alarm (ms since the epoch or a datetime; a naive datetime is UTC)."""
        try:
            self._guard("setAlarm")
            self._alarms.set(scheduledTime)
            return Resolved(None)
        except Exception as exc:
            return rejected(exc)

    def deleteAlarm(self, options: Mapping[str, Any] | None = None) -> Resolved[None]:
        """Remove the alarm, if any."""
        try:
            self._guard("deleteAlarm")
            self._alarms.delete()
            return Resolved(None)
        except Exception as exc:
            return rejected(exc)
