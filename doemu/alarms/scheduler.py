"""One scheduler for every alarm of the runtime: a heap of due times and a single timer.

There is one timer however many objects have alarms, and at most
:data:`MAX_CONCURRENT_DELIVERIES` deliveries run at once (see :meth:`AlarmScheduler._start_due`).
The scheduler only says *when*; what a delivery does, and what happens when it fails, is
:mod:`doemu.alarms.service`'s business.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import itertools
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from ..clock import Clock, TimerHandle

__all__ = ["MAX_CONCURRENT_DELIVERIES", "AlarmKey", "AlarmScheduler", "Deliver"]

_log = logging.getLogger("doemu.alarms")

#: Alarm handlers running at once. A restart can find thousands of overdue alarms; delivering
#: them all at once would monopolise the loop, so the server could not answer anything else.
MAX_CONCURRENT_DELIVERIES = 32

#: (namespace unique key, 64-hex actor id)
AlarmKey = tuple[str, str]

#: What the scheduler calls (as a task) when an alarm is due: ``deliver(key, scheduled_ms)``.
Deliver = Callable[[AlarmKey, float], Coroutine[Any, Any, None]]


class AlarmScheduler:
    """One heap of due times and one clock timer for every alarm of the runtime.

    ``deliver(key, scheduled_ms)`` is called (as a task) when an alarm is due. A key is never
    delivered twice concurrently: if it comes due again while its delivery still runs, the new
    time waits until the running one ends, as workerd never runs two alarm handlers of one object
    at once.

    Due alarms go before new events (see :meth:`preempting`): a busy loop would otherwise run
    every request already queued, then the timer, then the requests read meanwhile, before a
    delivery task got its first step, so an alarm was as late as two loop iterations of work.
    """

    def __init__(self, clock: Clock, deliver: Deliver) -> None:
        self._clock = clock
        self._deliver = deliver
        self._due: dict[AlarmKey, float] = {}
        self._heap: list[tuple[float, int, AlarmKey]] = []
        self._seq = itertools.count()
        self._timer: TimerHandle | None = None
        self._timer_at: float | None = None
        self._running: dict[AlarmKey, asyncio.Task[None]] = {}
        #: Deliveries started whose task has not taken its first step yet.
        self._unstarted: set[AlarmKey] = set()
        self._closed = False

    def __len__(self) -> int:
        return len(self._due)

    def get(self, key: AlarmKey) -> float | None:
        return self._due.get(key)

    def pending(self) -> dict[AlarmKey, float]:
        return dict(self._due)

    def set(self, key: AlarmKey, when_ms: float) -> None:
        """Schedule (or move) ``key``'s alarm to ``when_ms``."""
        if self._due.get(key) == when_ms:
            return
        self._due[key] = when_ms
        heapq.heappush(self._heap, (when_ms, next(self._seq), key))
        if self._timer_at is None or when_ms < self._timer_at:
            self._arm()

    def load(self, entries: list[tuple[AlarmKey, float]]) -> None:
        """Bulk-load persisted alarms at start-up (one heapify, one timer)."""
        for key, when in entries:
            self._due[key] = when
        self._heap = [(when, next(self._seq), key) for key, when in self._due.items()]
        heapq.heapify(self._heap)
        self._arm()

    def cancel(self, key: AlarmKey) -> None:
        self._due.pop(key, None)  # the heap entry goes stale and is skipped when popped

    def _peek(self) -> float | None:
        heap = self._heap
        while heap:
            when, _, key = heap[0]
            if self._due.get(key) == when:
                return when
            heapq.heappop(heap)
        return None

    def _arm(self) -> None:
        if self._closed:
            return
        if len(self._running) >= MAX_CONCURRENT_DELIVERIES:
            # Saturated: the next start comes from _finished(), not from a timer (a timer for an
            # overdue time would fire at once, find no free slot and re-arm, spinning).
            if self._timer is not None:
                self._timer.cancel()
            self._timer = None
            self._timer_at = None
            return
        nxt = self._peek()
        if nxt == self._timer_at and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timer_at = None
        if nxt is not None:
            self._timer_at = nxt
            self._timer = self._clock.call_at(nxt, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = None
        self._start_due()
        self._arm()

    def preempting(self) -> bool:
        """Whether an event about to start should first let due alarm deliveries begin.

        The host asks before every event but an alarm. An alarm whose time has passed while the
        loop was busy (its timer has not run yet) is started now; then, while any started
        delivery has not taken its first step, the event yields once, which puts it behind those
        deliveries in the loop's queue. An event yields at most once, so a flood of overdue
        alarms (bounded anyway by :data:`MAX_CONCURRENT_DELIVERIES`) never starves requests.
        A clock read and two comparisons when nothing is due. A manual clock fires its timers
        itself the moment it is moved, and nothing may fire before a test moves it.
        """
        at = self._timer_at
        if at is not None and not self._clock.manual and at <= self._clock.now():
            if self._timer is not None:
                self._timer.cancel()
            self._fire()
        return bool(self._unstarted)

    def _start_due(self) -> None:
        """Start due deliveries, at most :data:`MAX_CONCURRENT_DELIVERIES` running at once.

        The bound is on *started* deliveries, not on a semaphore inside them: a handler that
        never really suspends finishes within the step that started it, so thousands of tasks
        created at once would all run in one loop iteration and the loop would not poll its
        sockets until the last one ended. The rest start from :meth:`_finished`, a done
        callback, which runs in a later iteration: network I/O is served between batches.
        """
        now = self._clock.now()
        heap = self._heap
        while heap and len(self._running) < MAX_CONCURRENT_DELIVERIES:
            when, _, key = heap[0]
            if self._due.get(key) != when:
                heapq.heappop(heap)
                continue
            if when > now:
                break
            heapq.heappop(heap)
            if key in self._running:
                continue  # it comes due again while it runs: _finished() re-queues it
            del self._due[key]
            self._start(key, when)

    def _start(self, key: AlarmKey, when: float) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(self._run(key, when))
        self._running[key] = task
        self._unstarted.add(key)
        task.add_done_callback(functools.partial(self._finished, key))

    async def _run(self, key: AlarmKey, when: float) -> None:
        self._unstarted.discard(key)
        await self._deliver(key, when)

    def _finished(self, key: AlarmKey, task: asyncio.Task[None]) -> None:
        self._running.pop(key, None)
        self._unstarted.discard(key)  # cancelled before its first step
        if not task.cancelled() and task.exception() is not None:
            _log.error("alarm delivery for %s crashed", key, exc_info=task.exception())
        when = self._due.get(key)
        if when is not None:
            heapq.heappush(self._heap, (when, next(self._seq), key))
        if not self._closed:
            self._start_due()
            self._arm()

    def start_now(self, key: AlarmKey, when: float) -> asyncio.Task[None]:
        """Deliver ``key``'s alarm now (an admin "run now"), tracked like any delivery: a timer
        that comes due for the same key meanwhile — the commit that brought the alarm forward is
        mirrored after an fsync at power durability — waits for it instead of running the
        handler a second time; one the timer already started *is* the delivery asked for."""
        self._due.pop(key, None)
        running = self._running.get(key)
        if running is None:
            self._start(key, when)
            running = self._running[key]
        return running

    def running_task(self, key: AlarmKey) -> asyncio.Task[None] | None:
        """The delivery of ``key`` in progress, if any."""
        return self._running.get(key)

    def running(self) -> list[asyncio.Task[None]]:
        return list(self._running.values())

    async def idle(self) -> None:
        """Wait until no delivery is running (tests use it after advancing a manual clock)."""
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)

    def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._timer_at = None
        for task in self._running.values():
            task.cancel()
