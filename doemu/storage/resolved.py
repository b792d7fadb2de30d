"""The already-settled awaitable that storage's "async" methods return.

On Cloudflare, ``storage.put()`` does its work when called and returns a promise; code that never
awaits it still writes. And awaiting a storage promise never lets another event in (the input
gate), so read-modify-write over storage is atomic between real awaits. :class:`Resolved`
reproduces both: the work is done before it is constructed, and ``await`` returns the value (or
raises the stored error) without ever yielding to the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import Any, Generic, TypeVar

__all__ = ["Resolved", "rejected"]

T = TypeVar("T")

_log = logging.getLogger("doemu.storage")


class Resolved(Generic[T]):
    """An awaitable holding a finished result: ``await`` returns it without suspending.

    User code sees only ``await``: nothing else is public, as a JavaScript promise reached
    through Pyodide offers nothing a Python caller would use instead.
    """

    __slots__ = ("_awaited", "_error", "_value")

    def __init__(self, value: T) -> None:
        self._value = value
        self._error: BaseException | None = None
        self._awaited = False

    def __await__(self) -> Generator[Any, None, T]:
        self._awaited = True
        if self._error is not None:
            raise self._error
        return self._value
        yield  # unreachable: makes this a generator that finishes without suspending

    def __del__(self) -> None:
        # The equivalent of an unhandled promise rejection: never silently lose a storage error.
        if self._error is not None and not self._awaited:
            _log.warning("storage error was never awaited: %r", self._error)

    def __repr__(self) -> str:
        state = f"error={self._error!r}" if self._error is not None else f"value={self._value!r}"
        return f"<Resolved {state}>"


def rejected(error: BaseException) -> Resolved[Any]:
    """A rejected result: ``await`` raises ``error`` (a storage promise that failed)."""
    result: Resolved[Any] = Resolved(None)
    result._error = error
    return result
