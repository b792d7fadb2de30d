"""The fiber-recovery scan: orphaned ``cf_agents_runs`` rows → ``on_fiber_recovered``.

Runs at every activation (inside ``blockConcurrencyWhile``, before ``on_start``) and from the
alarm, never twice at once. A row whose id is not running in this process belongs to a dead
process; it is handed to the hook:

* the hook returns → the row is deleted;
* the hook raises → the row is kept and retried with back-off ``keep_alive_interval_ms × 2ⁿ``
  (capped at 5 minutes), until ``fiber_recovery_max_age_ms`` after the fiber's ``created_at``,
  when it is dropped and reported through ``on_error``;
* managed fibers (``cf_agents_fibers``) are delegated to the managed-fiber module, which marks
  them ``interrupted`` and always retires the run row.

**Back-off bookkeeping is durable.** Attempt counts and next-retry times live in
``cf_agents_run_recovery`` (this library's addition; the SDK keeps a single in-memory
no-progress counter), so a poison row keeps its growing gaps across evictions instead of being
retried every activation. The agent's single alarm is set to the earliest due retry through
:func:`next_recovery_ms`.

**Bounded scans.** A scan always hands at least one row to its hook, then stops once
``fiber_recovery_scan_deadline_ms`` (measured with ``Date.now()``) has passed and leaves the rest
for the next alarm, one heartbeat (``keep_alive_interval_ms``) later, as the SDK's follow-up alarm
does. :func:`next_recovery_ms` never answers "now": a scan that could not make progress must not
be able to re-fire the alarm back-to-back.

**Fresh rows.** The scan awaits each hook, and other work of this process runs meanwhile: a live
fiber may finish (deleting its row) or start. So the scan lists ids first and re-reads each row,
with its back-off, right before handing it over; a row that is gone, now running here, or not
yet due is skipped.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from js import Date

from ..fibers.types import (
    FiberRecoveryContext,
    FiberRecoveryExpiredError,
    FiberResolution,
    parse_snapshot,
)

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = [
    "MAX_BACKOFF_MS",
    "SCHEMA",
    "ScanBudget",
    "backoff_ms",
    "call_recovery_hook",
    "check_run_fibers",
    "next_recovery_ms",
]

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


def backoff_ms(interval_ms: float, failures: int) -> float:
    """The wait after the ``failures``-th failed attempt: ``interval × 2^(failures-1)``, capped."""
    exponent = min(max(failures - 1, 0), _MAX_EXPONENT)
    return float(min(MAX_BACKOFF_MS, interval_ms * 2**exponent))


def _now() -> float:
    return float(Date.now())


async def call_recovery_hook(
    agent: Agent, ctx: FiberRecoveryContext
) -> FiberResolution | Mapping[str, Any] | None:
    """Run ``on_fiber_recovered`` (sync or async); exceptions propagate to the caller."""
    result: Any = agent.on_fiber_recovered(ctx)  # an override may be a plain function
    if inspect.isawaitable(result):
        result = await result
    return cast("FiberResolution | Mapping[str, Any] | None", result)


class ScanBudget:
    """How much one recovery pass may do: always one row, then until the deadline.

    The first row is unconditional so that a pass can never end without progress (a slow
    start-up query, or a tiny deadline, would otherwise leave every row for a next alarm that
    again does nothing). Shared with the managed-fiber ledger recovery of the same pass.
    """

    __slots__ = ("deadline_ms", "processed", "started")

    def __init__(self, deadline_ms: float) -> None:
        self.deadline_ms = deadline_ms
        self.started = _now()
        self.processed = 0

    def exhausted(self) -> bool:
        return (
            self.processed > 0 and self.deadline_ms > 0 and _now() - self.started > self.deadline_ms
        )


async def check_run_fibers(agent: Agent) -> None:
    """One recovery scan (no-op if one is already running in this process).

    On success the alarm is re-armed for what is left. On failure nothing is re-armed: the
    exception propagates (from ``alarm()``, the platform then retries with back-off, which a
    ``setAlarm`` here would cancel).
    """
    if agent._fiber_scan_running:
        return
    agent._fiber_scan_running = True
    budget = ScanBudget(agent.options.fiber_recovery_scan_deadline_ms)
    try:
        agent._exec(
            "DELETE FROM cf_agents_run_recovery WHERE id NOT IN (SELECT id FROM cf_agents_runs)"
        )
        ids = [
            str(row["id"])
            for row in agent.sql("SELECT id FROM cf_agents_runs ORDER BY created_at, id")
        ]
        complete = True
        for fiber_id in ids:
            if budget.exhausted():
                _log.info("agent %s: fiber recovery scan deadline reached", agent.name)
                complete = False
                break
            row = _read_due_row(agent, fiber_id)
            if row is None:
                continue
            budget.processed += 1
            managed = agent._read_managed_fiber(fiber_id)
            if managed is not None:
                await agent._recover_managed_run(row, managed)
                _retire(agent, fiber_id)
                continue
            await _recover_unmanaged(agent, row)
        if complete:
            await agent._recover_ledger_only_fibers(budget)
    finally:
        agent._fiber_scan_running = False
    agent._schedule_next_alarm_soon()


def _read_due_row(agent: Agent, fiber_id: str) -> dict[str, Any] | None:
    """The run row with its back-off, read now; None if gone, running here, or not due."""
    if fiber_id in agent._fiber_runs:
        return None
    rows = agent.sql(
        "SELECT r.id, r.name, r.snapshot, r.created_at, q.attempts, q.next_attempt_at "
        "FROM cf_agents_runs r LEFT JOIN cf_agents_run_recovery q ON q.id = r.id "
        "WHERE r.id = ?",
        fiber_id,
    )
    if not rows:
        return None  # it finished (or was recovered) while an earlier hook was awaited
    row = rows[0]
    if row["next_attempt_at"] is not None and row["next_attempt_at"] > _now():
        return None  # backing off
    return row


async def _recover_unmanaged(agent: Agent, row: Mapping[str, Any]) -> None:
    options = agent.options
    attempts = int(row["attempts"] or 0) + 1
    created_at = float(row["created_at"])
    ctx = FiberRecoveryContext(
        id=row["id"],
        name=row["name"],
        snapshot=parse_snapshot(row["id"], row["snapshot"]),
        created_at=created_at,
        attempt=attempts,
    )
    try:
        await call_recovery_hook(agent, ctx)
    except Exception as exc:
        now = _now()
        max_age = options.fiber_recovery_max_age_ms
        if max_age > 0 and now >= created_at + max_age:
            _retire(agent, ctx.id)
            _log.error(
                "agent %s: recovery of fiber %r (%s) failed %d times; dropped at max age",
                agent.name,
                ctx.name,
                ctx.id,
                attempts,
            )
            expired = FiberRecoveryExpiredError(
                f"recovery of fiber {ctx.name!r} ({ctx.id}) still failing after "
                f"{attempts} attempts and {max_age} ms; the fiber was dropped: {exc}"
            )
            expired.__cause__ = exc
            await _report(agent, expired, ctx)
            return
        next_at = now + backoff_ms(options.keep_alive_interval_ms, attempts)
        if max_age > 0:
            next_at = min(next_at, created_at + max_age)
        _log.warning(
            "agent %s: recovery of fiber %r (%s) failed (attempt %d), retry in %.1f s: %r",
            agent.name,
            ctx.name,
            ctx.id,
            attempts,
            (next_at - now) / 1000,
            exc,
        )
        agent._exec(
            "INSERT INTO cf_agents_run_recovery (id, attempts, next_attempt_at, last_error) "
            "VALUES (?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET attempts = excluded.attempts, "
            "next_attempt_at = excluded.next_attempt_at, last_error = excluded.last_error",
            ctx.id,
            attempts,
            int(next_at),
            repr(exc),
        )
        return
    _retire(agent, ctx.id)


def _retire(agent: Agent, fiber_id: str) -> None:
    agent._exec("DELETE FROM cf_agents_runs WHERE id = ?", fiber_id)
    agent._exec("DELETE FROM cf_agents_run_recovery WHERE id = ?", fiber_id)


async def _report(agent: Agent, error: BaseException, ctx: FiberRecoveryContext) -> None:
    try:
        await agent.on_error(error, ctx)
    except Exception:
        _log.exception("agent %s: on_error raised while reporting %r", agent.name, error)


def next_recovery_ms(agent: Agent, now: float) -> float | None:
    """The time recovery next needs the alarm, or None when nothing is left to recover.

    Backing-off rows are due at their retry time. Rows the last scan left behind (its deadline
    passed; no retry record) and managed ledger rows stuck ``pending``/``running`` without a
    run row are due one heartbeat from now, as is anything already overdue: never "now", so
    the alarm cannot fire back-to-back without a scan in between making progress. (Every
    activation scans before anything else, so nothing waits a heartbeat after a restart.)
    """
    rows = agent.sql(
        "SELECT r.id, q.next_attempt_at FROM cf_agents_runs r "
        "LEFT JOIN cf_agents_run_recovery q ON q.id = r.id"
    )
    running = agent._fiber_runs
    follow_up = now + agent.options.keep_alive_interval_ms
    due: float | None = None
    for row in rows:
        if row["id"] in running:
            continue
        at = follow_up if row["next_attempt_at"] is None else float(row["next_attempt_at"])
        due = at if due is None else min(due, at)
    if due is None and agent._has_ledger_only_fibers():
        due = follow_up
    if due is None:
        return None
    if due <= now or agent._fiber_scan_running:
        due = max(due, follow_up)
    return due
