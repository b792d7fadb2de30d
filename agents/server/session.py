"""A session's durable record: who it is, which run it is on, and how that run stands.

One object hosts one session (``cf_server_session``, a single row). A *run* is one answer to
one input; a session has many (multi-turn). Beside it: the checkpoints (one per finished step,
so ``/resume`` and ``branch`` know where a run can restart), the sub-agent sessions this one
started (so usage rolls up across objects and a recovered parent re-attaches to its children),
and the idempotency keys of runs started on request of a parent (a retried ``/start`` from a
recovered parent re-attaches instead of starting the child again).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar

from ..core.sql import query_rows

__all__ = ["ChildRef", "SessionRecord", "SessionStore", "Status"]

Status = str  # idle | active | completed | failed | interrupted | paused | suspended_*

_COLUMNS = (
    "session_id",
    "agent_type",
    "run_id",
    "status",
    "step_count",
    "output",
    "error",
    "checkpoint_id",
    "user_id",
    "tags",
    "metadata",
    "interrupt_reason",
    "parent_session_id",
    "root_session_id",
    "run_start_sequence",
    "aborted",
    "interrupt_context",
    "created_at",
    "updated_at",
)
_JSON = frozenset({"output", "tags", "metadata", "interrupt_context"})
#: Columns added after the first release: added to an older table on activation.
_ADDED = {
    "cf_server_session": {"aborted": "INTEGER NOT NULL DEFAULT 0", "interrupt_context": "TEXT"},
    "cf_server_children": {"settled_at": "INTEGER"},
}


@dataclass
class SessionRecord:
    session_id: str | None = None
    agent_type: str | None = None
    run_id: str | None = None
    status: Status = "idle"
    step_count: int = 0
    output: Any = None
    error: str | None = None
    checkpoint_id: str | None = None
    user_id: str | None = None
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)
    #: A durable soft interrupt, set by ``/interrupt`` and cleared when the run observes it.
    interrupt_reason: str | None = None
    parent_session_id: str | None = None
    root_session_id: str | None = None
    #: The stream sequence the current run started at (a parent reads its child from there).
    run_start_sequence: int = 0
    #: The run was stopped by an abort (a hard stop: neither resumed nor retried).
    aborted: bool = False
    #: Why and when the run was interrupted (``reason``, ``source``: request | crash,
    #: ``runId``, ``stepCount``, ``interruptedAt``), while it is.
    interrupt_context: dict[str, Any] | None = None
    created_at: int = 0
    updated_at: int = 0


@dataclass(frozen=True, slots=True)
class ChildRef:
    session_id: str
    agent_type: str
    tool_call_id: str
    mode: str  # "ephemeral" | "persistent"
    name: str | None
    status: str  # active | suspended | completed | failed
    created_at: int | None = None
    #: When its last call ended (completed or failed), for the sub-agent stats' durations.
    settled_at: int | None = None


def _bindable(value: Any) -> Any:
    """A bool as the INTEGER SQLite stores (a JavaScript boolean does not bind on Cloudflare)."""
    return int(value) if isinstance(value, bool) else value


class SessionStore:
    """The session row and its side tables, over the agent's ``sql``."""

    SCHEMA: ClassVar[tuple[str, ...]] = (
        """CREATE TABLE IF NOT EXISTS cf_server_session (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  session_id TEXT, agent_type TEXT, run_id TEXT, status TEXT NOT NULL DEFAULT 'idle',
  step_count INTEGER NOT NULL DEFAULT 0, output TEXT, error TEXT, checkpoint_id TEXT,
  user_id TEXT, tags TEXT, metadata TEXT, interrupt_reason TEXT, parent_session_id TEXT,
  root_session_id TEXT, run_start_sequence INTEGER NOT NULL DEFAULT 0,
  aborted INTEGER NOT NULL DEFAULT 0, interrupt_context TEXT,
  created_at INTEGER NOT NULL DEFAULT 0, updated_at INTEGER NOT NULL DEFAULT 0)""",
        """CREATE TABLE IF NOT EXISTS cf_server_checkpoints (
  id TEXT PRIMARY KEY, run_id TEXT NOT NULL, step INTEGER NOT NULL,
  message_count INTEGER NOT NULL, part_count INTEGER NOT NULL, created_at INTEGER NOT NULL)""",
        """CREATE TABLE IF NOT EXISTS cf_server_children (
  session_id TEXT PRIMARY KEY, agent_type TEXT NOT NULL, tool_call_id TEXT NOT NULL,
  mode TEXT NOT NULL, name TEXT, status TEXT NOT NULL, created_at INTEGER NOT NULL,
  settled_at INTEGER)""",
        """CREATE TABLE IF NOT EXISTS cf_server_subagent_calls (
  tool_call_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, agent_type TEXT NOT NULL,
  status TEXT NOT NULL, started_at INTEGER NOT NULL, settled_at INTEGER)""",
        """CREATE TABLE IF NOT EXISTS cf_server_run_keys (
  key TEXT PRIMARY KEY, run_id TEXT NOT NULL, start_sequence INTEGER NOT NULL)""",
        """CREATE TABLE IF NOT EXISTS cf_server_client_results (
  tool_call_id TEXT PRIMARY KEY, owner_session_id TEXT NOT NULL, completed_at INTEGER NOT NULL)""",
    )

    def __init__(self, sql: Any, now: Callable[[], float]) -> None:
        """``sql``: the object's ``ctx.storage.sql``; ``now``: the agent's clock (ms)."""
        self._sql = partial(query_rows, sql)
        self._now = now
        for statement in self.SCHEMA:
            self._sql(statement)
        for table, columns in _ADDED.items():
            present = {str(r["name"]) for r in self._sql(f"PRAGMA table_info({table})")}
            for column, ddl in columns.items():
                if column not in present:
                    self._sql(f"ALTER TABLE {table} ADD COLUMN {column} {ddl}")

    def get(self) -> SessionRecord:
        rows = self._sql(f"SELECT {', '.join(_COLUMNS)} FROM cf_server_session WHERE id = 1")
        if not rows:
            return SessionRecord()
        values = dict(rows[0])
        for key in _JSON:
            raw = values.get(key)
            values[key] = json.loads(raw) if raw is not None else None
        values["tags"] = values["tags"] or []
        values["metadata"] = values["metadata"] or {}
        values["aborted"] = bool(values["aborted"])
        return SessionRecord(**values)

    def update(self, **fields: Any) -> SessionRecord:
        """Write ``fields`` to the row (created on first write); the new record."""
        record = self.get()
        now = int(self._now())
        for key, value in fields.items():
            if key not in _COLUMNS:
                raise KeyError(f"no session field {key!r}")
            setattr(record, key, value)
        record.updated_at = now
        record.created_at = record.created_at or now
        values = [
            json.dumps(getattr(record, c)) if c in _JSON else _bindable(getattr(record, c))
            for c in _COLUMNS
        ]
        self._sql(
            f"INSERT OR REPLACE INTO cf_server_session (id, {', '.join(_COLUMNS)}) "
            f"VALUES (1, {', '.join('?' * len(_COLUMNS))})",
            *values,
        )
        return record

    # -- checkpoints ----------------------------------------------------------------------------
    def checkpoint(self, run_id: str, step: int, message_count: int, part_count: int) -> str:
        checkpoint_id = f"cp-{run_id}-{step}"
        self._sql(
            "INSERT OR REPLACE INTO cf_server_checkpoints VALUES (?, ?, ?, ?, ?, ?)",
            checkpoint_id,
            run_id,
            step,
            message_count,
            part_count,
            int(self._now()),
        )
        return checkpoint_id

    def find_checkpoint(self, checkpoint_id: str) -> dict[str, Any] | None:
        rows = self._sql("SELECT * FROM cf_server_checkpoints WHERE id = ?", checkpoint_id)
        return dict(rows[0]) if rows else None

    # -- children -------------------------------------------------------------------------------
    def add_child(self, child: ChildRef) -> None:
        """Remember a child session; a persistent child called again becomes active again."""
        now = int(self._now())
        self._sql(
            "INSERT INTO cf_server_children (session_id, agent_type, tool_call_id, mode, name, "
            "status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE "
            "SET tool_call_id = excluded.tool_call_id, status = excluded.status, "
            "created_at = excluded.created_at, settled_at = NULL "
            "WHERE cf_server_children.tool_call_id != excluded.tool_call_id",
            child.session_id,
            child.agent_type,
            child.tool_call_id,
            child.mode,
            child.name,
            child.status,
            now,
        )
        self._sql(
            "INSERT OR IGNORE INTO cf_server_subagent_calls VALUES (?, ?, ?, ?, ?, NULL)",
            child.tool_call_id,
            child.session_id,
            child.agent_type,
            child.status,
            now,
        )

    def set_child_status(self, session_id: str, status: str) -> None:
        """The child's current call stands at ``status`` (its call row too)."""
        settled = int(self._now()) if status in ("completed", "failed") else None
        self._sql(
            "UPDATE cf_server_children SET status = ?, settled_at = ? WHERE session_id = ?",
            status,
            settled,
            session_id,
        )
        self._sql(
            "UPDATE cf_server_subagent_calls SET status = ?, settled_at = ? WHERE tool_call_id = "
            "(SELECT tool_call_id FROM cf_server_children WHERE session_id = ?)",
            status,
            settled,
            session_id,
        )

    def sub_agent_calls(self) -> list[tuple[str, str, int]]:
        """Every sub-agent call: (agent type, status, duration ms), for the usage stats."""
        rows = self._sql(
            "SELECT agent_type, status, started_at, settled_at FROM cf_server_subagent_calls"
        )
        return [
            (
                str(r["agent_type"]),
                str(r["status"]),
                int(r["settled_at"] - r["started_at"]) if r["settled_at"] is not None else 0,
            )
            for r in rows
        ]

    def children(self) -> list[ChildRef]:
        rows = self._sql(
            "SELECT session_id, agent_type, tool_call_id, mode, name, status, created_at, "
            "settled_at FROM cf_server_children ORDER BY created_at, session_id"
        )
        return [ChildRef(**dict(r)) for r in rows]

    # -- client tool results ----------------------------------------------------------------------
    def record_client_result(self, tool_call_id: str, owner_session_id: str) -> None:
        """A client tool call was answered (here, or forwarded to ``owner_session_id``)."""
        self._sql(
            "INSERT OR IGNORE INTO cf_server_client_results VALUES (?, ?, ?)",
            tool_call_id,
            owner_session_id,
            int(self._now()),
        )

    def completed_client_calls(self) -> dict[str, int]:
        """The seed's ``completedClientToolCalls``: tool call id -> when it was answered (ms)."""
        rows = self._sql("SELECT tool_call_id, completed_at FROM cf_server_client_results")
        return {str(r["tool_call_id"]): int(r["completed_at"]) for r in rows}

    # -- run keys -------------------------------------------------------------------------------
    def run_for_key(self, key: str) -> tuple[str, int] | None:
        rows = self._sql("SELECT run_id, start_sequence FROM cf_server_run_keys WHERE key = ?", key)
        return (str(rows[0]["run_id"]), int(rows[0]["start_sequence"])) if rows else None

    def rename_run(self, previous: str, run_id: str) -> None:
        """A resumed run goes on as ``run_id``: a parent's key for ``previous`` now names it."""
        self._sql("UPDATE cf_server_run_keys SET run_id = ? WHERE run_id = ?", run_id, previous)

    def remember_key(self, key: str, run_id: str, start_sequence: int) -> None:
        self._sql(
            "INSERT OR IGNORE INTO cf_server_run_keys VALUES (?, ?, ?)", key, run_id, start_sequence
        )
