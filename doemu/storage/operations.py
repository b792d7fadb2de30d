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
from doemu.storage.errors import StorageTypeError
from doemu.storage.kv import MISSING, KvStore
from doemu.storage.resolved import Resolved, rejected

__all__ = ["AsyncKvMethods", "check_options"]


#: Cloudflare's options per method (``allowConcurrency`` and friends change nothing locally: one
#: process, storage that never yields, writes durable before output). Passed as a mapping or as
#: keywords, as Pyodide folds keywords into the JavaScript options object.
_READ = frozenset({"allowConcurrency", "noCache"})
_WRITE = frozenset({"allowConcurrency", "allowUnconfirmed", "noCache"})
_ALARM_READ = frozenset({"allowConcurrency"})
_ALARM_WRITE = frozenset({"allowConcurrency", "allowUnconfirmed"})


def check_options(
    method: str, allowed: frozenset[str], options: Any, kwargs: Mapping[str, Any]
) -> None:
    """Refuse options Cloudflare's ``method`` does not take, naming the ones it does."""
    if options is None and not kwargs:
        return
    if options is not None and not isinstance(options, Mapping):
        raise StorageTypeError(
            f"{method}() options must be a dict (or keyword arguments), "
            f"got {type(options).__name__}"
        )
    unknown = (set(options or ()) | set(kwargs)) - allowed
    if unknown:
        raise StorageTypeError(
            f"{method}() got unknown options {sorted(unknown)}; it takes {sorted(allowed)}"
        )


class AsyncKvMethods:
    """``get``/``put``/``delete``/``list`` and the alarm methods, as Cloudflare spells them."""

    __slots__ = ()

    _kv: KvStore
    _alarms: AlarmStore

    def _guard(self, op: str) -> None:
        """Raise if ``op`` may not run now."""
        raise NotImplementedError

    def get(
        self, keys: str | list[str], options: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> Resolved[Any]:
        """``get(key)`` → value (None if missing); ``get([keys])`` → dict in key order."""
        try:
            self._guard("get")
            check_options("get", _READ, options, kwargs)
            return Resolved(self._kv.get_any(keys))
        except Exception as exc:
            return rejected(exc)

    def put(
        self,
        key_or_entries: str | Mapping[str, Any],
        value: Any = MISSING,
        options: Mapping[str, Any] | None = None,
        /,
        **kwargs: Any,
    ) -> Resolved[None]:
        """``put(key, value)`` or ``put({key: value, ...})``, with options after either."""
        try:
            self._guard("put")
            if isinstance(key_or_entries, Mapping) and (
                value is None or isinstance(value, Mapping)
            ):
                options, value = value, MISSING  # put(entries, options)
            check_options("put", _WRITE, options, kwargs)
            self._kv.put_any(key_or_entries, value)
            return Resolved(None)
        except Exception as exc:
            return rejected(exc)

    def delete(
        self, keys: str | list[str], options: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> Resolved[Any]:
        """``delete(key)`` → bool; ``delete([keys])`` → number of keys that existed."""
        try:
            self._guard("delete")
            check_options("delete", _WRITE, options, kwargs)
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

    def getAlarm(
        self, options: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> Resolved[int | None]:
        """The alarm time in whole ms since the epoch (an ``int``, as workerd gives it: a
        JavaScript Date's time value), or None."""
        try:
            self._guard("getAlarm")
            check_options("getAlarm", _ALARM_READ, options, kwargs)
            when = self._alarms.get()
            return Resolved(None if when is None else int(when))
        except Exception as exc:
            return rejected(exc)

    def setAlarm(
        self, scheduledTime: Any, options: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> Resolved[None]:
        """Set the alarm (ms since the epoch or a datetime; a naive datetime is UTC)."""
        try:
            self._guard("setAlarm")
            check_options("setAlarm", _ALARM_WRITE, options, kwargs)
            self._alarms.set(scheduledTime)
            return Resolved(None)
        except Exception as exc:
            return rejected(exc)

    def deleteAlarm(
        self, options: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> Resolved[None]:
        """Remove the alarm, if any."""
        try:
            self._guard("deleteAlarm")
            check_options("deleteAlarm", _ALARM_WRITE, options, kwargs)
            self._alarms.delete()
            return Resolved(None)
        except Exception as exc:
            return rejected(exc)
