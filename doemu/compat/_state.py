"""Process-wide state behind the compat surface, set by the runtime (never by user code).

The Cloudflare surface has a few module-level globals that, on Cloudflare, come from the isolate:
``Date.now()`` (the clock), ``workers.env`` and ``workers.waitUntil``. doemu keeps what backs them
here so the runtime can route them without the user-facing modules growing extra public names.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from ..clock import Clock, SystemClock

__all__ = [
    "before_output",
    "get_clock",
    "get_env",
    "get_wait_until",
    "set_clock",
    "set_env",
    "set_output_gate",
    "set_wait_until",
]

_UNSET: Any = object()

_clock: Clock = SystemClock()
_env: Any = _UNSET
_wait_until: Callable[[Awaitable[Any]], None] | None = None
_output_gate: Callable[[bool], asyncio.Future[None] | None] | None = None


def set_clock(clock: Clock | None) -> None:
    """Route ``js.Date.now()`` to ``clock`` (``None`` restores the system clock)."""
    global _clock
    _clock = clock if clock is not None else SystemClock()


def get_clock() -> Clock:
    return _clock


def set_env(env: Any, *, if_current: Any = _UNSET) -> None:
    """What ``from workers import env`` forwards to (``None`` unsets it).

    With ``if_current``, only when that is what is set now: a runtime that closes unsets its own
    env, never the one of a runtime started after it.
    """
    global _env
    if if_current is not _UNSET and _env is not if_current:
        return
    _env = _UNSET if env is None else env


def get_env() -> Any:
    """The current global env, or raise ``AttributeError`` when no runtime has set one."""
    if _env is _UNSET:
        raise AttributeError(
            "workers.env is not available: no doemu runtime has loaded this worker "
            "(doemu.compat.set_env was never called)"
        )
    return _env


def set_wait_until(
    fn: Callable[[Awaitable[Any]], None] | None, *, if_current: Any = _UNSET
) -> None:
    """What ``workers.waitUntil(awaitable)`` calls (``None`` unsets it; ``if_current`` as for
    :func:`set_env`)."""
    global _wait_until
    if if_current is not _UNSET and _wait_until != if_current:  # bound methods: ==, not is
        return
    _wait_until = fn


def get_wait_until() -> Callable[[Awaitable[Any]], None]:
    if _wait_until is None:
        raise RuntimeError(
            "workers.waitUntil is not available: no doemu runtime has loaded this worker "
            "(doemu.compat.set_wait_until was never called)"
        )
    return _wait_until


def set_output_gate(
    fn: Callable[[bool], asyncio.Future[None] | None] | None, *, if_current: Any = _UNSET
) -> None:
    """What runs before a stream chunk leaves user code: the current object's output gate."""
    global _output_gate
    if if_current is not _UNSET and _output_gate != if_current:
        return
    _output_gate = fn


def before_output(*, hold: bool = True) -> asyncio.Future[None] | None:
    """Commit the current object's pending writes before output leaves it; returns what the
    output must wait for first (None: nothing, and always outside an object). ``hold=False``
    (an outgoing request, whose answer an open ``transaction()`` may be waiting for) waits for
    what is committed only, never for a commit such a transaction holds back."""
    gate = _output_gate
    return None if gate is None else gate(hold)
