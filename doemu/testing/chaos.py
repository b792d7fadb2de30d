"""Chaos mode for the in-process harness: every event on a fresh instance, resets at awaits.

Recovery code (``on_fiber_recovered``, state rebuilt in a constructor, an alarm that resumes
work) only runs after an eviction or a crash, which an ordinary test never causes, so it is the
least tested code of a project. Chaos mode makes them happen all the time, as Temporal's test
suites replay every workflow with no workflow cache:

* **eviction** (always on in chaos mode): after every event an object handles, once nothing of it
  is in flight (no event, ``waitUntil`` or ``blockConcurrencyWhile``), it is evicted gracefully —
  what idleness does after 70–140 s, done at once. The next event builds a new instance, so state
  kept only in memory between events is gone and only what is in storage remains.
* **resets** (``reset_probability`` > 0): at every await of an object's event handler, and of any
  task the object's code started (fibers, ``waitUntil`` work, ``blockConcurrencyWhile``), the
  object is reset with that probability: uncommitted writes of the turn are dropped, the instance
  is dropped, and in-flight work is cancelled (callers get :class:`~doemu.errors.ObjectResetError`),
  which is what ``h.reset(...)`` does and what a crash looks like to the next activation. The
  draws come from a :class:`random.Random` seeded by the test, so a seed replays the same resets.

:class:`ChaosRuntime` is a :class:`~doemu.runtime.Runtime` that overrides two of the services an
object host uses (``activated`` and ``idle``) and, while started, installs a task factory on the
running loop that wraps only tasks created inside one of its objects. A harness without chaos
builds a plain ``Runtime``: nothing here runs.
"""

from __future__ import annotations

import asyncio
import random
import weakref
from collections.abc import Awaitable, Coroutine, Generator
from dataclasses import dataclass, field
from typing import Any

from ..objects import ObjectHost, current_host
from ..objects.services import Evictable
from ..runtime import Runtime

__all__ = ["ChaosRuntime", "ChaosSettings", "ChaosStats"]


@dataclass(frozen=True)
class ChaosSettings:
    """What chaos mode does: evict after every event, and reset at awaits with a probability.

    ``seed`` is the run's seed; each harness draws from its own generator seeded by the seed and
    the test's id (see :meth:`rng_for`), so one test replays alone as in the whole run.
    """

    reset_probability: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.reset_probability <= 1.0:
            raise ValueError(
                f"chaos reset probability must be within [0, 1], got {self.reset_probability}"
            )

    def rng_for(self, test_id: str, index: int = 0) -> random.Random:
        """The generator of the ``index``-th harness of test ``test_id`` (string seeding is
        stable across processes, unlike ``hash``)."""
        return random.Random(f"{self.seed}:{test_id}:{index}")

    def describe(self) -> str:
        resets = (
            f", reset at awaits with p={self.reset_probability:g}" if self.reset_probability else ""
        )
        return f"evict after every event{resets}, seed {self.seed}"

    def replay_options(self) -> str:
        """The command-line options that run these settings again."""
        options = ["--doemu-chaos"]
        if self.reset_probability:
            options.append(f"--doemu-chaos-reset={self.reset_probability:g}")
        options.append(f"--doemu-chaos-seed={self.seed}")
        return " ".join(options)


@dataclass
class ChaosStats:
    """What chaos did in one harness (shown beside a failing test's report)."""

    evictions: int = 0
    resets: int = 0
    #: One line per reset: which object, and the number of the await it happened at.
    log: list[str] = field(default_factory=list)


class ChaosRuntime(Runtime):
    """A runtime whose objects are evicted after every event and reset at random awaits."""

    def __init__(
        self, *, chaos: ChaosSettings, chaos_rng: random.Random, stats: ChaosStats, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.chaos = chaos
        self.chaos_stats = stats
        self._chaos_rng = chaos_rng
        self._awaits = 0
        self._mine: weakref.WeakSet[ObjectHost] = weakref.WeakSet()
        #: Tasks started inside each object (cancelled with it when chaos resets it).
        self._tasks_of: weakref.WeakKeyDictionary[ObjectHost, weakref.WeakSet[asyncio.Task[Any]]]
        self._tasks_of = weakref.WeakKeyDictionary()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous_factory: Any = None

    # -- the services a host uses -----------------------------------------------------------------
    def activated(self, host: Evictable) -> None:
        super().activated(host)
        if isinstance(host, ObjectHost):
            self._mine.add(host)
            if self.chaos.reset_probability:
                generation = host.generation
                host.interpose = lambda awaitable: _Stepper(self, host, generation, awaitable)

    def idle(self, host: Evictable) -> None:
        """Nothing of ``host`` is in flight: evict it now instead of after an idle window."""
        if host.live and not self.closed and isinstance(host, ObjectHost):
            self.chaos_stats.evictions += 1
            host.evict_now()
            return
        super().idle(host)

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self, *, hold_alarms: bool = False) -> None:
        if not self.started and self.chaos.reset_probability:
            loop = asyncio.get_running_loop()
            self._loop = loop
            self._previous_factory = loop.get_task_factory()
            loop.set_task_factory(self._task_factory)
        await super().start(hold_alarms=hold_alarms)

    async def close(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None and loop.get_task_factory() == self._task_factory:
            loop.set_task_factory(self._previous_factory)
        await super().close()

    # -- resets at awaits ------------------------------------------------------------------------
    def _task_factory(
        self, loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any
    ) -> asyncio.Future[Any]:
        """Tasks created inside one of this runtime's live objects step through a
        :class:`_Stepper`; every other task is created exactly as without chaos."""
        host = current_host.get()
        owned = host is not None and host.live and host in self._mine and not self.closed
        if owned:
            assert host is not None
            coro = _stepped(_Stepper(self, host, host.generation, coro))
        previous = self._previous_factory
        if previous is not None:
            task: asyncio.Future[Any] = previous(loop, coro, **kwargs)
        else:
            task = asyncio.Task(coro, loop=loop, **kwargs)
        if owned and isinstance(task, asyncio.Task):
            assert host is not None
            self._tasks_of.setdefault(host, weakref.WeakSet()).add(task)
        return task

    def _draw(self, host: ObjectHost, generation: int) -> bool:
        """At one await of ``host``'s work: reset it now? (Only the instance the work belongs
        to: work left over from an earlier instance is not counted.)"""
        if self.closed or not host.live or host.generation != generation:
            return False
        self._awaits += 1
        if self._chaos_rng.random() >= self.chaos.reset_probability:
            return False
        stats = self.chaos_stats
        stats.resets += 1
        who = f"{host.kind.binding}/{host.id.name or host.hex_id}"
        stats.log.append(f"{who}: reset at await #{self._awaits}")
        current = asyncio.current_task()
        for task in list(self._tasks_of.pop(host, ())):
            if task is not current:
                task.cancel()
        host.reset(f"doemu chaos: reset at an await (seed {self.chaos.seed})")
        return True


async def _stepped(stepper: _Stepper) -> Any:
    """A coroutine for the task factory (tasks want a coroutine, not any awaitable)."""
    return await stepper


class _Stepper:
    """Drives an awaitable by hand so that each of its suspensions is a chance to reset.

    The reset happens *at* the await, before the event loop runs anything else: the turn's writes
    (committed by a ``call_soon`` when the turn yields) are rolled back with the instance, and the
    awaiting code gets a :class:`asyncio.CancelledError` there, as after ``task.cancel()``.
    """

    __slots__ = ("_generation", "_host", "_inner", "_runtime")

    def __init__(
        self,
        runtime: ChaosRuntime,
        host: ObjectHost,
        generation: int,
        awaitable: Awaitable[Any] | Coroutine[Any, Any, Any],
    ) -> None:
        self._runtime = runtime
        self._host = host
        self._generation = generation
        self._inner = awaitable

    def __await__(self) -> Generator[Any, Any, Any]:
        inner = self._inner.__await__()
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                if error is not None:
                    yielded = inner.throw(error)
                else:
                    yielded = inner.send(value)
            except StopIteration as stop:
                return stop.value
            value = error = None
            if self._runtime._draw(self._host, self._generation):
                if isinstance(yielded, asyncio.Future):
                    yielded.cancel()  # what task.cancel() does to the future being awaited
                error = asyncio.CancelledError()
                continue
            try:
                value = yield yielded
            except BaseException as exc:  # cancellation and thrown errors go to the inner code
                error = exc
