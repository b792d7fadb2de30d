"""One injectable clock for all of doemu's time.

Alarms, alarm retries, idle eviction and ``Date.now()`` read time and arm timers only through a
:class:`Clock`, so a test can swap the real clock for a :class:`ManualClock` and move time by hand:
nothing fires until the test advances, and everything due fires in due order when it does.
Times are milliseconds since the Unix epoch (floats), the unit Cloudflare's APIs use.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock", "TimerHandle"]


class TimerHandle(Protocol):
    """What :meth:`Clock.call_at` returns: something that can be cancelled."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    """Time source and timer facility shared by the whole runtime."""

    @property
    def manual(self) -> bool:
        """True when time only moves when a test advances it."""
        ...

    def now(self) -> float:
        """Milliseconds since the Unix epoch."""
        ...

    def call_at(self, when_ms: float, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` (synchronously, on the loop) once ``now() >= when_ms``."""
        ...


class SystemClock:
    """Wall-clock time; timers are ``loop.call_later`` handles on the running loop."""

    manual = False

    def now(self) -> float:
        return time.time() * 1000.0

    def call_at(self, when_ms: float, callback: Callable[[], None]) -> TimerHandle:
        """A loop timer for ``when_ms``; the delay is rounded up to a whole millisecond.

        uvloop's timers count whole milliseconds from a time cached when the loop last polled,
        so a sub-millisecond delay fires on the very next pass, usually before ``when_ms`` by
        this clock. A caller that re-arms until its time has really come (the alarm scheduler)
        would then spin through hundreds of loop passes; rounding up costs at most a
        millisecond of lateness and re-arms a couple of times at most.
        """
        delay_ms = math.ceil(max(0.0, when_ms - self.now()))
        return asyncio.get_running_loop().call_later(delay_ms / 1000.0, callback)


class _ManualTimer:
    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        # The entry stays in the heap until its time: it must not keep what the callback holds
        # (an evicted object's host, say) alive until then.
        self.callback = _nothing


def _nothing() -> None:
    return None


class ManualClock:
    """A clock that stands still until :meth:`advance` or :meth:`set` moves it.

    Timers fire in time order; while a timer's callback runs, ``now()`` equals its due time, so
    code that reads the clock in a callback sees the moment it was scheduled for.
    """

    manual = True

    def __init__(self, start_ms: float | None = None) -> None:
        self._now = float(start_ms if start_ms is not None else round(time.time() * 1000.0))
        self._timers: list[tuple[float, int, _ManualTimer]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def call_at(self, when_ms: float, callback: Callable[[], None]) -> TimerHandle:
        timer = _ManualTimer(when_ms, callback)
        heapq.heappush(self._timers, (when_ms, next(self._seq), timer))
        return timer

    def next_due(self) -> float | None:
        """The due time of the earliest live timer, or None."""
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
        return self._timers[0][0] if self._timers else None

    def fire_due(self) -> int:
        """Run every live timer due at or before ``now()``; returns how many ran."""
        fired = 0
        while True:
            due = self.next_due()
            if due is None or due > self._now:
                return fired
            _, _, timer = heapq.heappop(self._timers)
            timer.cancelled = True
            timer.callback()
            fired += 1

    def set(self, now_ms: float) -> None:
        """Jump to ``now_ms`` (never backwards) and fire what is due, in order."""
        if now_ms < self._now:
            raise ValueError(f"ManualClock cannot go backwards: {now_ms} < {self._now}")
        while True:
            due = self.next_due()
            if due is None or due > now_ms:
                break
            self._now = max(self._now, due)
            self.fire_due()
        self._now = float(now_ms)

    def advance(self, ms: float) -> None:
        """Move time forward by ``ms`` milliseconds, firing due timers in order."""
        if ms < 0:
            raise ValueError(f"ManualClock.advance expects ms >= 0, got {ms}")
        self.set(self._now + ms)
