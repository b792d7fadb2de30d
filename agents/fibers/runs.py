"""Durable fibers (Layer 2 of durable agents): ``run_fiber`` and ``stash``.

A fiber is user code registered in ``cf_agents_runs`` before it runs and deleted when it ends,
so a row that outlives its process is proof of interrupted work. While it runs the fiber holds a
``keep_alive()`` reference (the heartbeat keeps the object from idling out) and may checkpoint
with ``stash(data)``. The function itself cannot survive a crash — closures are not serialisable
— so after an eviction or crash the next activation (or the heartbeat alarm, whichever comes
first) hands each orphaned row to ``on_fiber_recovered(ctx)`` with its ``name``, ``snapshot`` and
``created_at``, and the agent decides how to resume: that is :mod:`agents.fibers.recovery`.

Managed fibers (:mod:`agents.fibers.managed`) run through the same machinery
(:meth:`FiberRuns.begin`, :meth:`FiberRuns.spawn`, :meth:`FiberRuns.body`) with a ledger row on
top; their ``stash`` also updates the ledger's snapshot.

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
from typing import Any, ClassVar, TypeVar, cast

from ..core.host import Core
from ..errors import FiberError, NotInFiberError
from ..keepalive import KeepAlive
from .types import FiberContext, FiberSignal

__all__ = ["SCHEMA", "FiberFn", "FiberRun", "FiberRuns"]

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
)

#: The fiber whose code is running in the current task (``stash`` looks it up here). A
#: ContextVar, not an attribute, so that concurrent fibers in different tasks never mix up.
_current_fiber: contextvars.ContextVar[FiberRun | None] = contextvars.ContextVar(
    "agents_current_fiber", default=None
)

FiberFn = Callable[[FiberContext], Awaitable[T]]


@dataclass
class FiberRun:
    """In-memory bookkeeping of one running fiber (the durable half is its SQL row)."""

    id: str
    name: str
    managed: bool
    signal: FiberSignal
    ctx: FiberContext
    keep_alive: KeepAlive | None = None
    #: Called synchronously with the outcome just before the row is deleted (managed ledger).
    on_settle: Callable[[BaseException | None], None] | None = field(default=None, repr=False)


class FiberRuns:
    """The fibers running in this process and their ``cf_agents_runs`` rows."""

    __slots__ = ("_core", "_keep_alive", "_runs")
    #: The tables this feature owns (the Agent ensures them at every activation).
    SCHEMA: ClassVar[tuple[str, ...]] = SCHEMA

    def __init__(self, core: Core, keep_alive: Callable[[], KeepAlive]) -> None:
        self._core = core
        self._keep_alive = keep_alive
        self._runs: dict[str, FiberRun] = {}

    # -- running -----------------------------------------------------------------------------------
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
        recovery hands it to ``on_fiber_recovered``.

        The answer is a scheduled task, not a coroutine: ``await`` it, ``asyncio.wait_for`` it or
        pass it to ``waitUntil``; ``TaskGroup.create_task`` wants a coroutine, so there wrap it
        (``async def job(): return await self.run_fiber(...)``).
        """
        loop = asyncio.get_running_loop()  # fail before registering anything
        run = self.begin(uuid.uuid4().hex, name, managed=False)
        return self.spawn(loop, run, self.body(run, fn))

    def stash(self, data: Any) -> None:
        """Checkpoint the *current* fiber (found through a context variable).

        Works with concurrent fibers (each task sees its own); raises :class:`NotInFiberError`
        outside a fiber.
        """
        run = _current_fiber.get()
        if run is None or run.id not in self._runs:
            raise NotInFiberError("stash() called outside a fiber (use it inside run_fiber)")
        run.ctx.stash(data)

    @property
    def running_ids(self) -> frozenset[str]:
        """Ids of the fibers running in this process right now."""
        return frozenset(self._runs)

    def is_running(self, fiber_id: str) -> bool:
        """Whether ``fiber_id`` runs in this process (recovery must leave its row alone)."""
        return fiber_id in self._runs

    def begin(
        self,
        fiber_id: str,
        name: str,
        *,
        managed: bool,
        signal: FiberSignal | None = None,
    ) -> FiberRun:
        """Register a fiber synchronously: row inserted, marked running here, keep-alive held."""
        core = self._core
        signal = signal if signal is not None else FiberSignal()

        def write_snapshot(data: Any) -> None:
            try:
                text = json.dumps(data)
            except (TypeError, ValueError) as exc:
                raise FiberError(f"stash() needs JSON-serialisable data: {exc}") from exc
            core.exec("UPDATE cf_agents_runs SET snapshot = ? WHERE id = ?", text, fiber_id)
            if managed:
                core.exec(
                    "UPDATE cf_agents_fibers SET snapshot = ? WHERE fiber_id = ?", text, fiber_id
                )

        core.exec(
            "INSERT INTO cf_agents_runs (id, name, snapshot, created_at) VALUES (?, ?, NULL, ?)",
            fiber_id,
            name,
            int(core.now()),
        )
        ctx = FiberContext(id=fiber_id, name=name, signal=signal, _stash=write_snapshot)
        run = FiberRun(id=fiber_id, name=name, managed=managed, signal=signal, ctx=ctx)
        self._runs[fiber_id] = run
        run.keep_alive = self._keep_alive()
        return run

    def spawn(
        self,
        loop: asyncio.AbstractEventLoop,
        run: FiberRun,
        coro: Coroutine[Any, Any, T],
    ) -> asyncio.Task[T]:
        """Run ``coro`` (which drives ``run``) as a task, cleaning up if it never starts.

        A task cancelled before its first step never enters the coroutine, so its ``finally``
        never runs; the done callback then ends the fiber as a cancelled one.
        """
        task = loop.create_task(coro)
        task.add_done_callback(lambda _task: self._abandon_unstarted(run))
        return task

    def _abandon_unstarted(self, run: FiberRun) -> None:
        if self._runs.get(run.id) is run:
            del self._runs[run.id]
            self._end_cancelled(run, asyncio.CancelledError())

    async def body(self, run: FiberRun, fn: FiberFn[T]) -> T:
        """Run ``fn`` for a begun fiber; settle and clean up however it ends.

        Always runs in a task of its own (:meth:`spawn`), so the context variable set
        here never leaks to the caller and needs no reset.
        """
        _current_fiber.set(run)
        cancelled: asyncio.CancelledError | None = None
        abandoned = False
        outcome: BaseException | None = None
        core = self._core
        started = core.now()
        identity = {"fiberId": run.id, "fiberName": run.name, "managed": run.managed}
        core.emit("fiber:run:started", identity)
        try:
            result: Any = fn(run.ctx)  # a plain function is accepted too
            if inspect.isawaitable(result):
                result = await result
            core.emit("fiber:run:completed", {**identity, "elapsedMs": core.now() - started})
            return cast(T, result)
        except asyncio.CancelledError as exc:
            cancelled = exc
            raise
        except GeneratorExit:
            abandoned = True  # the event loop is being torn down with the fiber pending
            raise
        except BaseException as exc:
            outcome = exc
            core.emit(
                "fiber:run:failed",
                {**identity, "error": str(exc), "elapsedMs": core.now() - started},
            )
            raise
        finally:
            self._runs.pop(run.id, None)
            if abandoned:
                self._release_quietly(run)  # like a crash: the row stays for recovery
            elif cancelled is not None:
                self._end_cancelled(run, cancelled)
            else:
                try:
                    if run.on_settle is not None:
                        run.on_settle(outcome)
                    self._core.exec("DELETE FROM cf_agents_runs WHERE id = ?", run.id)
                finally:
                    if run.keep_alive is not None:
                        run.keep_alive()

    def _end_cancelled(self, run: FiberRun, cancelled: asyncio.CancelledError) -> None:
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
            self._core.exec("DELETE FROM cf_agents_runs WHERE id = ?", run.id)
        except Exception as exc:  # storage closed by a reset: the row stays for recovery
            _log.debug("fiber %s cancelled; its row is kept (%r)", run.id, exc)
        self._release_quietly(run)

    @staticmethod
    def _release_quietly(run: FiberRun) -> None:
        """Release the keep-alive of an ended fiber; storage may already be closed (reset)."""
        if run.keep_alive is None:
            return
        try:
            run.keep_alive()
        except Exception:  # the object is being torn down; nothing left to re-arm
            _log.debug("keep-alive release after fiber %s ended failed", run.id)
