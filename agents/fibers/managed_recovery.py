"""Interrupted managed fibers: recovery of the ``cf_agents_fibers`` ledger, and resolution.

A managed fiber whose process died is found two ways by the recovery scan
(:mod:`agents.fiber_recovery`): through its orphaned ``cf_agents_runs`` row, or — if the process
died between writing the ledger row and the run row — as a ledger row still ``pending`` or
``running`` with no run row at all. Either way the record becomes ``interrupted`` and
``on_fiber_recovered`` is called once; its return value (a :class:`FiberResolution`) or a later
``resolve_fiber`` settles it, and a hook that raises leaves it ``error``.

Split from :mod:`agents.managed_fibers` (starting, waiting, inspecting, cancelling) to keep each
module to one concept. The SDK counterpart is ``packages/agents/src/capabilities/fibers.ts``.

**Only a real transition calls the hook.** The scan awaits hooks one after another, and this
process keeps running meanwhile (a fiber may be cancelled or settle). The ``pending``/``running``
→ ``interrupted`` UPDATE is guarded on the status and uses ``RETURNING``: the hook runs only for
a row that UPDATE actually changed, with the row as it is now.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from js import Date

from ..fibers.managed import LEDGER_COLUMNS, record_from_row
from ..fibers.recovery import ScanBudget, call_recovery_hook
from ..fibers.types import (
    TERMINAL_STATUSES,
    FiberRecoveryContext,
    FiberResolution,
    FiberStatus,
    parse_snapshot,
)

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["ManagedRecoveryMixin"]

_log = logging.getLogger("agents.fibers")

_RETURNING = f"RETURNING {LEDGER_COLUMNS}"


class ManagedRecoveryMixin:
    """``resolve_fiber`` and the managed half of the recovery scan; part of the Agent."""

    def _recovery_agent(self) -> Agent:
        return self  # type: ignore[return-value]

    # -- resolution ------------------------------------------------------------------------------
    async def resolve_fiber(
        self, fiber_id: str, result: FiberResolution | Mapping[str, Any]
    ) -> bool:
        """Settle an ``interrupted`` fiber (e.g. ``{"status": "completed"}``); False otherwise."""
        resolution = FiberResolution.coerce(result)
        row = self._recovery_agent()._read_managed_fiber(fiber_id)
        if row is None or row["status"] != FiberStatus.INTERRUPTED:
            return False
        self._apply_resolution(fiber_id, resolution)
        return True

    def _apply_resolution(self, fiber_id: str, resolution: FiberResolution) -> None:
        agent = self._recovery_agent()
        snapshot = json.dumps(resolution.snapshot) if resolution.has_snapshot else None
        metadata = (
            json.dumps(dict(resolution.metadata))
            if resolution.status is FiberStatus.COMPLETED and resolution.metadata is not None
            else None
        )
        agent._exec(
            "UPDATE cf_agents_fibers SET status = ?, snapshot = COALESCE(?, snapshot), "
            "metadata_json = COALESCE(?, metadata_json), error_message = ?, completed_at = ? "
            "WHERE fiber_id = ? AND status = 'interrupted'",
            resolution.status.value,
            snapshot,
            metadata,
            resolution.error_message(),
            int(Date.now()),
            fiber_id,
        )
        agent._notify_terminal(fiber_id)

    # -- recovery (called by agents.fiber_recovery) ----------------------------------------------
    def _has_ledger_only_fibers(self) -> bool:
        agent = self._recovery_agent()
        rows = agent.sql(
            "SELECT f.fiber_id FROM cf_agents_fibers f "
            "LEFT JOIN cf_agents_runs r ON r.id = f.fiber_id "
            "WHERE f.status IN ('pending', 'running') AND r.id IS NULL"
        )
        return any(r["fiber_id"] not in agent._fiber_runs for r in rows)

    async def _recover_managed_run(
        self, run_row: Mapping[str, Any], ledger: Mapping[str, Any]
    ) -> None:
        """An orphaned run row that belongs to a managed fiber: mark it interrupted, ask the hook.

        ``ledger`` was read by the caller with no ``await`` since. The caller deletes the run
        row whatever happens (the ledger keeps the outcome).
        """
        agent = self._recovery_agent()
        fiber_id = str(run_row["id"])
        if FiberStatus(ledger["status"]) in TERMINAL_STATUSES:
            agent._notify_terminal(fiber_id)  # e.g. cancelled, then the process died
            return
        rows = agent.sql(
            "UPDATE cf_agents_fibers SET status = 'interrupted', snapshot = ?, completed_at = ? "
            f"WHERE fiber_id = ? AND status IN ('pending', 'running') {_RETURNING}",
            run_row["snapshot"],
            int(Date.now()),
            fiber_id,
        )
        if rows:
            await self._run_managed_hook(rows[0])

    async def _recover_ledger_only_fibers(self, budget: ScanBudget) -> None:
        """Ledger rows ``pending``/``running`` with no run row (the process died in between)."""
        agent = self._recovery_agent()
        ids = [
            str(row["fiber_id"])
            for row in agent.sql(
                "SELECT f.fiber_id FROM cf_agents_fibers f "
                "LEFT JOIN cf_agents_runs r ON r.id = f.fiber_id "
                "WHERE f.status IN ('pending', 'running') AND r.id IS NULL "
                "ORDER BY f.created_at, f.fiber_id"
            )
        ]
        for fiber_id in ids:
            if budget.exhausted():
                return
            if fiber_id in agent._fiber_runs:
                continue
            # Re-checked in the statement itself: an earlier hook's await may have let this
            # fiber be cancelled, settled or started since the list was read.
            rows = agent.sql(
                "UPDATE cf_agents_fibers SET status = 'interrupted', completed_at = ? "
                "WHERE fiber_id = ? AND status IN ('pending', 'running') "
                f"AND NOT EXISTS (SELECT 1 FROM cf_agents_runs WHERE id = ?) {_RETURNING}",
                int(Date.now()),
                fiber_id,
                fiber_id,
            )
            if not rows:
                continue
            budget.processed += 1
            await self._run_managed_hook(rows[0])

    async def _run_managed_hook(self, ledger: Mapping[str, Any]) -> None:
        """Hand a just-interrupted record to ``on_fiber_recovered``; apply what it returns."""
        agent = self._recovery_agent()
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
            result = await call_recovery_hook(agent, ctx)
            if result is not None:
                self._apply_resolution(fiber_id, FiberResolution.coerce(result))
        except Exception as exc:
            _log.exception("agent %s: recovery of managed fiber %s failed", agent.name, fiber_id)
            agent._exec(
                "UPDATE cf_agents_fibers SET status = 'error', error_message = ?, "
                "completed_at = ? WHERE fiber_id = ? AND status = 'interrupted'",
                str(exc) or type(exc).__name__,
                int(Date.now()),
                fiber_id,
            )
        agent._notify_terminal(fiber_id)
