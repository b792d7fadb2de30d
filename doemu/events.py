"""Lifecycle events (constructed, evicted, reset, alarm fired/retried/dropped…).

The runtime emits small dict events; the admin API streams them over SSE and tests subscribe to
them to wait for something to happen instead of sleeping. Subscribers get a bounded queue: a slow
reader loses the oldest events rather than slowing the runtime down.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable
from typing import Any

__all__ = ["EventBus", "LifecycleEvent", "Subscription"]

LifecycleEvent = dict[str, Any]

_log = logging.getLogger("doemu.events")


class EventBus:
    """Fan-out of lifecycle events to any number of subscribers, plus a short history."""

    def __init__(self, clock_now: Callable[[], float], history: int = 256) -> None:
        self._now = clock_now
        self._subscribers: set[asyncio.Queue[LifecycleEvent]] = set()
        self.history: collections.deque[LifecycleEvent] = collections.deque(maxlen=history)

    def emit(self, type_: str, **fields: Any) -> None:
        event: LifecycleEvent = {"type": type_, "timestamp": self._now(), **fields}
        self.history.append(event)
        _log.debug("%s %s", type_, fields)
        for queue in self._subscribers:
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(event)

    def subscribe(self, maxsize: int = 1024) -> Subscription:
        """Every event emitted from this call on (registered now, not at first iteration)."""
        queue: asyncio.Queue[LifecycleEvent] = asyncio.Queue(maxsize)
        self._subscribers.add(queue)
        return Subscription(self, queue)

    def _unsubscribe(self, queue: asyncio.Queue[LifecycleEvent]) -> None:
        self._subscribers.discard(queue)


class Subscription:
    """An async iterator over lifecycle events; ``close()`` (or ``async with``) unsubscribes."""

    __slots__ = ("_bus", "_queue")

    def __init__(self, bus: EventBus, queue: asyncio.Queue[LifecycleEvent]) -> None:
        self._bus = bus
        self._queue = queue

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> LifecycleEvent:
        return await self._queue.get()

    def close(self) -> None:
        self._bus._unsubscribe(self._queue)

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
