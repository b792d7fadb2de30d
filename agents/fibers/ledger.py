"""The managed-fiber ledger: the ``cf_agents_fibers`` table, its records, and their waiters.

``start_fiber`` records each job here before it runs and keeps the row after it ends, so a job
can be inspected, listed, cancelled or resolved long after its code is gone. Statuses go
``pending`` → ``running`` → ``completed`` / ``aborted`` / ``error``; a fiber whose process died
becomes ``interrupted`` at recovery, where ``on_fiber_recovered`` (or a later ``resolve_fiber``)
may settle it.

Both :mod:`agents.fibers.managed` (starting, settling, cancelling) and
:mod:`agents.fibers.recovery` (interrupting, resolving) write this table, so what they share is
here: the reads, :meth:`FiberLedger.apply_resolution`, and the in-memory waiters of
``start_fiber(wait_for_completion=True)``, woken by :meth:`FiberLedger.notify_terminal` whenever
a row may have become terminal.

Table, columns and indexes follow the SDK (``packages/agents/src/index.ts`` schema v8); times are
milliseconds.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core.host import Core
from .types import TERMINAL_STATUSES, FiberResolution, FiberStatus, parse_snapshot

__all__ = ["LEDGER_COLUMNS", "SCHEMA", "FiberLedger", "FiberRecord", "record_from_row"]

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


class FiberLedger:
    """Reads and shared writes of ``cf_agents_fibers``, and who waits for a row to settle."""

    __slots__ = ("_core", "_waiters")
    #: The tables this feature owns (the Agent ensures them at every activation).
    SCHEMA: ClassVar[tuple[str, ...]] = SCHEMA

    def __init__(self, core: Core) -> None:
        self._core = core
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}

    def read(self, fiber_id: str) -> dict[str, Any] | None:
        rows = self._core.sql(
            f"SELECT {LEDGER_COLUMNS} FROM cf_agents_fibers WHERE fiber_id = ? LIMIT 1", fiber_id
        )
        return rows[0] if rows else None

    def read_by_key(self, idempotency_key: str) -> dict[str, Any] | None:
        rows = self._core.sql(
            f"SELECT {LEDGER_COLUMNS} FROM cf_agents_fibers WHERE idempotency_key = ? LIMIT 1",
            idempotency_key,
        )
        return rows[0] if rows else None

    def add_waiter(self, fiber_id: str) -> asyncio.Future[None]:
        """A future that :meth:`notify_terminal` resolves once the row is terminal (or gone)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(fiber_id, []).append(waiter)
        return waiter

    def notify_terminal(self, fiber_id: str) -> None:
        """Wake the waiters of ``fiber_id`` if its row is now terminal or gone."""
        row = self.read(fiber_id)
        if row is not None and FiberStatus(row["status"]) not in TERMINAL_STATUSES:
            return
        for waiter in self._waiters.pop(fiber_id, []):
            if not waiter.done():
                waiter.set_result(None)

    def apply_resolution(self, fiber_id: str, resolution: FiberResolution) -> None:
        """Settle an ``interrupted`` row as ``resolution`` says (no-op for any other status)."""
        snapshot = json.dumps(resolution.snapshot) if resolution.has_snapshot else None
        metadata = (
            json.dumps(dict(resolution.metadata))
            if resolution.status is FiberStatus.COMPLETED and resolution.metadata is not None
            else None
        )
        self._core.exec(
            "UPDATE cf_agents_fibers SET status = ?, snapshot = COALESCE(?, snapshot), "
            "metadata_json = COALESCE(?, metadata_json), error_message = ?, completed_at = ? "
            "WHERE fiber_id = ? AND status = 'interrupted'",
            resolution.status.value,
            snapshot,
            metadata,
            resolution.error_message(),
            int(self._core.now()),
            fiber_id,
        )
        self.notify_terminal(fiber_id)
