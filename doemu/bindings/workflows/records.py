"""The rows of one workflow instance, in its object's SQLite file.

An instance is one object of the workflow's internal namespace (see
:mod:`doemu.bindings.workflows.instance`); everything the engine must know after a restart is a
row here, written through the object's storage so it commits with the turn (and is fsynced at
``--durability power`` before the next output):

* ``workflow_instance``: one row: the id, the status, the params, the output or error, and a
  ``generation`` that ``restart()`` bumps;
* ``workflow_steps``: one row per ``step.do`` / ``sleep`` / ``wait_for_event`` the run reached,
  keyed by kind, name and how many times the run met that name (``do:fetch:1``): a finished
  step's value (encoded with :mod:`doemu.clone`, the structured-clone rules) or error, its
  attempts so far, when it wakes (a sleep's end, a retry, a wait's deadline), and its
  ``position``: the order in which the run first reached it, given when the row is first written
  and kept by every later write (an upsert updates the row in place), so the steps list in
  execution order (Cloudflare's ``asc``, oldest first) however often a step is written again;
* ``workflow_events``: every event ``sendEvent`` delivered, in order, and which wait took it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ... import clone

__all__ = ["EventRow", "InstanceRow", "Records", "StepRow"]

_POSITION = "position INTEGER NOT NULL DEFAULT 0"

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS workflow_instance (id TEXT PRIMARY KEY, status TEXT NOT NULL, "
    "params BLOB, created REAL, started REAL, ended REAL, output BLOB, error TEXT, "
    "generation INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS workflow_steps (key TEXT PRIMARY KEY, kind TEXT NOT NULL, "
    "name TEXT NOT NULL, seq INTEGER NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL "
    f"DEFAULT 0, value BLOB, error TEXT, wake_at REAL, event_type TEXT, updated REAL, {_POSITION})",
    "CREATE TABLE IF NOT EXISTS workflow_events (seq INTEGER PRIMARY KEY, type TEXT NOT NULL, "
    "payload BLOB, timestamp REAL NOT NULL, taken_by TEXT)",
)
#: Run after the tables exist and are migrated (the index names the column a migration adds).
_INDEXES = ("CREATE INDEX IF NOT EXISTS workflow_steps_position ON workflow_steps (position)",)


@dataclass
class InstanceRow:
    id: str
    status: str
    params: bytes | None
    created: float
    started: float | None
    ended: float | None
    output: bytes | None
    error: dict[str, Any] | None
    generation: int


@dataclass
class StepRow:
    key: str
    kind: str
    name: str
    seq: int
    state: str
    attempts: int
    value: bytes | None
    error: dict[str, Any] | None
    wake_at: float | None
    event_type: str | None


@dataclass
class EventRow:
    seq: int
    type: str
    payload: bytes | None
    timestamp: float


def _blob(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def _json(value: Any) -> dict[str, Any] | None:
    return None if value is None else dict(json.loads(value))


class Records:
    """Reads and writes the instance's rows through its ``ctx.storage.sql``."""

    def __init__(self, sql: Any) -> None:
        self._sql = sql
        for statement in _SCHEMA:
            sql.exec(statement)
        self._migrate()
        for statement in _INDEXES:
            sql.exec(statement)

    def _migrate(self) -> None:
        """Bring a file written by an older doemu up to this schema, in the same turn.

        Before ``position``, steps were listed by rowid, which ``INSERT OR REPLACE`` renumbered
        on every write; the rowid is still the best record of their order such a file has, so
        it seeds the new column (a finished run's list reads as it did; a running one's next
        steps follow its last)."""
        columns = {str(r["name"]) for r in self._rows("PRAGMA table_info(workflow_steps)")}
        if "position" not in columns:
            self._sql.exec(f"ALTER TABLE workflow_steps ADD COLUMN {_POSITION}")
            self._sql.exec("UPDATE workflow_steps SET position = rowid")

    def _rows(self, query: str, *params: Any) -> list[Any]:
        return list(self._sql.exec(query, *params).toArray())

    # -- the instance ---------------------------------------------------------------------------
    def instance(self) -> InstanceRow | None:
        rows = self._rows("SELECT * FROM workflow_instance LIMIT 1")
        if not rows:
            return None
        r = rows[0]
        return InstanceRow(
            str(r["id"]),
            str(r["status"]),
            _blob(r["params"]),
            float(r["created"]),
            None if r["started"] is None else float(r["started"]),
            None if r["ended"] is None else float(r["ended"]),
            _blob(r["output"]),
            _json(r["error"]),
            int(r["generation"]),
        )

    def create(self, instance_id: str, params: bytes, now: float) -> None:
        self._sql.exec(
            "INSERT INTO workflow_instance (id, status, params, created) "
            "VALUES (?, 'queued', ?, ?)",
            instance_id,
            params,
            now,
        )

    def set_status(self, status: str, now: float | None = None) -> None:
        if status == "running":
            self._sql.exec(
                "UPDATE workflow_instance SET status = ?, started = coalesce(started, ?)",
                status,
                now,
            )
        elif status in ("complete", "errored", "terminated"):
            self._sql.exec("UPDATE workflow_instance SET status = ?, ended = ?", status, now)
        else:
            self._sql.exec("UPDATE workflow_instance SET status = ?", status)

    def finish(self, output: bytes | None, error: dict[str, Any] | None, now: float) -> None:
        status = "errored" if error is not None else "complete"
        self._sql.exec(
            "UPDATE workflow_instance SET status = ?, ended = ?, output = ?, error = ?",
            status,
            now,
            output,
            None if error is None else json.dumps(error),
        )

    def restart(self) -> None:
        """Forget every step, event and outcome: the next run starts from the beginning."""
        self._sql.exec("DELETE FROM workflow_steps")
        self._sql.exec("DELETE FROM workflow_events")
        self._sql.exec(
            "UPDATE workflow_instance SET status = 'queued', started = NULL, ended = NULL, "
            "output = NULL, error = NULL, generation = generation + 1"
        )

    # -- steps ----------------------------------------------------------------------------------
    def step(self, key: str) -> StepRow | None:
        rows = self._rows("SELECT * FROM workflow_steps WHERE key = ?", key)
        if not rows:
            return None
        r = rows[0]
        return StepRow(
            str(r["key"]),
            str(r["kind"]),
            str(r["name"]),
            int(r["seq"]),
            str(r["state"]),
            int(r["attempts"]),
            _blob(r["value"]),
            _json(r["error"]),
            None if r["wake_at"] is None else float(r["wake_at"]),
            None if r["event_type"] is None else str(r["event_type"]),
        )

    def put_step(self, row: StepRow, now: float) -> None:
        """Write the step's row: a new step goes after every step reached before it; a step
        written again is updated in place and keeps its position."""
        self._sql.exec(
            "INSERT INTO workflow_steps (key, kind, name, seq, position, state, attempts, value, "
            "error, wake_at, event_type, updated) VALUES (?, ?, ?, ?, "
            "(SELECT coalesce(max(position), 0) + 1 FROM workflow_steps), "
            "?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET state = excluded.state, "
            "attempts = excluded.attempts, value = excluded.value, error = excluded.error, "
            "wake_at = excluded.wake_at, event_type = excluded.event_type, "
            "updated = excluded.updated",
            row.key,
            row.kind,
            row.name,
            row.seq,
            row.state,
            row.attempts,
            row.value,
            None if row.error is None else json.dumps(row.error),
            row.wake_at,
            row.event_type,
            now,
        )

    def steps(self) -> list[dict[str, Any]]:
        """Every step as the admin API shows it, in the order the run first reached them."""
        out = []
        for r in self._rows(
            "SELECT key, kind, name, seq, state, attempts, value, error, wake_at, event_type, "
            "updated FROM workflow_steps ORDER BY position, key"
        ):
            value = _blob(r["value"])
            out.append(
                {
                    "kind": r["kind"],
                    "name": r["name"],
                    "count": r["seq"],
                    "state": r["state"],
                    "attempts": r["attempts"],
                    "value": None if value is None else clone.decode(value),
                    "error": _json(r["error"]),
                    "wakeAt": r["wake_at"],
                    "eventType": r["event_type"],
                    # When its state last changed (a finished step: when it finished).
                    "updated": r["updated"],
                }
            )
        return out

    def waiting_types(self) -> list[str]:
        """The event types a pending ``wait_for_event`` waits for."""
        return [
            str(r["event_type"])
            for r in self._rows(
                "SELECT event_type FROM workflow_steps WHERE kind = 'wait' AND state = 'waiting'"
            )
        ]

    # -- events ---------------------------------------------------------------------------------
    def add_event(self, event_type: str, payload: bytes, now: float) -> None:
        self._sql.exec(
            "INSERT INTO workflow_events (type, payload, timestamp) VALUES (?, ?, ?)",
            event_type,
            payload,
            now,
        )

    def take_event(self, event_type: str, taker: str) -> EventRow | None:
        """The oldest event of ``event_type`` no wait has taken, now taken by ``taker``."""
        rows = self._rows(
            "SELECT seq, type, payload, timestamp FROM workflow_events "
            "WHERE type = ? AND taken_by IS NULL ORDER BY seq LIMIT 1",
            event_type,
        )
        if not rows:
            return None
        r = rows[0]
        self._sql.exec("UPDATE workflow_events SET taken_by = ? WHERE seq = ?", taker, r["seq"])
        return EventRow(int(r["seq"]), str(r["type"]), _blob(r["payload"]), float(r["timestamp"]))

    def has_event_for(self, types: list[str]) -> bool:
        for event_type in types:
            if self._rows(
                "SELECT 1 FROM workflow_events WHERE type = ? AND taken_by IS NULL LIMIT 1",
                event_type,
            ):
                return True
        return False
