"""Managed fibers: a retained, idempotent job ledger on top of durable fibers.

``run_fiber`` keeps a row only while its code runs; ``start_fiber`` additionally records the job
in ``cf_agents_fibers`` (:mod:`agents.fibers.ledger`) and keeps it after it ends, so callers can
``inspect_fiber``, ``list_fibers``, ``cancel_fiber`` (cooperatively, through ``ctx.signal``),
``resolve_fiber`` and ``delete_fibers``. The ledger row is written *before* the work starts — the
durable acceptance boundary — and a second ``start_fiber`` with the same ``idempotency_key`` (or
``fiber_id``) returns the existing record with ``accepted=False`` and never runs ``fn`` again.

Statuses go ``pending`` → ``running`` → ``completed`` / ``aborted`` / ``error``; a fiber whose
process died becomes ``interrupted`` at recovery (:mod:`agents.fibers.recovery`), where
``on_fiber_recovered`` (or a later ``resolve_fiber``) may settle it, e.g. as ``completed``.

Behaviour follows the SDK (``packages/agents/src/capabilities/fibers.ts``); times are ms.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from ..core.host import AgentHost, Core
from ..errors import FiberConflictError
from .ledger import LEDGER_COLUMNS, FiberLedger, FiberRecord, record_from_row
from .recovery import FiberRecovery
from .runs import FiberRuns
from .types import (
    TERMINAL_STATUSES,
    FiberContext,
    FiberResolution,
    FiberSignal,
    FiberStatus,
)

__all__ = ["ManagedFibers", "ManagedFn", "StatusFilter"]

_log = logging.getLogger("agents.fibers")

ManagedFn = Callable[[FiberContext], Awaitable[Any]]
StatusFilter = FiberStatus | str | Iterable[FiberStatus | str] | None


def _resolved(loop: asyncio.AbstractEventLoop, record: FiberRecord) -> asyncio.Future[FiberRecord]:
    future: asyncio.Future[FiberRecord] = loop.create_future()
    future.set_result(record)
    return future


def _statuses(status: StatusFilter) -> list[FiberStatus] | None:
    if status is None:
        return None
    if isinstance(status, str):
        return [FiberStatus(status)]
    return [FiberStatus(s) for s in status]


def _ms(value: float | _dt.datetime) -> float:
    return value.timestamp() * 1000 if isinstance(value, _dt.datetime) else float(value)


class ManagedFibers:
    """``start_fiber`` and the ledger operations of one agent."""

    __slots__ = ("_core", "_host", "_ledger", "_recovery", "_runs", "_signals", "_tasks")

    def __init__(
        self,
        core: Core,
        host: AgentHost,
        runs: FiberRuns,
        ledger: FiberLedger,
        recovery: FiberRecovery,
    ) -> None:
        self._core = core
        self._host = host
        self._runs = runs
        self._ledger = ledger
        self._recovery = recovery
        self._tasks: dict[str, asyncio.Future[Any]] = {}
        self._signals: dict[str, FiberSignal] = {}

    # -- starting ----------------------------------------------------------------------------------
    def start_fiber(
        self,
        name: str,
        fn: ManagedFn,
        *,
        fiber_id: str | None = None,
        idempotency_key: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        wait_for_completion: bool = False,
    ) -> asyncio.Future[FiberRecord]:
        """Accept ``fn`` as a managed fiber and start it in the background; await the answer.

        The answer is the record (``accepted=True``; status ``running``), or — when
        ``fiber_id`` or ``idempotency_key`` names an existing fiber — that fiber's record with
        ``accepted=False``, without running ``fn``. With ``wait_for_completion`` the answer is
        the record once the fiber is terminal. ``fn`` should check ``ctx.signal`` between steps
        so that ``cancel_fiber`` can stop it.

        A plain function returning a future, not ``async def``: the ledger row and the run row
        are written *before this returns*, so even a fire-and-forget
        ``self.ctx.waitUntil(self.start_fiber(...))`` commits the job with the caller's turn.
        Invalid arguments (:class:`FiberConflictError`) raise here, at the call.
        """
        loop = asyncio.get_running_loop()
        ledger = self._ledger
        if fiber_id is not None and not fiber_id.strip():
            raise FiberConflictError("fiber_id must not be blank")
        if idempotency_key is not None and not idempotency_key.strip():
            raise FiberConflictError("idempotency_key must not be blank")
        fid = fiber_id if fiber_id is not None else uuid.uuid4().hex
        by_id = ledger.read(fid)
        by_key = ledger.read_by_key(idempotency_key) if idempotency_key else None
        if by_key is not None and (
            (by_id is not None and by_id["fiber_id"] != by_key["fiber_id"])
            or (fiber_id is not None and by_key["fiber_id"] != fiber_id)
        ):
            raise FiberConflictError("fiber_id and idempotency_key refer to different fibers")
        existing = by_id or by_key
        if existing is not None:
            if wait_for_completion and FiberStatus(existing["status"]) not in TERMINAL_STATUSES:
                return loop.create_task(self._wait_terminal(existing["fiber_id"], accepted=False))
            return _resolved(loop, record_from_row(existing, accepted=False))

        self._core.exec(
            f"INSERT INTO cf_agents_fibers ({LEDGER_COLUMNS}) "
            "VALUES (?, ?, ?, 'pending', NULL, ?, NULL, ?, NULL, NULL)",
            fid,
            idempotency_key,
            name,
            json.dumps(dict(metadata)) if metadata else None,
            int(self._core.now()),
        )
        self._launch(loop, fid, name, fn)
        if wait_for_completion:
            return loop.create_task(self._wait_terminal(fid, accepted=True))
        row = ledger.read(fid)
        assert row is not None
        return _resolved(loop, record_from_row(row, accepted=True))

    def _launch(
        self, loop: asyncio.AbstractEventLoop, fiber_id: str, name: str, fn: ManagedFn
    ) -> None:
        """pending → running, run row inserted, all before this returns; body in the background.

        Synchronous on purpose: no scan can see a ``pending`` ledger row without a live run.
        """
        runs, host = self._runs, self._host
        signal = FiberSignal()
        self._core.exec(
            "UPDATE cf_agents_fibers SET status = 'running', started_at = ? "
            "WHERE fiber_id = ? AND status = 'pending'",
            int(self._core.now()),
            fiber_id,
        )
        run = runs.begin(fiber_id, name, managed=True, signal=signal)
        run.on_settle = lambda outcome: self._settle(fiber_id, outcome, signal)
        self._signals[fiber_id] = signal

        async def body() -> None:
            try:
                await runs.body(run, fn)
            except Exception:
                _log.exception("agent %s: managed fiber %r (%s) failed", host.name, name, fiber_id)

        def forget(_task: asyncio.Task[None]) -> None:
            self._signals.pop(fiber_id, None)
            self._tasks.pop(fiber_id, None)

        task = runs.spawn(loop, run, body())
        task.add_done_callback(forget)
        self._tasks[fiber_id] = task
        self._core.wait_until(task)

    def _settle(self, fiber_id: str, outcome: BaseException | None, signal: FiberSignal) -> None:
        """Record how the fiber's code ended (only if it is still ``running`` in the ledger).

        A cancellation by the agent's own code (``asyncio.CancelledError``) counts as
        ``aborted``, like ``cancel_fiber``.
        """
        core = self._core
        now = int(core.now())
        if outcome is None:
            core.exec(
                "UPDATE cf_agents_fibers SET status = 'completed', completed_at = ? "
                "WHERE fiber_id = ? AND status = 'running'",
                now,
                fiber_id,
            )
        else:
            cancelled = isinstance(outcome, asyncio.CancelledError)
            aborted = signal.aborted or cancelled
            status = FiberStatus.ABORTED if aborted else FiberStatus.ERROR
            message = str(outcome) or ("fiber was cancelled" if cancelled else "")
            core.exec(
                "UPDATE cf_agents_fibers SET status = ?, error_message = ?, completed_at = ? "
                "WHERE fiber_id = ? AND status = 'running'",
                status.value,
                message or type(outcome).__name__,
                now,
                fiber_id,
            )
        self._ledger.notify_terminal(fiber_id)

    # -- waiting -----------------------------------------------------------------------------------
    async def _wait_terminal(self, fiber_id: str, *, accepted: bool) -> FiberRecord:
        ledger = self._ledger
        row = ledger.read(fiber_id)
        if row is not None and FiberStatus(row["status"]) not in TERMINAL_STATUSES:
            if fiber_id not in self._tasks:
                await self._recovery.scan()  # left by a dead process
            row = ledger.read(fiber_id)
            if row is not None and FiberStatus(row["status"]) not in TERMINAL_STATUSES:
                await ledger.add_waiter(fiber_id)
                row = ledger.read(fiber_id)
        if row is None:
            raise FiberConflictError(f"fiber {fiber_id} no longer exists")
        return record_from_row(row, accepted=accepted)

    # -- inspection --------------------------------------------------------------------------------
    def task(self, fiber_id: str) -> asyncio.Future[Any] | None:
        """The background task of a managed fiber running in this process, if any."""
        return self._tasks.get(fiber_id)

    async def inspect_fiber(self, fiber_id: str) -> FiberRecord | None:
        """The managed fiber's record, or None."""
        row = self._ledger.read(fiber_id)
        return None if row is None else record_from_row(row)

    async def inspect_fiber_by_key(self, idempotency_key: str) -> FiberRecord | None:
        row = self._ledger.read_by_key(idempotency_key)
        return None if row is None else record_from_row(row)

    async def list_fibers(
        self, status: StatusFilter = None, name: str | None = None, limit: int | None = None
    ) -> list[FiberRecord]:
        """Newest first; ``status`` may be one status or several; ``limit`` 1..100 (50)."""
        lim = min(max(limit if limit is not None else 50, 1), 100)
        where: list[str] = []
        params: list[Any] = []
        wanted = _statuses(status)
        if wanted is not None:
            where.append(f"status IN ({', '.join('?' for _ in wanted)})")
            params.extend(s.value for s in wanted)
        if name is not None:
            where.append("name = ?")
            params.append(name)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = self._core.sql(
            f"SELECT {LEDGER_COLUMNS} FROM cf_agents_fibers{clause} "
            "ORDER BY created_at DESC, fiber_id DESC LIMIT ?",
            *params,
            lim,
        )
        return [record_from_row(r) for r in rows]

    # -- control -----------------------------------------------------------------------------------
    async def cancel_fiber(self, fiber_id: str, reason: str | None = None) -> bool:
        """Mark a pending/running fiber ``aborted`` and signal its code; False if terminal/absent.

        Cooperative: the code sees ``ctx.signal.aborted`` (or ``throw_if_aborted()`` raises) and
        should stop; the ledger says ``aborted`` from this moment whatever it does.
        """
        row = self._ledger.read(fiber_id)
        if row is None or FiberStatus(row["status"]) in TERMINAL_STATUSES:
            return False
        self._core.exec(
            "UPDATE cf_agents_fibers SET status = 'aborted', error_message = ?, completed_at = ? "
            "WHERE fiber_id = ? AND status IN ('pending', 'running')",
            reason,
            int(self._core.now()),
            fiber_id,
        )
        signal = self._signals.get(fiber_id)
        if signal is not None:
            signal.abort(reason)
        self._ledger.notify_terminal(fiber_id)
        return True

    async def cancel_fiber_by_key(self, idempotency_key: str, reason: str | None = None) -> bool:
        row = self._ledger.read_by_key(idempotency_key)
        return False if row is None else await self.cancel_fiber(row["fiber_id"], reason)

    async def resolve_fiber(
        self, fiber_id: str, result: FiberResolution | Mapping[str, Any]
    ) -> bool:
        """Settle an ``interrupted`` fiber (e.g. ``{"status": "completed"}``); False otherwise."""
        resolution = FiberResolution.coerce(result)
        row = self._ledger.read(fiber_id)
        if row is None or row["status"] != FiberStatus.INTERRUPTED:
            return False
        self._ledger.apply_resolution(fiber_id, resolution)
        return True

    async def delete_fibers(
        self,
        status: StatusFilter = None,
        *,
        settled_before: float | _dt.datetime | None = None,
        limit: int | None = None,
    ) -> int:
        """Delete terminal records (default: completed, aborted, error), oldest settled first."""
        wanted = _statuses(status) or [
            FiberStatus.COMPLETED,
            FiberStatus.ABORTED,
            FiberStatus.ERROR,
        ]
        terminal = [s.value for s in wanted if s in TERMINAL_STATUSES]
        if not terminal:
            return 0
        lim = min(max(limit if limit is not None else 100, 1), 500)
        params: list[Any] = list(terminal)
        clause = f"status IN ({', '.join('?' for _ in terminal)})"
        if settled_before is not None:
            clause += " AND completed_at IS NOT NULL AND completed_at < ?"
            params.append(_ms(settled_before))
        rows = self._core.sql(
            f"SELECT fiber_id FROM cf_agents_fibers WHERE {clause} "
            "ORDER BY completed_at ASC, created_at ASC LIMIT ?",
            *params,
            lim,
        )
        for row in rows:
            self._core.exec("DELETE FROM cf_agents_fibers WHERE fiber_id = ?", row["fiber_id"])
        return len(rows)
