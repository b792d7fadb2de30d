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
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["KeepAlive", "KeepAliveMixin"]

T = TypeVar("T")

_log = logging.getLogger("agents.keepalive")


class KeepAlive:
    """The disposer ``keep_alive()`` returns: call it (or leave its ``async with``) to release.

    Releasing is idempotent: a second call does nothing, so the count never goes negative.
    """

    __slots__ = ("_agent", "_released")

    def __init__(self, agent: KeepAliveMixin) -> None:
        self._agent = agent
        self._released = False

    @property
    def released(self) -> bool:
        return self._released

    def __call__(self) -> None:
        if self._released:
            return
        self._released = True
        self._agent._release_keep_alive()

    async def __aenter__(self) -> KeepAlive:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self()

    def __await__(self) -> Any:
        """``await self.keep_alive()`` works too (the SDK's method is async)."""
        if False:  # pragma: no cover - makes this a generator function
            yield
        return self


class KeepAliveMixin:
    """Reference-counted heartbeat; part of :class:`~agents.agent.Agent`."""

    _keep_alive_refs: int

    def _init_keepalive(self) -> None:
        self._keep_alive_refs = 0

    @property
    def keep_alive_refs(self) -> int:
        """How many ``keep_alive()`` references are held (never negative)."""
        return self._keep_alive_refs

    def keep_alive(self) -> KeepAlive:
        """Hold the object in memory until the returned disposer is called."""
        self._keep_alive_refs += 1
        if self._keep_alive_refs == 1:
            self._agent_self()._schedule_next_alarm_soon()
        return KeepAlive(self)

    async def keep_alive_while(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn()`` while holding a keep-alive reference; released however ``fn`` ends."""
        async with self.keep_alive():
            return await fn()

    def _release_keep_alive(self) -> None:
        if self._keep_alive_refs <= 0:  # defensive: disposers are idempotent already
            _log.warning("keep_alive released more times than taken; ignored")
            return
        self._keep_alive_refs -= 1
        if self._keep_alive_refs == 0:
            self._agent_self()._schedule_next_alarm_soon()

    def _next_keepalive_ms(self, now: float) -> float | None:
        """The heartbeat's wake-up time while references are held."""
        if self._keep_alive_refs <= 0:
            return None
        return now + self._agent_self().options.keep_alive_interval_ms

    def _agent_self(self) -> Agent:
        return self  # type: ignore[return-value]
