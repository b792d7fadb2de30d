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

from ..core.protocol import dumps
from .calls import pending_approvals
from .contexts import AfterResumeContext, AfterStartContext, BeforeResumeContext, BeforeStartContext
from .errors import RequestError
from .hooks import AbortResult, call_hook
from .outcomes import LAST_RESUME_KEY
from .requests import ResumeRequest, StartRequest, merge_patch, parse_resume
from .toolresults import apply_approvals, approval_responses

if TYPE_CHECKING:
    from .server import AgentServer

__all__ = ["children_settled", "new_run_id", "resume_request", "resume_run", "start_run"]

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
        "suspended_approval",
    }
)
#: What each mode accepts besides a paused run: a failed run is answered again (``retry``) or
#: restarted from a checkpoint (``branch``); a completed one only branched — continuing a finished
#: answer would rewrite it and bill again.
_ALSO = {"continue": frozenset(), "retry": frozenset({"failed"}),
         "branch": frozenset({"failed", "completed"})}  # fmt: skip


def new_run_id() -> str:
    return f"run_{secrets.token_hex(8)}"


def _conflict(message: str, code: str = "RUN_IN_PROGRESS", **details: Any) -> RequestError:
    return RequestError(409, code, message, **details)


async def start_run(
    server: AgentServer, req: StartRequest, request: Any = None, body: Any = None
) -> Any:
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
        BeforeStartContext(
            env=server.env,
            request=request,
            body=body if isinstance(body, Mapping) else {},
            start=req,
            execution_state=server.execution_state,
            logger=server.log,
        ),
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
    if req.state is not None:  # the seed's input.state: this run's agent state
        _modify_state(server, lambda _old: req.state, "input.state")
    run_id = new_run_id()
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
    server.start_turn(continuation=False)
    await call_hook(
        server.hooks.after_start,
        AfterStartContext(
            env=server.env,
            session_id=req.session_id,
            run_id=run_id,
            agent_type=req.agent_type,
            execution_state=server.execution_state,
            logger=server.log,
            record_metric=server.metric_recorder(f"{run_id}:after_start"),
        ),
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


def _modify_state(server: AgentServer, change: Any, field: str = "options.modifyState") -> None:
    """The seed's ``modifyState``, applied before the run goes on and in the same synchronous
    step as the resume's own writes (so both are committed, or neither)."""
    try:
        state = (
            change(copy.deepcopy(server.state))
            if callable(change)
            else merge_patch(server.state, change)
        )
        server.set_state(state)
    except Exception as exc:
        raise RequestError(400, "BAD_STATE", f"{field} refused: {type(exc).__name__}: {exc}",
                           field=field) from None  # fmt: skip


async def resume_request(
    server: AgentServer, body: Any, *, retry: bool = False, request: Any = None
) -> Any:
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
    answer = await resume_run(server, parse_resume(body), retry=retry, request=request, body=body)
    if isinstance(answer, dict):
        kv.put(LAST_RESUME_KEY, dumps({"fingerprint": fingerprint, "answer": answer}))
    return answer


async def resume_run(
    server: AgentServer,
    req: ResumeRequest,
    *,
    retry: bool = False,
    request: Any = None,
    body: Any = None,
) -> Any:
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
    _check_approvals(server, req, mode)
    hook_before = server.hooks.before_retry if retry else server.hooks.before_resume
    hook = await call_hook(
        hook_before,
        BeforeResumeContext(
            env=server.env,
            request=request,
            body=body if isinstance(body, Mapping) else {},
            resume=req,
            mode=mode,
            execution_state=server.execution_state,
            logger=server.log,
        ),
    )
    if isinstance(hook, AbortResult):
        return hook
    if mode == "retry":
        _drop_run_output(server)
        server.sessions.update(step_count=0, checkpoint_id=None)
    elif mode == "branch":
        step = _branch(server, req.checkpoint_id or "")
        server.sessions.update(step_count=step, checkpoint_id=req.checkpoint_id)
    if req.approvals:  # the durable write: the continuation runs what was approved
        apply_approvals(server, list(req.approvals))
    if req.append_messages:
        server.persist_messages([*server.messages, *req.append_messages])
    server.stream.reopen()
    if req.modify_state is not None:
        _modify_state(server, req.modify_state)
    # The seed's model: a resume is a new execution (run) of the session, and its run_resumed
    # chunk names the run it continues; a parent's run key follows it to the new run.
    previous, run_id = record.run_id, new_run_id()
    server.sessions.update(
        run_id=run_id,
        status="active",
        error=None,
        output=None,
        interrupt_reason=None,
        interrupt_context=None,
    )
    server.sessions.rename_run(previous or "", run_id)
    server.stream.append(
        {
            "type": "run_resumed",
            "runId": run_id,
            "previousRunId": previous,
            "mode": mode,
            "agentId": record.session_id,
        }
    )
    last = server.messages[-1] if server.messages else None
    if req.approvals and last is not None:
        approval_responses(server, last)
    server.start_turn(continuation=last is not None and last.get("role") == "assistant")
    hook_after = server.hooks.after_retry if retry else server.hooks.after_resume
    await call_hook(
        hook_after,
        AfterResumeContext(
            env=server.env,
            session_id=record.session_id or server.name,
            run_id=run_id,
            previous_run_id=previous,
            agent_type=record.agent_type or "",
            mode=mode,
            execution_state=server.execution_state,
            logger=server.log,
            record_metric=server.metric_recorder(f"{run_id}:after_{mode}"),
        ),
    )
    return {
        "sessionId": record.session_id,
        "streamId": run_id,
        "runId": run_id,
        "previousRunId": previous,
        "status": "resumed",
        "mode": mode,
        "startSequence": server.stream.latest_sequence,
    }


def _check_approvals(server: AgentServer, req: ResumeRequest, mode: str) -> None:
    """A ``suspended_approval`` run goes on only in ``continue`` mode with a decision for every
    call it waits for (409 naming the missing ones); decisions for any other run are refused."""
    last = server.messages[-1] if server.messages else None
    waiting = pending_approvals(last) if server.session.status == "suspended_approval" else {}
    if req.approvals and (not waiting or mode != "continue"):
        raise _conflict(
            "options.approvals answers the calls of a suspended_approval run in mode continue; "
            f"this run is {server.session.status} (mode {mode!r})",
            "NOT_AWAITING_APPROVAL",
            status=server.session.status,
        )
    if waiting and mode == "continue":
        given = {a.tool_call_id for a in req.approvals}
        missing = sorted(set(waiting) - given)
        unknown = sorted(given - set(waiting))
        if unknown:
            raise RequestError(404, "UNKNOWN_TOOL_CALL", f"no tool call of {unknown} waits for "
                               "an approval in this session", toolCallIds=unknown)  # fmt: skip
        if missing:
            raise _conflict(
                f"the run waits for a person's approval of {missing}: resume with "
                "options.approvals [{toolCallId, approved, reason?}] for each",
                "APPROVAL_PENDING",
                toolCallIds=missing,
            )


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
