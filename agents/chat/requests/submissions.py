"""Durable submissions (the SDK's Think ``submitMessages``): messages handed to the agent to be
answered later, in order, exactly once per idempotency key — even across a kill.

``submit_messages`` writes a ``pending`` row and returns at once; a drain answers the pending
rows oldest first, one turn each. Starting one is one transaction: the row goes ``running`` and
its messages are appended to the transcript together, so a kill before it leaves the row
``pending`` (applied later, once) and a kill after it leaves it ``running`` with its messages
applied once. The interrupted turn itself is bounded recovery's (its fiber is found on the next
activation and continued or retried); the drain, which every activation starts while rows are
left, waits for the chat to be stable and then settles the row. Statuses are the SDK's:
``pending | running | completed | aborted | skipped | error``. A clear skips every pending row.
The table is ``cf_ai_chat_submissions``, with the columns of the SDK's ``cf_think_submissions``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

from ...core.portable import wait_until
from ...core.protocol import dumps
from ...core.sql import execute, query_rows
from ..transcript.incoming import auto_transform_messages, validate_message
from ..transcript.messages import UIMessage
from ..turns.turn import TurnSpec, new_request_id

__all__ = ["SUBMISSION_STATUSES", "Submissions", "create_tables"]

_log = logging.getLogger("agents.chat.requests.submissions")

SUBMISSION_STATUSES = ("pending", "running", "completed", "aborted", "skipped", "error")
_FINISHED = ("completed", "aborted", "skipped", "error")
#: How often an interrupted submission looks again whether its recovery is over (seconds).
_SETTLE_POLL_S = 0.05

_DDL = (
    "CREATE TABLE IF NOT EXISTS cf_ai_chat_submissions (submission_id TEXT PRIMARY KEY, "
    "idempotency_key TEXT UNIQUE, request_id TEXT, stream_id TEXT, status TEXT NOT NULL, "
    "messages_json TEXT NOT NULL, metadata_json TEXT, error_message TEXT, "
    "created_at INTEGER NOT NULL, messages_applied_at INTEGER, started_at INTEGER, "
    "completed_at INTEGER)",
    "CREATE INDEX IF NOT EXISTS cf_ai_chat_submissions_by_status "
    "ON cf_ai_chat_submissions (status, created_at, submission_id)",
)


def create_tables(sql: Any) -> None:
    for statement in _DDL:
        execute(sql, statement)


def _public(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row as the SDK's inspection shape (camelCase, parsed JSON)."""
    out: dict[str, Any] = {
        "submissionId": row["submission_id"],
        "status": row["status"],
        "messages": json.loads(row["messages_json"]),
        "createdAt": row["created_at"],
    }
    optional = {
        "idempotencyKey": row["idempotency_key"],
        "requestId": row["request_id"],
        "metadata": json.loads(row["metadata_json"]) if row["metadata_json"] else None,
        "error": row["error_message"],
        "messagesAppliedAt": row["messages_applied_at"],
        "startedAt": row["started_at"],
        "completedAt": row["completed_at"],
    }
    out.update({k: v for k, v in optional.items() if v is not None})
    return out


class Submissions:
    """The submissions of one ``AIChatAgent`` (``agent``: its private chat parts)."""

    __slots__ = ("_agent", "_draining", "_running_request")

    def __init__(self, agent: Any) -> None:
        self._agent = agent
        self._draining = False
        self._running_request: dict[str, str] = {}

    @property
    def _sql(self) -> Any:
        return self._agent.ctx.storage.sql

    def _row(self, submission_id: str) -> dict[str, Any] | None:
        rows = query_rows(
            self._sql, "SELECT * FROM cf_ai_chat_submissions WHERE submission_id = ?", submission_id
        )
        return rows[0] if rows else None

    # -- the API ---------------------------------------------------------------------------------
    def submit(
        self,
        messages: Iterable[UIMessage],
        *,
        submission_id: str | None,
        idempotency_key: str | None,
        metadata: Any,
    ) -> dict[str, Any]:
        """Record a pending submission (or return the one this idempotency key already has)."""
        if idempotency_key is not None:
            rows = query_rows(
                self._sql,
                "SELECT * FROM cf_ai_chat_submissions WHERE idempotency_key = ?",
                idempotency_key,
            )
            if rows:
                return {**_public(rows[0]), "accepted": False}
        checked = [validate_message(m) for m in auto_transform_messages(list(messages))]
        sid = submission_id or secrets.token_urlsafe(12)
        if (taken := self._row(sid)) is not None:  # an id given twice: the first one stands
            return {**_public(taken), "accepted": False}
        execute(
            self._sql,
            "INSERT INTO cf_ai_chat_submissions (submission_id, idempotency_key, status, "
            "messages_json, metadata_json, created_at) VALUES (?, ?, 'pending', ?, ?, ?)",
            sid,
            idempotency_key,
            dumps(checked),
            dumps(metadata) if metadata is not None else None,
            int(self._agent._core.now()),
        )
        wait_until(self._agent.ctx, self.drain())
        row = self._row(sid)
        assert row is not None
        return {**_public(row), "accepted": True}

    def inspect(self, submission_id: str) -> dict[str, Any] | None:
        row = self._row(submission_id)
        return _public(row) if row is not None else None

    def list(self, status: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        if status is not None:
            rows = query_rows(
                self._sql,
                "SELECT * FROM cf_ai_chat_submissions WHERE status = ? "
                "ORDER BY created_at, rowid LIMIT ?",
                status,
                limit,
            )
        else:
            rows = query_rows(
                self._sql,
                "SELECT * FROM cf_ai_chat_submissions ORDER BY created_at, rowid LIMIT ?",
                limit,
            )
        return [_public(r) for r in rows]

    def cancel(self, submission_id: str) -> bool:
        """A pending submission never runs (``aborted``); a running one's turn is aborted."""
        row = self._row(submission_id)
        if row is None or row["status"] in _FINISHED:
            return False
        if row["status"] == "pending":
            self._settle(submission_id, "aborted")
            return True
        abort = self._agent._chat_aborts.get(row["request_id"] or "")
        if abort is not None:
            abort.set()
        return True

    def delete(self, status: str | None = None, completed_before: float | None = None) -> int:
        """Delete finished submissions (all of them, or of ``status``, or finished before)."""
        clauses = ["status IN ('completed', 'aborted', 'skipped', 'error')"]
        params: list[Any] = []
        if status is not None:
            clauses.append("status = ?")
            params.append(status)
        if completed_before is not None:
            clauses.append("completed_at < ?")
            params.append(int(completed_before))
        where = " AND ".join(clauses)
        count = query_rows(
            self._sql, f"SELECT count(*) AS n FROM cf_ai_chat_submissions WHERE {where}", *params
        )[0]["n"]
        execute(self._sql, f"DELETE FROM cf_ai_chat_submissions WHERE {where}", *params)
        return int(count)

    def skip_pending(self) -> None:
        """A clear: nothing queued before it runs."""
        execute(
            self._sql,
            "UPDATE cf_ai_chat_submissions SET status = 'skipped', completed_at = ? "
            "WHERE status = 'pending'",
            int(self._agent._core.now()),
        )

    # -- answering them ----------------------------------------------------------------------------
    def has_work(self) -> bool:
        return bool(
            query_rows(
                self._sql,
                "SELECT 1 FROM cf_ai_chat_submissions WHERE status IN ('pending', 'running') "
                "LIMIT 1",
            )
        )

    async def drain(self) -> None:
        """Answer every pending submission, oldest first (one drain at a time), and settle one
        that an earlier activation left running."""
        if self._draining:
            return
        self._draining = True
        agent = self._agent
        try:
            async with agent.keep_alive():
                while (row := self._next()) is not None:
                    if row["status"] == "running":
                        await self._settle_interrupted(row)
                    else:
                        await self._run(row)
        finally:
            self._draining = False

    def _next(self) -> dict[str, Any] | None:
        rows = query_rows(
            self._sql,
            "SELECT * FROM cf_ai_chat_submissions WHERE status IN ('running', 'pending') "
            "ORDER BY status = 'pending', created_at, rowid LIMIT 1",
        )
        if not rows:
            return None
        row = rows[0]
        if row["status"] == "running" and row["request_id"] in self._running_request.values():
            return None  # being answered by this activation
        return row

    async def _run(self, row: dict[str, Any]) -> None:
        agent = self._agent
        sid = row["submission_id"]
        messages = json.loads(row["messages_json"])
        request_id = new_request_id()
        now = int(agent._core.now())

        def start() -> None:  # one transaction: running, and the messages applied, together
            execute(
                self._sql,
                "UPDATE cf_ai_chat_submissions SET status = 'running', request_id = ?, "
                "started_at = ?, messages_applied_at = ? WHERE submission_id = ?",
                request_id,
                now,
                now,
                sid,
            )
            agent.persist_messages(messages)

        agent.ctx.storage.transactionSync(start)
        self._running_request[sid] = request_id
        try:
            spec = TurnSpec(
                request_id,
                origin_ids=[m["id"] for m in messages if m.get("role") == "user"],
                body=agent._chat_context.last_body,
                client_tools=agent._chat_context.last_client_tools,
            )
            result = await agent._chat_enqueue(spec)
        finally:
            self._running_request.pop(sid, None)
        status = result.get("status")
        if status == "recovering":  # a stall: recovery answers it; settle when stable
            await agent.wait_until_stable()
            status = "completed"
        mapped = {"completed": "completed", "aborted": "aborted", "skipped": "skipped"}
        self._settle(sid, mapped.get(str(status), "error"), result.get("error"))

    async def _settle_interrupted(self, row: dict[str, Any]) -> None:
        """Left running by a dead process: its messages are in the transcript once; bounded
        recovery answers its turn. Settled once recovery is over and the chat is stable."""
        agent = self._agent
        while agent._chat_recovering() or agent._chat_queue.busy:
            await agent.wait_until_stable()
            await asyncio.sleep(_SETTLE_POLL_S)
        last = self._agent.messages[-1] if self._agent.messages else None
        answered = last is not None and last.get("role") == "assistant"
        self._settle(
            row["submission_id"],
            "completed" if answered else "error",
            None if answered else "interrupted, and recovery did not answer it",
        )

    def _settle(self, submission_id: str, status: str, error: Any = None) -> None:
        execute(
            self._sql,
            "UPDATE cf_ai_chat_submissions SET status = ?, error_message = ?, completed_at = ? "
            "WHERE submission_id = ?",
            status,
            str(error) if error else None,
            int(self._agent._core.now()),
            submission_id,
        )
        _log.debug("submission %s %s", submission_id, status)
