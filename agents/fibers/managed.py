"""Managed fibers: a retained, idempotent job ledger on top of durable fibers.

``run_fiber`` keeps a row only while its code runs; ``start_fiber`` additionally records the job
in ``cf_agents_fibers`` and keeps it after it ends, so callers can ``inspect_fiber``,
``list_fibers``, ``cancel_fiber`` (cooperatively, through ``ctx.signal``) and ``delete_fibers``.
The ledger row is written *before* the work starts — the durable acceptance boundary — and a
second ``start_fiber`` with the same ``idempotency_key`` (or ``fiber_id``) returns the existing
record with ``accepted=False`` and never runs ``fn`` again.

Statuses go ``pending`` → ``running`` → ``completed`` / ``aborted`` / ``error``; a fiber whose
process died becomes ``interrupted`` at recovery, where ``on_fiber_recovered`` (or a later
``resolve_fiber``) may settle it, e.g. as ``completed``.

Table, columns, indexes and behaviour follow the SDK (``packages/agents/src/index.ts`` schema v8
and ``packages/agents/src/capabilities/fibers.ts``); timestamps are milliseconds.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from js import Date

from ..fibers.types import (
    TERMINAL_STATUSES,
    FiberConflictError,
    FiberContext,
    FiberSignal,
    FiberStatus,
    parse_snapshot,
)

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["LEDGER_COLUMNS", "SCHEMA", "FiberRecord", "ManagedFibersMixin", "record_from_row"]

_log = logging.getLogger("agents.fibers")

SCHEMA: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS cf_agents_fibers (
  fiber_id TEXT PRIMARY KEY,
  idempotency_key TEXT UNIQUE,
  name TEXT NOT NULL,
  status TEXT NOT NULL,
  snapshot TEXT,
  metadata_json TEXT,
  error_message TEXT,
  created_at INTEGER NOT NULL,
  started_at INTEGER,
  completed_at INTEGER
)""",
    "CREATE INDEX IF NOT EXISTS idx_fibers_status_created "
    "ON cf_agents_fibers(status, created_at, fiber_id)",
    "CREATE INDEX IF NOT EXISTS idx_fibers_name_status_created "
    "ON cf_agents_fibers(name, status, created_at, fiber_id)",
    "CREATE INDEX IF NOT EXISTS idx_fibers_status_completed "
    "ON cf_agents_fibers(status, completed_at, created_at)",
)

LEDGER_COLUMNS = (
    "fiber_id, idempotency_key, name, status, snapshot, metadata_json, error_message, "
    "created_at, started_at, completed_at"
)

ManagedFn = Callable[[FiberContext], Awaitable[Any]]
StatusFilter = FiberStatus | str | Iterable[FiberStatus | str] | None


@dataclass(frozen=True)
class FiberRecord:
    """A managed fiber as ``inspect_fiber`` / ``list_fibers`` / ``start_fiber`` report it.

    ``accepted`` is only meaningful on ``start_fiber``'s answer: False when an existing fiber
    (same id or idempotency key) was returned instead of starting a new one. ``settled_at`` is
    the SDK's ``settledAt`` (``completed_at`` in the table).
    """

    fiber_id: str
    name: str
    status: FiberStatus
    created_at: float
    idempotency_key: str | None = None
    snapshot: Any = None
    error: str | None = None
    metadata: dict[str, Any] | None = None
    started_at: float | None = None
    settled_at: float | None = None
    accepted: bool | None = field(default=None, compare=False)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def to_dict(self) -> dict[str, Any]:
        """Plain data (status as its string) for JSON responses and RPC answers."""
        return {
            "fiber_id": self.fiber_id,
            "name": self.name,
            "status": self.status.value,
            "created_at": self.created_at,
            "idempotency_key": self.idempotency_key,
            "snapshot": self.snapshot,
            "error": self.error,
            "metadata": self.metadata,
            "started_at": self.started_at,
            "settled_at": self.settled_at,
            "accepted": self.accepted,
        }


def record_from_row(row: Mapping[str, Any], accepted: bool | None = None) -> FiberRecord:
    """A ``cf_agents_fibers`` row (all of ``LEDGER_COLUMNS``) as a :class:`FiberRecord`."""
    metadata: dict[str, Any] | None = None
    if row["metadata_json"] is not None:
        try:
            parsed = json.loads(row["metadata_json"])
            metadata = parsed if isinstance(parsed, dict) else None
        except ValueError:
            metadata = None
    return FiberRecord(
        fiber_id=row["fiber_id"],
        name=row["name"],
        status=FiberStatus(row["status"]),
        created_at=row["created_at"],
        idempotency_key=row["idempotency_key"],
        snapshot=parse_snapshot(row["fiber_id"], row["snapshot"]),
        error=row["error_message"],
        metadata=metadata,
        started_at=row["started_at"],
        settled_at=row["completed_at"],
        accepted=accepted,
    )


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


class ManagedFibersMixin:
    """``start_fiber`` and the ledger operations; part of :class:`~agents.agent.Agent`."""

    _managed_tasks: dict[str, asyncio.Future[Any]]
    _managed_signals: dict[str, FiberSignal]
    _managed_waiters: dict[str, list[asyncio.Future[None]]]

    def _init_managed_fibers(self) -> None:
        self._managed_tasks = {}
        self._managed_signals = {}
        self._managed_waiters = {}

    def _managed_agent(self) -> Agent:
        return self  # type: ignore[return-value]

    # -- starting --------------------------------------------------------------------------------
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
        agent = self._managed_agent()
        if fiber_id is not None and not fiber_id.strip():
            raise FiberConflictError("fiber_id must not be blank")
        if idempotency_key is not None and not idempotency_key.strip():
            raise FiberConflictError("idempotency_key must not be blank")
        fid = fiber_id if fiber_id is not None else uuid.uuid4().hex
        by_id = self._read_managed_fiber(fid)
        by_key = self._read_fiber_by_key(idempotency_key) if idempotency_key else None
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

        agent._exec(
            f"INSERT INTO cf_agents_fibers ({LEDGER_COLUMNS}) "
            "VALUES (?, ?, ?, 'pending', NULL, ?, NULL, ?, NULL, NULL)",
            fid,
            idempotency_key,
            name,
            json.dumps(dict(metadata)) if metadata else None,
            int(Date.now()),
        )
        self._launch(loop, fid, name, fn)
        if wait_for_completion:
            return loop.create_task(self._wait_terminal(fid, accepted=True))
        row = self._read_managed_fiber(fid)
        assert row is not None
        return _resolved(loop, record_from_row(row, accepted=True))

    def _launch(
        self, loop: asyncio.AbstractEventLoop, fiber_id: str, name: str, fn: ManagedFn
    ) -> None:
        """pending → running, run row inserted, all before this returns; body in the background.

        Synchronous on purpose: no scan can see a ``pending`` ledger row without a live run.
        """
        agent = self._managed_agent()
        signal = FiberSignal()
        agent._exec(
            "UPDATE cf_agents_fibers SET status = 'running', started_at = ? "
            "WHERE fiber_id = ? AND status = 'pending'",
            int(Date.now()),
            fiber_id,
        )
        run = agent._begin_fiber(fiber_id, name, managed=True, signal=signal)
        run.on_settle = lambda outcome: self._settle(fiber_id, outcome, signal)
        self._managed_signals[fiber_id] = signal

        async def body() -> None:
            try:
                await agent._run_fiber_body(run, fn)
            except Exception:
                _log.exception("agent %s: managed fiber %r (%s) failed", agent.name, name, fiber_id)

        def forget(_task: asyncio.Task[None]) -> None:
            self._managed_signals.pop(fiber_id, None)
            self._managed_tasks.pop(fiber_id, None)

        task = agent._spawn_fiber(loop, run, body())
        task.add_done_callback(forget)
        self._managed_tasks[fiber_id] = task
        agent.ctx.waitUntil(task)

    def _settle(self, fiber_id: str, outcome: BaseException | None, signal: FiberSignal) -> None:
        """Record how the fiber's code ended (only if it is still ``running`` in the ledger).

        A cancellation by the agent's own code (``asyncio.CancelledError``) counts as
        ``aborted``, like ``cancel_fiber``.
        """
        agent = self._managed_agent()
        now = int(Date.now())
        if outcome is None:
            agent._exec(
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
            agent._exec(
                "UPDATE cf_agents_fibers SET status = ?, error_message = ?, completed_at = ? "
                "WHERE fiber_id = ? AND status = 'running'",
                status.value,
                message or type(outcome).__name__,
                now,
                fiber_id,
            )
        self._notify_terminal(fiber_id)

    # -- waiting ---------------------------------------------------------------------------------
    async def _wait_terminal(self, fiber_id: str, *, accepted: bool) -> FiberRecord:
        row = self._read_managed_fiber(fiber_id)
        if row is not None and FiberStatus(row["status"]) not in TERMINAL_STATUSES:
            if fiber_id not in self._managed_tasks:
                await self._managed_agent()._check_run_fibers()  # left by a dead process
            row = self._read_managed_fiber(fiber_id)
            if row is not None and FiberStatus(row["status"]) not in TERMINAL_STATUSES:
                waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._managed_waiters.setdefault(fiber_id, []).append(waiter)
                await waiter
                row = self._read_managed_fiber(fiber_id)
        if row is None:
            raise FiberConflictError(f"fiber {fiber_id} no longer exists")
        return record_from_row(row, accepted=accepted)

    def _notify_terminal(self, fiber_id: str) -> None:
        row = self._read_managed_fiber(fiber_id)
        if row is not None and FiberStatus(row["status"]) not in TERMINAL_STATUSES:
            return
        for waiter in self._managed_waiters.pop(fiber_id, []):
            if not waiter.done():
                waiter.set_result(None)

    # -- inspection ------------------------------------------------------------------------------
    def _read_managed_fiber(self, fiber_id: str) -> dict[str, Any] | None:
        rows = self._managed_agent().sql(
            f"SELECT {LEDGER_COLUMNS} FROM cf_agents_fibers WHERE fiber_id = ? LIMIT 1", fiber_id
        )
        return rows[0] if rows else None

    def _read_fiber_by_key(self, idempotency_key: str) -> dict[str, Any] | None:
        rows = self._managed_agent().sql(
            f"SELECT {LEDGER_COLUMNS} FROM cf_agents_fibers WHERE idempotency_key = ? LIMIT 1",
            idempotency_key,
        )
        return rows[0] if rows else None

    async def inspect_fiber(self, fiber_id: str) -> FiberRecord | None:
        """The managed fiber's record, or None."""
        row = self._read_managed_fiber(fiber_id)
        return None if row is None else record_from_row(row)

    async def inspect_fiber_by_key(self, idempotency_key: str) -> FiberRecord | None:
        row = self._read_fiber_by_key(idempotency_key)
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
        rows = self._managed_agent().sql(
            f"SELECT {LEDGER_COLUMNS} FROM cf_agents_fibers{clause} "
            "ORDER BY created_at DESC, fiber_id DESC LIMIT ?",
            *params,
            lim,
        )
        return [record_from_row(r) for r in rows]

    # -- control ---------------------------------------------------------------------------------
    async def cancel_fiber(self, fiber_id: str, reason: str | None = None) -> bool:
        """Mark a pending/running fiber ``aborted`` and signal its code; False if terminal/absent.

        Cooperative: the code sees ``ctx.signal.aborted`` (or ``throw_if_aborted()`` raises) and
        should stop; the ledger says ``aborted`` from this moment whatever it does.
        """
        row = self._read_managed_fiber(fiber_id)
        if row is None or FiberStatus(row["status"]) in TERMINAL_STATUSES:
            return False
        self._managed_agent()._exec(
            "UPDATE cf_agents_fibers SET status = 'aborted', error_message = ?, completed_at = ? "
            "WHERE fiber_id = ? AND status IN ('pending', 'running')",
            reason,
            int(Date.now()),
            fiber_id,
        )
        signal = self._managed_signals.get(fiber_id)
        if signal is not None:
            signal.abort(reason)
        self._notify_terminal(fiber_id)
        return True

    async def cancel_fiber_by_key(self, idempotency_key: str, reason: str | None = None) -> bool:
        row = self._read_fiber_by_key(idempotency_key)
        return False if row is None else await self.cancel_fiber(row["fiber_id"], reason)

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
        agent = self._managed_agent()
        rows = agent.sql(
            f"SELECT fiber_id FROM cf_agents_fibers WHERE {clause} "
            "ORDER BY completed_at ASC, created_at ASC LIMIT ?",
            *params,
            lim,
        )
        for row in rows:
            agent._exec("DELETE FROM cf_agents_fibers WHERE fiber_id = ?", row["fiber_id"])
        return len(rows)
