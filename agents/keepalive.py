"""``keep_alive()``: Layer 1 of durable agents — alarm heartbeats that prevent idle eviction.

An in-memory reference count: the first reference arms the object's single alarm at
``now + keep_alive_interval_ms`` (through the agent's alarm multiplexer); each heartbeat re-arms
it while references remain; releasing the last one lets the multiplexer recompute the alarm from
the other sources (schedules, fiber recovery), so a real schedule is never lost. No schedule rows
are written: the heartbeat is invisible to ``get_schedules()``. The count is in memory on
purpose — after an eviction nothing is alive to keep alive, and durable work is recovered by
fibers, not by the heartbeat.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .core.host import AgentHost, Core

__all__ = ["Heartbeat", "KeepAlive"]

T = TypeVar("T")

_log = logging.getLogger("agents.keepalive")


class KeepAlive:
    """The disposer ``keep_alive()`` returns: call it (or leave its ``async with``) to release.

    Releasing is idempotent: a second call does nothing, so the count never goes negative.
    """

    __slots__ = ("_heartbeat", "_released")

    def __init__(self, heartbeat: Heartbeat) -> None:
        self._heartbeat = heartbeat
        self._released = False

    @property
    def released(self) -> bool:
        return self._released

    def __call__(self) -> None:
        if self._released:
            return
        self._released = True
        self._heartbeat._release()

    async def __aenter__(self) -> KeepAlive:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self()

    def __await__(self) -> Any:
        """``await self.keep_alive()`` works too (the SDK's method is async)."""
        if False:  # pragma: no cover - makes this a generator function
            yield
        return self


class Heartbeat:
    """The reference count behind ``keep_alive()``, and its share of the agent's alarm."""

    __slots__ = ("_core", "_host", "_refs")

    def __init__(self, core: Core, host: AgentHost) -> None:
        self._core = core
        self._host = host
        self._refs = 0

    @property
    def refs(self) -> int:
        """How many ``keep_alive()`` references are held (never negative)."""
        return self._refs

    def keep_alive(self) -> KeepAlive:
        """Take a reference; the first one arms the heartbeat."""
        self._refs += 1
        if self._refs == 1:
            self._core.schedule_next_alarm_soon()
        return KeepAlive(self)

    async def keep_alive_while(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn()`` while holding a reference; released however ``fn`` ends."""
        async with self.keep_alive():
            return await fn()

    def _release(self) -> None:
        if self._refs <= 0:  # defensive: disposers are idempotent already
            _log.warning("keep_alive released more times than taken; ignored")
            return
        self._refs -= 1
        if self._refs == 0:
            self._core.schedule_next_alarm_soon()

    def next_wakeup(self, now: float) -> float | None:
        """The heartbeat's wake-up time while references are held."""
        if self._refs <= 0:
            return None
        return now + self._host.options.keep_alive_interval_ms
