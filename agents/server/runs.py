"""Starting, resuming, retrying and answering runs — what the routes do, state-checked.

Each action validates against the session's state first and raises
:class:`~.errors.RequestError` (409 for a conflict) without changing anything; then it writes
what must be durable *before* answering (the user message, the new run, a tool result), and
starts the turn in the background (``ctx.waitUntil``): a Durable Object has no process between
requests, so whatever advances a run must be started by the request that makes it possible.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..chat.turn import TurnSpec, new_request_id
from ..core.portable import wait_until
from ..core.protocol import dumps
from .calls import pending_client_calls
from .errors import RequestError
from .hooks import AbortResult, call_hook
from .outcomes import LAST_RESUME_KEY
from .requests import ResumeRequest, StartRequest, ToolResultRequest, parse_resume

if TYPE_CHECKING:
    from .server import AgentServer

__all__ = ["resume_request", "resume_run", "start_run", "submit_tool_result"]

#: How long a /start waits for a run its before_start hook stopped.
_SUPERSEDE_WAIT_S = 60.0
#: Where a run stopped and may go on: ``/resume`` in every mode.
_PAUSED = frozenset(
    {
        "interrupted",
        "paused",
        "suspended_client_tool",
        "suspended_awaiting_children",
        "suspended_step_partial",
    }
)
#: What each mode accepts besides a paused run: a failed run is answered again (``retry``) or
#: restarted from a checkpoint (``branch``); a completed one only branched — continuing a finished
#: answer would rewrite it and bill again.
_ALSO = {"continue": frozenset(), "retry": frozenset({"failed"}),
         "branch": frozenset({"failed", "completed"})}  # fmt: skip


def _conflict(message: str, code: str = "RUN_IN_PROGRESS", **details: Any) -> RequestError:
    return RequestError(409, code, message, **details)


def _enqueue(server: AgentServer, *, continuation: bool) -> None:
    if continuation:
        wait_until(server.ctx, server.continue_last_turn())
        return
    spec = TurnSpec(new_request_id())
    wait_until(server.ctx, server._chat_enqueue(spec))


async def start_run(server: AgentServer, req: StartRequest, request: Any) -> Any:
    """``/start``: a new run of ``req.agent_type`` on this session (or, for a key seen
    before, the run it started)."""
    record = server.session
    if record.session_id is not None and record.session_id != req.session_id:
        raise _conflict(
            f"this object hosts session {record.session_id!r}, not {req.session_id!r}",
            "SESSION_MISMATCH",
        )
    if req.idempotency_key is not None:
        known = server.sessions.run_for_key(req.idempotency_key)
        if known is not None:  # a recovered parent asks again: re-attach (and carry on)
            if known[0] == record.run_id and record.status in ("interrupted", "paused"):
                await resume_run(server, ResumeRequest("continue", None, ()))
            return {
                "sessionId": req.session_id,
                "streamId": known[0],
                "status": "resumed",
                "startSequence": known[1],
            }
    if not server.registry.has(req.agent_type):
        server.registry.get(req.agent_type)  # raises AgentNotFoundError with the known types
    hook = await call_hook(
        server.hooks.before_start,
        {
            "env": server.env,
            "request": request,
            "body": req,
            "execution_state": server.execution_state,
        },
    )
    if isinstance(hook, AbortResult):
        return hook
    if server.is_executing and server.stop_requested:
        # The hook stopped the run in progress ("last message wins"): start once it has ended.
        server.run_settled.clear()
        try:
            await asyncio.wait_for(server.run_settled.wait(), _SUPERSEDE_WAIT_S)
        except TimeoutError:
            pass  # still running: refused below
    if server.is_executing or server.session.status == "active":
        raise _conflict(
            "a run is in progress on this session: interrupt or abort it first",
            sessionStatus=server.session.status,
        )
    run_id = f"run_{secrets.token_hex(8)}"
    server.ctx.storage.kv.delete(LAST_RESUME_KEY)
    server.stream.reopen()
    start_sequence = server.stream.latest_sequence + 1
    server.sessions.update(
        session_id=req.session_id,
        agent_type=req.agent_type,
        run_id=run_id,
        status="active",
        step_count=0,
        checkpoint_id=None,
        output=None,
        error=None,
        user_id=req.user_id,
        tags=list(req.tags),
        metadata=dict(req.metadata or {}),
        interrupt_reason=None,
        interrupt_context=None,
        aborted=False,
        parent_session_id=req.parent_session_id,
        root_session_id=req.root_session_id or req.parent_session_id or req.session_id,
        run_start_sequence=start_sequence,
    )
    if req.idempotency_key is not None:
        server.sessions.remember_key(req.idempotency_key, run_id, start_sequence)
    server.stream.append(
        {
            "type": "run_started",
            "runId": run_id,
            "agentType": req.agent_type,
            "agentId": req.session_id,
        }
    )
    server.persist_messages(list(req.messages))
    _enqueue(server, continuation=False)
    await call_hook(
        server.hooks.after_start,
        {
            "env": server.env,
            "session_id": req.session_id,
            "run_id": run_id,
            "agent_type": req.agent_type,
        },
    )
    return {
        "sessionId": req.session_id,
        "streamId": run_id,
        "status": "started",
        "startSequence": start_sequence,
    }


def _drop_run_output(server: AgentServer) -> None:
    """The messages after the last user message go: the run is answered again."""
    messages = server.messages
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    if last_user < 0:
        raise _conflict("there is no user message to answer again", "NOTHING_TO_RETRY")
    kept = messages[: last_user + 1]
    server._chat_persist_and_broadcast(kept, (), delete_stale=True)  # the rest is deleted


def _branch(server: AgentServer, checkpoint_id: str) -> int:
    """Cut the transcript back to ``checkpoint_id``; the step it was taken after."""
    found = server.sessions.find_checkpoint(checkpoint_id)
    if found is None:
        raise RequestError(
            404,
            "CHECKPOINT_NOT_FOUND",
            f"no checkpoint {checkpoint_id!r}",
            checkpointId=checkpoint_id,
        )
    messages = server.messages
    kept = copy.deepcopy(messages[: int(found["message_count"])])
    parts = int(found["part_count"])
    later = messages[int(found["message_count"]) :]
    if parts and later and later[0].get("role") == "assistant":
        kept.append({**later[0], "parts": list(later[0].get("parts") or [])[:parts]})
    server._chat_persist_and_broadcast(kept, (), delete_stale=True)  # the rest is deleted
    return int(found["step"])


async def resume_request(server: AgentServer, body: Any, *, retry: bool = False) -> Any:
    """``/resume`` and ``/retry`` as requests: a repeat of the last accepted one (the same
    route and body, with no stop since that made the run resumable again) is answered as the
    first was, ``duplicate: true``, and changes nothing — a client that lost the answer may
    safely send it again."""
    fingerprint = hashlib.sha256(dumps({"retry": retry, "body": body}).encode()).hexdigest()
    kv = server.ctx.storage.kv
    stored = kv.get(LAST_RESUME_KEY)  # JSON text: a JS object would not read back as a dict
    last = json.loads(stored) if isinstance(stored, str) else None
    if isinstance(last, dict) and last.get("fingerprint") == fingerprint:
        return {**last["answer"], "duplicate": True}
    answer = await resume_run(server, parse_resume(body), retry=retry)
    if isinstance(answer, dict):
        kv.put(LAST_RESUME_KEY, dumps({"fingerprint": fingerprint, "answer": answer}))
    return answer


async def resume_run(server: AgentServer, req: ResumeRequest, *, retry: bool = False) -> Any:
    """``/resume`` (``continue`` | ``retry`` | ``branch``) and ``/retry``: state-checked (409
    naming the status for a run that is not paused, or failed for ``retry`` / ``branch``, or
    completed for ``branch``; an aborted run is never resumed), then continued in the
    background."""
    record = server.session
    if server.is_executing:
        raise _conflict("the run is still executing; nothing to resume")
    if record.run_id is None:
        raise _conflict("this session has no run to resume", "NO_RUN")
    mode = "retry" if retry else req.mode
    if record.aborted:
        raise _conflict(
            "the run was aborted — a hard stop, not resumable: start a new run instead",
            "RUN_ABORTED",
            status=record.status,
            sessionStatus=record.status,
        )
    if record.status not in _PAUSED | _ALSO[mode]:
        raise _conflict(
            f"a run that is {record.status} cannot be resumed in mode {mode!r}",
            "NOT_RESUMABLE",
            status=record.status,
            sessionStatus=record.status,
        )
    hook_before = server.hooks.before_retry if retry else server.hooks.before_resume
    hook = await call_hook(
        hook_before,
        {"env": server.env, "body": req, "mode": mode, "execution_state": server.execution_state},
    )
    if isinstance(hook, AbortResult):
        return hook
    if mode == "retry":
        _drop_run_output(server)
        server.sessions.update(step_count=0, checkpoint_id=None)
    elif mode == "branch":
        step = _branch(server, req.checkpoint_id or "")
        server.sessions.update(step_count=step, checkpoint_id=req.checkpoint_id)
    if req.append_messages:
        server.persist_messages([*server.messages, *req.append_messages])
    server.stream.reopen()
    server.sessions.update(
        status="active", error=None, output=None, interrupt_reason=None, interrupt_context=None
    )
    server.stream.append(
        {"type": "run_resumed", "runId": record.run_id, "mode": mode, "agentId": record.session_id}
    )
    last = server.messages[-1] if server.messages else None
    _enqueue(server, continuation=last is not None and last.get("role") == "assistant")
    hook_after = server.hooks.after_retry if retry else server.hooks.after_resume
    await call_hook(
        hook_after,
        {"env": server.env, "session_id": record.session_id, "run_id": record.run_id, "mode": mode},
    )
    return {
        "sessionId": record.session_id,
        "streamId": record.run_id,
        "status": "resumed",
        "mode": mode,
        "startSequence": server.stream.latest_sequence,
    }


def submit_tool_result(server: AgentServer, req: ToolResultRequest) -> dict[str, Any]:
    """A client tool's result, durably applied; the run continues by itself. Idempotent: a
    result for a call already answered changes nothing."""
    messages = server.messages
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        for part in message.get("parts") or ():
            if part.get("toolCallId") != req.tool_call_id:
                continue
            if part.get("state") != "input-available" or req.tool_call_id not in (
                pending_client_calls(message)
            ):
                return {
                    "accepted": False,
                    "reason": "already-completed",
                    "status": server.session.status,
                }
            updated = copy.deepcopy(dict(message))
            for target in updated["parts"]:
                if target.get("toolCallId") == req.tool_call_id:
                    _apply(target, req)
            server.persist_messages([*messages[:index], updated, *messages[index + 1 :]])
            if not pending_client_calls(updated) and not server.is_executing:
                server.sessions.update(status="active")
                server.stream.reopen()
                server.stream.append(
                    {
                        "type": "tool_result",
                        "toolCallId": req.tool_call_id,
                        "result": req.result,
                        "error": req.error,
                        "agentId": server.session.session_id,
                    }
                )
                _enqueue(server, continuation=True)
            return {"accepted": True, "status": server.session.status}
    streaming = server._chat_runner.streaming_message
    if streaming is not None and any(
        p.get("toolCallId") == req.tool_call_id for p in streaming.get("parts") or ()
    ):
        raise _conflict(
            f"tool call {req.tool_call_id!r} belongs to the run still streaming: submit its "
            "result once the run suspends for it",
            "RUN_STILL_STREAMING",
            toolCallId=req.tool_call_id,
        )
    raise RequestError(
        404,
        "UNKNOWN_TOOL_CALL",
        f"no tool call {req.tool_call_id!r} is waiting for a result in this session",
        toolCallId=req.tool_call_id,
    )


def _apply(part: dict[str, Any], req: ToolResultRequest) -> None:
    if req.error is not None:
        part["state"] = "output-error"
        part["errorText"] = req.error
    else:
        part["state"] = "output-available"
        part["output"] = req.result


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


def snapshot_of(server: AgentServer) -> dict[str, Any]:
    """What a page needs on reload: the messages — with the answer still being written, as far
    as ``streamSequence`` goes — so it renders them and reads on from ``streamSequence + 1``."""
    record = server.session
    status = {"active": "active", "completed": "ended", "failed": "failed"}.get(
        record.status, "paused"
    )
    messages = server.messages
    last = messages[-1] if messages else None
    streaming = server._chat_runner.streaming_message
    if streaming is not None:  # the answer being written counts in streamSequence: include it
        partial = copy.deepcopy(dict(streaming))
        messages = [m for m in messages if m.get("id") != partial.get("id")] + [partial]
    snapshot: dict[str, Any] = {
        "runId": record.run_id,
        "messages": messages,
        "state": None,
        "streamSequence": server.stream.latest_sequence,
        "status": status,
        "sessionStatus": record.status,
        "timestamp": int(server._core.now()),
        "agentType": record.agent_type,
        "version": 1,
    }
    if record.error:
        snapshot["error"] = record.error
    pending = pending_client_calls(last) if last and last.get("role") == "assistant" else {}
    if pending:
        snapshot["pendingClientToolCalls"] = pending
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


async def children_settled(server: AgentServer) -> dict[str, Any]:
    """A child's run ended: a run suspended on its children goes on (and re-reads them)."""
    record = server.session
    if record.status != "suspended_awaiting_children" or server.is_executing:
        return {"resumed": False, "status": record.status}
    for child in server.sessions.children():
        if child.status == "suspended":
            server.sessions.set_child_status(child.session_id, "active")
    await resume_run(server, ResumeRequest("continue", None, ()))
    return {"resumed": True, "status": server.session.status}
