"""Durable fibers (Layer 2 of durable agents): ``run_fiber``, ``stash`` and recovery.

A fiber is user code registered in ``cf_agents_runs`` before it runs and deleted when it ends,
so a row that outlives its process is proof of interrupted work. While it runs the fiber holds a
``keep_alive()`` reference (the heartbeat keeps the object from idling out) and may checkpoint
with ``stash(data)``. The function itself cannot survive a crash — closures are not serialisable
— so after an eviction or crash the next activation (or the heartbeat alarm, whichever comes
first) hands each orphaned row to ``on_fiber_recovered(ctx)`` with its ``name``, ``snapshot`` and
``created_at``, and the agent decides how to resume. The scan itself and its retry back-off live
in :mod:`agents.fiber_recovery`.

Table, columns and units are the SDK's (``packages/agents/src/index.ts``, ``_ensureSchema``):
``cf_agents_runs(id, name, snapshot, created_at)`` with ``created_at`` in milliseconds.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from js import Date

from ..errors import FiberError, NotInFiberError
from ..fibers.types import FiberContext, FiberRecoveryContext, FiberResolution, FiberSignal
from ..keepalive import KeepAlive
from . import recovery as fiber_recovery

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["SCHEMA", "FibersMixin"]

T = TypeVar("T")

_log = logging.getLogger("agents.fibers")

SCHEMA: tuple[str, ...] = (
    # The SDK's DDL, verbatim in shape: a row exists only while its fiber runs.
    """CREATE TABLE IF NOT EXISTS cf_agents_runs (
  id TEXT PRIMARY KEY NOT NULL,
  name TEXT NOT NULL,
  snapshot TEXT,
  created_at INTEGER NOT NULL
)""",
    *fiber_recovery.SCHEMA,
)

#: The fiber whose code is running in the current task (``self.stash`` looks it up here). A
#: ContextVar, not an attribute, so that concurrent fibers in different tasks never mix up.
_current_fiber: contextvars.ContextVar[_FiberRun | None] = contextvars.ContextVar(
    "agents_current_fiber", default=None
)

FiberFn = Callable[[FiberContext], Awaitable[T]]


@dataclass
class _FiberRun:
    """In-memory bookkeeping of one running fiber (the durable half is its SQL row)."""

    id: str
    name: str
    managed: bool
    signal: FiberSignal
    ctx: FiberContext
    keep_alive: KeepAlive | None = None
    #: Called synchronously with the outcome just before the row is deleted (managed ledger).
    on_settle: Callable[[BaseException | None], None] | None = field(default=None, repr=False)


class FibersMixin:
    """``run_fiber`` / ``stash`` / ``on_fiber_recovered``; part of :class:`~agents.agent.Agent`."""

    _fiber_runs: dict[str, _FiberRun]
    _fiber_scan_running: bool

    def _init_fibers(self) -> None:
        self._fiber_runs = {}
        self._fiber_scan_running = False

    def _fiber_agent(self) -> Agent:
        return self  # type: ignore[return-value]

    # -- running ---------------------------------------------------------------------------------
    def run_fiber(self, name: str, fn: FiberFn[T]) -> asyncio.Task[T]:
        """Start ``fn(ctx)`` as a durable fiber; the returned task settles with its outcome.

        A plain function, not ``async def``, on purpose: the ``cf_agents_runs`` row is inserted
        *before this returns* (JavaScript runs an async function up to its first ``await`` in
        the same way), so a fire-and-forget ``self.ctx.waitUntil(self.run_fiber(...))`` commits
        the row with the caller's turn. Were the insert left to the task's first step, a crash
        right after the RPC answered (or a recovery hook's hand-off, whose old row is deleted in
        the same turn) would lose the fiber without a trace.

        ``await self.run_fiber(...)`` returns (or re-raises) ``fn``'s outcome. The row is deleted
        when ``fn`` returns or raises, and also when *your* code cancels it (``wait_for``,
        ``asyncio.timeout``, a ``TaskGroup`` sibling): a deliberate cancellation is an ending,
        not an interruption. A crash or reset closes storage first, so the row survives and
        recovery hands it to :meth:`on_fiber_recovered`.

        The answer is a scheduled task, not a coroutine: ``await`` it, ``asyncio.wait_for`` it or
        pass it to ``waitUntil``; ``TaskGroup.create_task`` wants a coroutine, so there wrap it
        (``async def job(): return await self.run_fiber(...)``).
        """
        loop = asyncio.get_running_loop()  # fail before registering anything
        run = self._begin_fiber(uuid.uuid4().hex, name, managed=False)
        return self._spawn_fiber(loop, run, self._run_fiber_body(run, fn))

    def stash(self, data: Any) -> None:
        """Checkpoint the *current* fiber (found through a context variable).

        Works with concurrent fibers (each task sees its own); raises :class:`NotInFiberError`
        outside a fiber.
        """
        run = _current_fiber.get()
        if run is None or run.id not in self._fiber_runs:
            raise NotInFiberError("stash() called outside a fiber (use it inside run_fiber)")
        run.ctx.stash(data)

    @property
    def running_fiber_ids(self) -> frozenset[str]:
        """Ids of the fibers running in this process right now."""
        return frozenset(self._fiber_runs)

    def _begin_fiber(
        self,
        fiber_id: str,
        name: str,
        *,
        managed: bool,
        signal: FiberSignal | None = None,
    ) -> _FiberRun:
        """Register a fiber synchronously: row inserted, marked running here, keep-alive held."""
        agent = self._fiber_agent()
        signal = signal if signal is not None else FiberSignal()

        def write_snapshot(data: Any) -> None:
            try:
                text = json.dumps(data)
            except (TypeError, ValueError) as exc:
                raise FiberError(f"stash() needs JSON-serialisable data: {exc}") from exc
            agent._exec("UPDATE cf_agents_runs SET snapshot = ? WHERE id = ?", text, fiber_id)
            if managed:
                agent._exec(
                    "UPDATE cf_agents_fibers SET snapshot = ? WHERE fiber_id = ?", text, fiber_id
                )

        agent._exec(
            "INSERT INTO cf_agents_runs (id, name, snapshot, created_at) VALUES (?, ?, NULL, ?)",
            fiber_id,
            name,
            int(Date.now()),
        )
        ctx = FiberContext(id=fiber_id, name=name, signal=signal, _stash=write_snapshot)
        run = _FiberRun(id=fiber_id, name=name, managed=managed, signal=signal, ctx=ctx)
        self._fiber_runs[fiber_id] = run
        run.keep_alive = agent.keep_alive()
        return run

    def _spawn_fiber(
        self,
        loop: asyncio.AbstractEventLoop,
        run: _FiberRun,
        coro: Coroutine[Any, Any, T],
    ) -> asyncio.Task[T]:
        """Run ``coro`` (which drives ``run``) as a task, cleaning up if it never starts.

        A task cancelled before its first step never enters the coroutine, so its ``finally``
        never runs; the done callback then ends the fiber as a cancelled one.
        """
        task = loop.create_task(coro)
        task.add_done_callback(lambda _task: self._abandon_unstarted(run))
        return task

    def _abandon_unstarted(self, run: _FiberRun) -> None:
        if self._fiber_runs.get(run.id) is run:
            del self._fiber_runs[run.id]
            self._end_cancelled(run, asyncio.CancelledError())

    async def _run_fiber_body(self, run: _FiberRun, fn: FiberFn[T]) -> T:
        """Run ``fn`` for a begun fiber; settle and clean up however it ends.

        Always runs in a task of its own (:meth:`_spawn_fiber`), so the context variable set
        here never leaks to the caller and needs no reset.
        """
        _current_fiber.set(run)
        cancelled: asyncio.CancelledError | None = None
        abandoned = False
        outcome: BaseException | None = None
        try:
            result: Any = fn(run.ctx)  # a plain function is accepted too
            if inspect.isawaitable(result):
                result = await result
            return cast(T, result)
        except asyncio.CancelledError as exc:
            cancelled = exc
            raise
        except GeneratorExit:
            abandoned = True  # the event loop is being torn down with the fiber pending
            raise
        except BaseException as exc:
            outcome = exc
            raise
        finally:
            self._fiber_runs.pop(run.id, None)
            if abandoned:
                self._release_quietly(run)  # like a crash: the row stays for recovery
            elif cancelled is not None:
                self._end_cancelled(run, cancelled)
            else:
                try:
                    if run.on_settle is not None:
                        run.on_settle(outcome)
                    self._fiber_agent()._exec("DELETE FROM cf_agents_runs WHERE id = ?", run.id)
                finally:
                    if run.keep_alive is not None:
                        run.keep_alive()

    def _end_cancelled(self, run: _FiberRun, cancelled: asyncio.CancelledError) -> None:
        """A cancelled fiber: settle it and delete its row *if storage still works*.

        A cancellation from the user's own code (``wait_for``, ``asyncio.timeout``, a TaskGroup)
        ends the fiber — keeping its row would have recovery "resume" it in this very process.
        A reset or crash closes storage before the cancellation arrives, so these writes fail
        and the row survives for recovery, exactly as after a SIGKILL. Never raises: the caller
        is re-raising the cancellation.
        """
        try:
            if run.on_settle is not None:
                run.on_settle(cancelled)
            self._fiber_agent()._exec("DELETE FROM cf_agents_runs WHERE id = ?", run.id)
        except Exception as exc:  # storage closed by a reset: the row stays for recovery
            _log.debug("fiber %s cancelled; its row is kept (%r)", run.id, exc)
        self._release_quietly(run)

    @staticmethod
    def _release_quietly(run: _FiberRun) -> None:
        """Release the keep-alive of an ended fiber; storage may already be closed (reset)."""
        if run.keep_alive is None:
            return
        try:
            run.keep_alive()
        except Exception:  # the object is being torn down; nothing left to re-arm
            _log.debug("keep-alive release after fiber %s ended failed", run.id)

    # -- recovery --------------------------------------------------------------------------------
    async def on_fiber_recovered(
        self, ctx: FiberRecoveryContext
    ) -> FiberResolution | dict[str, Any] | None:
        """Called for each fiber left behind by a dead process; override to resume it.

        Returning deletes the ``cf_agents_runs`` row; raising keeps it and the agent retries
        with back-off (``keep_alive_interval_ms × 2ⁿ``, at most 5 minutes) until
        ``fiber_recovery_max_age_ms`` after ``ctx.created_at``. For a managed fiber
        (``ctx.managed``) the hook may return a :class:`FiberResolution` to settle it.

        At activation this runs inside ``blockConcurrencyWhile`` (30 s limit, nothing else is
        delivered meanwhile): do not run the resumed work inline. Start it in the background and
        return, e.g. ``self.ctx.waitUntil(self.run_fiber(ctx.name, resume_from(ctx.snapshot)))``.
        """
        _log.warning(
            "agent %s: fiber %r (%s) was interrupted and on_fiber_recovered is not overridden; "
            "its work is dropped",
            self._fiber_agent().name,
            ctx.name,
            ctx.id,
        )
        return None

    async def _check_run_fibers(self) -> None:
        """Recover orphaned fibers (guarded: never two scans at once). See fiber_recovery."""
        await fiber_recovery.check_run_fibers(self._fiber_agent())

    def _next_fiber_recovery_ms(self, now: float) -> float | None:
        """When recovery next needs the alarm (a due retry, or a heartbeat while rows remain)."""
        return fiber_recovery.next_recovery_ms(self._fiber_agent(), now)
