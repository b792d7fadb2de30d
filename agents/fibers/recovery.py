"""Fiber recovery: work left behind by a dead process → ``on_fiber_recovered``, with back-off.

The scan (:meth:`FiberRecovery.scan`) runs at every activation (inside ``blockConcurrencyWhile``,
before ``on_start``) and from the alarm, never twice at once. A ``cf_agents_runs`` row whose id
is not running in this process belongs to a dead process; it is handed to the hook:

* the hook returns → the row is deleted;
* the hook raises → the row is kept and retried with back-off ``keep_alive_interval_ms × 2ⁿ``
  (capped at 5 minutes), until ``fiber_recovery_max_age_ms`` after the fiber's ``created_at``
  or ``fiber_recovery_max_attempts`` attempts, whichever comes first (the SDK's follow-up
  #1728: a poison row must not keep the object waking for a day), when it is dropped and
  reported through ``on_error`` (a ``fiber:recovery:skipped`` event names the reason);
* a row of a managed fiber (``cf_agents_fibers``) is marked ``interrupted`` and the hook is
  called once; what it returns (a :class:`FiberResolution`) settles the record, a raise leaves it
  ``error``, and the run row is retired either way (the ledger keeps the outcome).

A managed fiber whose process died between writing its ledger row and its run row has no run row
at all: once every run row was handled, ledger rows still ``pending``/``running`` with no run row
are interrupted and handed to the hook the same way.

**Back-off bookkeeping is durable.** Attempt counts and next-retry times live in
``cf_agents_run_recovery`` (this library's addition; the SDK keeps a single in-memory
no-progress counter), so a poison row keeps its growing gaps across evictions instead of being
retried every activation. :meth:`FiberRecovery.next_wakeup` gives the agent's single alarm the
earliest due retry.

**Bounded scans.** A scan always hands at least one row to its hook, then stops once
``fiber_recovery_scan_deadline_ms`` (measured with ``Date.now()``) has passed and leaves the rest
for the next alarm, one heartbeat (``keep_alive_interval_ms``) later, as the SDK's follow-up alarm
does. :meth:`FiberRecovery.next_wakeup` never answers "now": a scan that could not make progress
must not be able to re-fire the alarm back-to-back.

**Fresh rows; only real transitions call the hook.** The scan awaits each hook, and other work of
this process runs meanwhile: a live fiber may finish (deleting its row), start, be cancelled or
settle. So the scan lists ids first and re-reads each row, with its back-off, right before
handing it over (a row that is gone, now running here, or not yet due is skipped), and the
``pending``/``running`` → ``interrupted`` UPDATE is guarded on the status and uses ``RETURNING``:
the hook runs only for a row that UPDATE actually changed, with the row as it is now.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol, cast

from ..core.host import AgentHost, Core
from ..errors import FiberRecoveryExpiredError
from .ledger import LEDGER_COLUMNS, FiberLedger, record_from_row
from .runs import FiberRuns
from .types import (
    TERMINAL_STATUSES,
    FiberRecoveryContext,
    FiberResolution,
    FiberStatus,
    parse_snapshot,
)

__all__ = ["MAX_BACKOFF_MS", "SCHEMA", "FiberHooks", "FiberRecovery", "ScanBudget", "backoff_ms"]

_log = logging.getLogger("agents.fibers")

#: The SDK's cap on the recovery back-off (``FIBER_RECOVERY_MAX_BACKOFF_MS``).
MAX_BACKOFF_MS = 5 * 60_000
_MAX_EXPONENT = 20

SCHEMA: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS cf_agents_run_recovery (
  id TEXT PRIMARY KEY NOT NULL,
  attempts INTEGER NOT NULL,
  next_attempt_at INTEGER NOT NULL,
  last_error TEXT
)""",
)

_RETURNING = f"RETURNING {LEDGER_COLUMNS}"
_LEDGER_ONLY = (
    "SELECT f.fiber_id FROM cf_agents_fibers f LEFT JOIN cf_agents_runs r ON r.id = f.fiber_id "
    "WHERE f.status IN ('pending', 'running') AND r.id IS NULL"
)

HookResult = FiberResolution | Mapping[str, Any] | None


class FiberHooks(AgentHost, Protocol):
    """The hooks recovery runs (sync or ``async``): the framework's own first, then the user's.

    ``_recover_internal_fiber`` answers True for a fiber the framework started for itself (a
    chat turn, say), which it has recovered; the user's ``on_fiber_recovered`` never sees it.
    """

    def on_fiber_recovered(self, ctx: FiberRecoveryContext) -> Any: ...

    def _recover_internal_fiber(self, ctx: FiberRecoveryContext) -> Any: ...


def backoff_ms(interval_ms: float, failures: int) -> float:
    """The wait after the ``failures``-th failed attempt: ``interval × 2^(failures-1)``, capped."""
    exponent = min(max(failures - 1, 0), _MAX_EXPONENT)
    return float(min(MAX_BACKOFF_MS, interval_ms * 2**exponent))


class ScanBudget:
    """How much one recovery pass may do: always one row, then until the deadline.

    The first row is unconditional so that a pass can never end without progress (a slow
    start-up query, or a tiny deadline, would otherwise leave every row for a next alarm that
    again does nothing). Shared by the run rows and the ledger-only rows of the same pass.
    """

    __slots__ = ("_now", "deadline_ms", "processed", "started")

    def __init__(self, deadline_ms: float, now: Callable[[], float]) -> None:
        self._now = now
        self.deadline_ms = deadline_ms
        self.started = now()
        self.processed = 0

    def exhausted(self) -> bool:
        return (
            self.processed > 0
            and self.deadline_ms > 0
            and self._now() - self.started > self.deadline_ms
        )


class FiberRecovery:
    """The recovery scan of one agent, and its share of the alarm."""

    __slots__ = ("_core", "_hooks", "_ledger", "_runs", "_scanning")
    #: The tables this feature owns (the Agent ensures them at every activation).
    SCHEMA: ClassVar[tuple[str, ...]] = SCHEMA

    def __init__(self, core: Core, hooks: FiberHooks, runs: FiberRuns, ledger: FiberLedger) -> None:
        self._core = core
        self._hooks = hooks
        self._runs = runs
        self._ledger = ledger
        self._scanning = False

    async def scan(self) -> None:
        """One recovery scan (no-op if one is already running in this process).

        On success the alarm is re-armed for what is left. On failure nothing is re-armed: the
        exception propagates (from ``alarm()``, the platform then retries with back-off, which a
        ``setAlarm`` here would cancel).
        """
        if self._scanning:
            return
        self._scanning = True
        core = self._core
        budget = ScanBudget(self._hooks.options.fiber_recovery_scan_deadline_ms, core.now)
        try:
            core.exec(
                "DELETE FROM cf_agents_run_recovery WHERE id NOT IN (SELECT id FROM cf_agents_runs)"
            )
            ids = [
                str(row["id"])
                for row in core.sql("SELECT id FROM cf_agents_runs ORDER BY created_at, id")
            ]
            complete = True
            for fiber_id in ids:
                if budget.exhausted():
                    _log.info("agent %s: fiber recovery scan deadline reached", self._hooks.name)
                    complete = False
                    break
                row = self._read_due_row(fiber_id)
                if row is None:
                    continue
                budget.processed += 1
                ledger = self._ledger.read(fiber_id)
                if ledger is not None:
                    await self._recover_managed_run(row, ledger)
                    self._retire(fiber_id)
                    continue
                await self._recover_unmanaged(row)
            if complete:
                await self._recover_ledger_only(budget)
        finally:
            self._scanning = False
        core.schedule_next_alarm_soon()

    def next_wakeup(self, now: float) -> float | None:
        """The time recovery next needs the alarm, or None when nothing is left to recover.

        Backing-off rows are due at their retry time. Rows the last scan left behind (its deadline
        passed; no retry record) and managed ledger rows stuck ``pending``/``running`` without a
        run row are due one heartbeat from now, as is anything already overdue: never "now", so
        the alarm cannot fire back-to-back without a scan in between making progress. (Every
        activation scans before anything else, so nothing waits a heartbeat after a restart.)
        """
        rows = self._core.sql(
            "SELECT r.id, q.next_attempt_at FROM cf_agents_runs r "
            "LEFT JOIN cf_agents_run_recovery q ON q.id = r.id"
        )
        follow_up = now + self._hooks.options.keep_alive_interval_ms
        due: float | None = None
        for row in rows:
            if self._runs.is_running(row["id"]):
                continue
            at = follow_up if row["next_attempt_at"] is None else float(row["next_attempt_at"])
            due = at if due is None else min(due, at)
        if due is None and self._has_ledger_only():
            due = follow_up
        if due is None:
            return None
        if due <= now or self._scanning:
            due = max(due, follow_up)
        return due

    # -- run rows ----------------------------------------------------------------------------------
    def _read_due_row(self, fiber_id: str) -> dict[str, Any] | None:
        """The run row with its back-off, read now; None if gone, running here, or not due."""
        if self._runs.is_running(fiber_id):
            return None
        rows = self._core.sql(
            "SELECT r.id, r.name, r.snapshot, r.created_at, q.attempts, q.next_attempt_at "
            "FROM cf_agents_runs r LEFT JOIN cf_agents_run_recovery q ON q.id = r.id "
            "WHERE r.id = ?",
            fiber_id,
        )
        if not rows:
            return None  # it finished (or was recovered) while an earlier hook was awaited
        row = rows[0]
        if row["next_attempt_at"] is not None and row["next_attempt_at"] > self._core.now():
            return None  # backing off
        return row

    async def _recover_unmanaged(self, row: Mapping[str, Any]) -> None:
        core, hooks = self._core, self._hooks
        options = hooks.options
        attempts = int(row["attempts"] or 0) + 1
        created_at = float(row["created_at"])
        ctx = FiberRecoveryContext(
            id=row["id"],
            name=row["name"],
            snapshot=parse_snapshot(row["id"], row["snapshot"]),
            created_at=created_at,
            attempt=attempts,
        )
        payload = {"fiberId": ctx.id, "fiberName": ctx.name, "attempt": attempts}
        if attempts == 1:
            elapsed = {"elapsedMs": core.now() - created_at}
            core.emit("fiber:recovery:detected", {**payload, **elapsed})
            core.emit(
                "fiber:run:interrupted",
                {**payload, "managed": False, "recoveryReason": "interrupted", **elapsed},
            )
        try:
            await self._call_hook(ctx)
        except Exception as exc:
            core.emit("fiber:recovery:failed", {**payload, "error": str(exc)})
            now = core.now()
            max_age = options.fiber_recovery_max_age_ms
            max_attempts = options.fiber_recovery_max_attempts
            too_old = max_age > 0 and now >= created_at + max_age
            too_many = max_attempts > 0 and attempts >= max_attempts
            if too_old or too_many:
                self._retire(ctx.id)
                reason = "max_age_exceeded" if too_old else "max_attempts_exceeded"
                core.emit("fiber:recovery:skipped", {**payload, "reason": reason})
                _log.error(
                    "agent %s: recovery of fiber %r (%s) failed %d times; dropped (%s)",
                    hooks.name,
                    ctx.name,
                    ctx.id,
                    attempts,
                    reason,
                )
                expired = FiberRecoveryExpiredError(
                    f"recovery of fiber {ctx.name!r} ({ctx.id}) still failing after "
                    f"{attempts} attempts and {now - created_at:.0f} ms; the fiber was "
                    f"dropped ({reason}): {exc}"
                )
                expired.__cause__ = exc
                await core.report(expired, ctx)
                return
            next_at = now + backoff_ms(options.keep_alive_interval_ms, attempts)
            if max_age > 0:
                next_at = min(next_at, created_at + max_age)
            _log.warning(
                "agent %s: recovery of fiber %r (%s) failed (attempt %d), retry in %.1f s: %r",
                hooks.name,
                ctx.name,
                ctx.id,
                attempts,
                (next_at - now) / 1000,
                exc,
            )
            core.exec(
                "INSERT INTO cf_agents_run_recovery (id, attempts, next_attempt_at, last_error) "
                "VALUES (?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET attempts = excluded.attempts, "
                "next_attempt_at = excluded.next_attempt_at, last_error = excluded.last_error",
                ctx.id,
                attempts,
                int(next_at),
                repr(exc),
            )
            return
        core.emit("fiber:recovery:handled", payload)
        self._retire(ctx.id)

    def _retire(self, fiber_id: str) -> None:
        self._core.exec("DELETE FROM cf_agents_runs WHERE id = ?", fiber_id)
        self._core.exec("DELETE FROM cf_agents_run_recovery WHERE id = ?", fiber_id)

    async def _call_hook(self, ctx: FiberRecoveryContext) -> HookResult:
        """Run the framework's handler, else ``on_fiber_recovered`` (sync or async); exceptions
        propagate to the caller."""
        internal: Any = self._hooks._recover_internal_fiber(ctx)
        if inspect.isawaitable(internal):
            internal = await internal
        if internal:
            return None
        result: Any = self._hooks.on_fiber_recovered(ctx)  # an override may be a plain function
        if inspect.isawaitable(result):
            result = await result
        return cast(HookResult, result)

    # -- managed fibers ----------------------------------------------------------------------------
    async def _recover_managed_run(
        self, run_row: Mapping[str, Any], ledger: Mapping[str, Any]
    ) -> None:
        """An orphaned run row that belongs to a managed fiber: mark it interrupted, ask the hook.

        ``ledger`` was read by the caller with no ``await`` since. The caller deletes the run
        row whatever happens (the ledger keeps the outcome).
        """
        fiber_id = str(run_row["id"])
        if FiberStatus(ledger["status"]) in TERMINAL_STATUSES:
            self._ledger.notify_terminal(fiber_id)  # e.g. cancelled, then the process died
            return
        rows = self._core.sql(
            "UPDATE cf_agents_fibers SET status = 'interrupted', snapshot = ?, completed_at = ? "
            f"WHERE fiber_id = ? AND status IN ('pending', 'running') {_RETURNING}",
            run_row["snapshot"],
            int(self._core.now()),
            fiber_id,
        )
        if rows:
            await self._run_managed_hook(rows[0])

    def _has_ledger_only(self) -> bool:
        return any(not self._runs.is_running(r["fiber_id"]) for r in self._core.sql(_LEDGER_ONLY))

    async def _recover_ledger_only(self, budget: ScanBudget) -> None:
        """Ledger rows ``pending``/``running`` with no run row (the process died in between)."""
        core = self._core
        ids = [
            str(row["fiber_id"])
            for row in core.sql(_LEDGER_ONLY + " ORDER BY f.created_at, f.fiber_id")
        ]
        for fiber_id in ids:
            if budget.exhausted():
                return
            if self._runs.is_running(fiber_id):
                continue
            # Re-checked in the statement itself: an earlier hook's await may have let this
            # fiber be cancelled, settled or started since the list was read.
            rows = core.sql(
                "UPDATE cf_agents_fibers SET status = 'interrupted', completed_at = ? "
                "WHERE fiber_id = ? AND status IN ('pending', 'running') "
                f"AND NOT EXISTS (SELECT 1 FROM cf_agents_runs WHERE id = ?) {_RETURNING}",
                int(core.now()),
                fiber_id,
                fiber_id,
            )
            if not rows:
                continue
            budget.processed += 1
            await self._run_managed_hook(rows[0])

    async def _run_managed_hook(self, ledger: Mapping[str, Any]) -> None:
        """Hand a just-interrupted record to ``on_fiber_recovered``; apply what it returns."""
        core = self._core
        fiber_id = str(ledger["fiber_id"])
        record = record_from_row(ledger)
        ctx = FiberRecoveryContext(
            id=fiber_id,
            name=record.name,
            snapshot=parse_snapshot(fiber_id, ledger["snapshot"]),
            created_at=record.created_at,
            status=FiberStatus.INTERRUPTED,
            idempotency_key=record.idempotency_key,
            metadata=record.metadata,
        )
        try:
            result = await self._call_hook(ctx)
            if result is not None:
                self._ledger.apply_resolution(fiber_id, FiberResolution.coerce(result))
        except Exception as exc:
            _log.exception(
                "agent %s: recovery of managed fiber %s failed", self._hooks.name, fiber_id
            )
            core.exec(
                "UPDATE cf_agents_fibers SET status = 'error', error_message = ?, "
                "completed_at = ? WHERE fiber_id = ? AND status = 'interrupted'",
                str(exc) or type(exc).__name__,
                int(core.now()),
                fiber_id,
            )
        self._ledger.notify_terminal(fiber_id)
