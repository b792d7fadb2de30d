"""What the read endpoints answer: ``/status``, ``/snapshot`` and ``/messages``.

``/snapshot`` is everything a page needs on reload, in the seed's field names. A session whose
run waits for its sub-agents also lists the client tool calls those wait for — its own
``pendingClientToolCalls`` plus each waiting child's (read from the child's object, so a
grandchild's count too) — and ``clientToolCallOwnership`` says which session owns each call:
the client answers any of them on this session's route and it is forwarded to its owner.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .calls import pending_approvals, pending_client_calls
from .subagents import call_session

if TYPE_CHECKING:
    from .server import AgentServer

__all__ = ["messages_page", "pending_calls", "snapshot_of", "status_of"]


def status_of(server: AgentServer) -> dict[str, Any]:
    record = server.session
    return {
        "sessionId": record.session_id,
        "status": record.status,
        "stepCount": record.step_count,
        "output": record.output,
        "error": record.error,
        "checkpointId": record.checkpoint_id,
        "isExecuting": server.is_executing,
        "runId": record.run_id,
        "agentType": record.agent_type,
        "interruptRequested": record.interrupt_reason,
    }


async def pending_calls(server: AgentServer) -> tuple[dict[str, Any], dict[str, str]]:
    """The client tool calls this session's run waits for, its own and its waiting
    descendants', and the session that owns each."""
    messages = server.messages
    last = messages[-1] if messages else None
    own = (
        {**pending_client_calls(last), **pending_approvals(last)}
        if last and last.get("role") == "assistant"
        else {}
    )
    me = server.session.session_id or server.name
    pending, owners = dict(own), dict.fromkeys(own, me)
    for child in server.sessions.children():
        if child.status != "suspended":
            continue
        status, snapshot = await call_session(server, child.session_id, "/snapshot")
        if status != 200 or not isinstance(snapshot, Mapping):
            continue
        theirs = snapshot.get("pendingClientToolCalls") or {}
        ownership = snapshot.get("clientToolCallOwnership") or {}
        for call_id, call in theirs.items():
            pending[call_id] = call
            owners[call_id] = str(ownership.get(call_id) or child.session_id)
    return pending, owners


async def snapshot_of(server: AgentServer) -> dict[str, Any]:
    """What a page needs on reload: the messages — with the answer still being written, as far
    as ``streamSequence`` goes — so it renders them and reads on from ``streamSequence + 1``;
    the seed's system fields when they are set."""
    record = server.session
    status = {"active": "active", "completed": "ended", "failed": "failed"}.get(
        record.status, "paused"
    )
    messages = server.messages
    streaming = server._chat_runner.streaming_message
    if streaming is not None:  # the answer being written counts in streamSequence: include it
        partial = copy.deepcopy(dict(streaming))
        messages = [m for m in messages if m.get("id") != partial.get("id")] + [partial]
    snapshot: dict[str, Any] = {
        "runId": record.run_id,
        "messages": messages,
        "state": server.state,
        "streamSequence": server.stream.latest_sequence,
        "status": status,
        "sessionStatus": record.status,
        "timestamp": int(server._core.now()),
        "agentType": record.agent_type,
        "version": 1,
    }
    if record.error:
        snapshot["error"] = record.error
    if record.status == "interrupted" and record.interrupt_context:
        snapshot["interruptContext"] = record.interrupt_context
    pending, owners = await pending_calls(server)
    if pending:
        snapshot["pendingClientToolCalls"] = pending
        snapshot["clientToolCallOwnership"] = owners
    completed = server.sessions.completed_client_calls()
    if completed:
        snapshot["completedClientToolCalls"] = completed
    waiting = [c.session_id for c in server.sessions.children() if c.status == "suspended"]
    if waiting:
        snapshot["awaitingChildren"] = waiting
    if record.root_session_id:
        snapshot["rootSessionId"] = record.root_session_id
    if record.parent_session_id:
        snapshot["parentSessionId"] = record.parent_session_id
    return snapshot


def messages_page(server: AgentServer, offset: int, limit: int) -> Mapping[str, Any]:
    messages = server.messages
    page = messages[offset : offset + limit]
    return {
        "messages": page,
        "total": len(messages),
        "offset": offset,
        "limit": limit,
        "hasMore": offset + len(page) < len(messages),
    }
