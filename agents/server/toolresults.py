"""A client tool's result: applied durably, once, by the session that owns the call.

``submit-tool-result`` writes the result into the assistant message (the durable write) and,
when it was the last call the run waited for, *continues the run itself* — an object has no
process between requests, so nothing else would. A result for a call already answered changes
nothing (``accepted: false``). A call this session does not own may be waiting in one of the
sub-agents its run is suspended on (``clientToolCallOwnership`` in ``/snapshot``): the result is
forwarded to that child's object, which forwards it on to a grandchild the same way.

A call of a server tool that needs approval (``approval-requested``) is answered
``{approved, reason?}``: the decision is the durable write (the part becomes
``approval-responded`` or ``output-denied``), and once no call is left waiting the run goes on
itself; the model loop's continuation runs an approved call through the ledger (once, however
often it is re-sent or recovered) and tells the model of a denied one. The same decision again
changes nothing (``accepted: false``); the opposite one is a 409 naming the call.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .calls import pending_approvals, pending_client_calls
from .errors import RequestError
from .requests import ToolResultRequest
from .subagents import call_session

if TYPE_CHECKING:
    from .server import AgentServer

__all__ = ["apply_approvals", "approval_responses", "submit_tool_result"]


async def submit_tool_result(server: AgentServer, req: ToolResultRequest) -> dict[str, Any]:
    """Apply ``req`` here, or forward it to the waiting descendant that owns the call; raises
    :class:`RequestError` (409 for a call of the run still streaming, 404 for a call no one
    here waits for)."""
    answer = await _apply_here(server, req)
    if answer is not None:
        return answer
    for child in server.sessions.children():
        if child.status != "suspended":
            continue
        body: dict[str, Any] = {"toolCallId": req.tool_call_id}
        if req.approved is not None:
            body.update(approved=req.approved, reason=req.reason)
        else:
            body.update(result=req.result, error=req.error)
        path = f"/chat/{child.session_id}/submit-tool-result"
        status, forwarded = await call_session(server, child.session_id, path, body)
        if status == 404:
            continue
        if status >= 400:
            raise RequestError(status, str(forwarded.get("code", "CHILD_REFUSED")),
                               str(forwarded.get("error", forwarded)))  # fmt: skip
        server.sessions.record_client_result(req.tool_call_id, child.session_id)
        return {**forwarded, "ownerSessionId": forwarded.get("ownerSessionId", child.session_id)}
    raise RequestError(
        404,
        "UNKNOWN_TOOL_CALL",
        f"no tool call {req.tool_call_id!r} is waiting for a result in this session",
        toolCallId=req.tool_call_id,
    )


async def _apply_here(server: AgentServer, req: ToolResultRequest) -> dict[str, Any] | None:
    """The result applied to this session's own call (None: it has no such call)."""
    me = server.session.session_id
    messages = server.messages
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        for part in message.get("parts") or ():
            if part.get("toolCallId") != req.tool_call_id:
                continue
            if _approval_part(part):
                updated = apply_approvals(server, [req])
                if updated and not pending_client_calls(updated) and not server.is_executing:
                    if not pending_approvals(updated):  # every call answered: the run goes on
                        server.sessions.update(status="active")
                        server.stream.reopen()
                        approval_responses(server, updated)
                        server.start_turn(continuation=True)
                answer: dict[str, Any] = {"accepted": bool(updated)}
                if not updated:
                    answer["reason"] = "already-answered"
                return {**answer, "status": server.session.status, "ownerSessionId": me}
            if req.approved is not None:
                raise RequestError(400, "BAD_REQUEST", f"tool call {req.tool_call_id!r} is a "
                                   "client tool's: answer it with {result} or {error}",
                                   toolCallId=req.tool_call_id)  # fmt: skip
            if part.get("state") != "input-available" or req.tool_call_id not in (
                pending_client_calls(message)
            ):
                return {
                    "accepted": False,
                    "reason": "already-completed",
                    "status": server.session.status,
                    "ownerSessionId": me,
                }
            updated = copy.deepcopy(dict(message))
            for target in updated["parts"]:
                if target.get("toolCallId") == req.tool_call_id:
                    _apply(target, req)
            server.persist_messages([*messages[:index], updated, *messages[index + 1 :]])
            server.sessions.record_client_result(req.tool_call_id, me or server.name)
            if (
                not pending_client_calls(updated)
                and not pending_approvals(updated)
                and not server.is_executing
            ):
                server.sessions.update(status="active")
                server.stream.reopen()
                for answered in _answered_client_calls(updated):  # the step's calls, settled
                    server.stream.append({"type": "tool_result", "agentId": me, **answered})
                approval_responses(server, updated)
                server.start_turn(continuation=True)
            return {"accepted": True, "status": server.session.status, "ownerSessionId": me}
    streaming = server._chat_runner.streaming_message
    if streaming is not None and any(
        p.get("toolCallId") == req.tool_call_id for p in streaming.get("parts") or ()
    ):
        raise RequestError(
            409,
            "RUN_STILL_STREAMING",
            f"tool call {req.tool_call_id!r} belongs to the run still streaming: submit its "
            "result once the run suspends for it",
            toolCallId=req.tool_call_id,
        )
    return None


def _answered_client_calls(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The client (and approval) calls of the message's last step, with their outcomes."""
    parts = list(message.get("parts") or ())
    starts = [i for i, p in enumerate(parts) if p.get("type") == "step-start"]
    out = []
    for part in parts[starts[-1] if starts else 0 :]:
        meta = (part.get("callProviderMetadata") or {}).get("agents") or {}
        if not part.get("toolCallId") or meta.get("opId"):
            continue
        if part.get("state") == "output-available":
            out.append({"toolCallId": part["toolCallId"], "result": part.get("output")})
        elif part.get("state") == "output-error":
            out.append({"toolCallId": part["toolCallId"], "error": part.get("errorText")})
    return out


def _approval_part(part: Mapping[str, Any]) -> bool:
    """A call of a server tool that asked for approval (waiting, or answered already)."""
    approval = part.get("approval")
    return part.get("state") == "approval-requested" or (
        isinstance(approval, Mapping) and isinstance(approval.get("approved"), bool)
    )


def apply_approvals(
    server: AgentServer, decisions: list[ToolResultRequest]
) -> dict[str, Any] | None:
    """Write ``decisions`` (``approved`` set) into the last assistant message — the durable
    write — and return it (None: none of them changed anything: the same decisions again).
    Raises :class:`RequestError`: 400 for an answer that is not an approval, 404 for a call
    the message does not hold, 409 for the opposite of a decision already taken."""
    messages = server.messages
    if not messages or messages[-1].get("role") != "assistant":
        ids = [d.tool_call_id for d in decisions]
        raise RequestError(404, "UNKNOWN_TOOL_CALL", f"no tool call of {ids} waits for an "
                           "approval in this session", toolCallIds=ids)  # fmt: skip
    updated = copy.deepcopy(dict(messages[-1]))
    parts = {str(p.get("toolCallId")): p for p in updated.get("parts") or () if p.get("toolCallId")}
    changed = False
    for decision in decisions:
        call_id = decision.tool_call_id
        part = parts.get(call_id)
        if part is None or not _approval_part(part):
            raise RequestError(404, "UNKNOWN_TOOL_CALL", f"no tool call {call_id!r} waits for "
                               "an approval in this session", toolCallId=call_id)  # fmt: skip
        if decision.approved is None:
            raise RequestError(400, "BAD_REQUEST", f"tool call {call_id!r} waits for an "
                               "approval: answer it with {approved: true|false, reason?}",
                               toolCallId=call_id)  # fmt: skip
        if part.get("state") != "approval-requested":
            taken = part["approval"]["approved"]
            if taken != decision.approved:
                raise RequestError(409, "APPROVAL_CONFLICT", f"tool call {call_id!r} was "
                                   f"{'approved' if taken else 'denied'} already",
                                   toolCallId=call_id)  # fmt: skip
            continue
        approval = {**(part.get("approval") or {}), "id": (part.get("approval") or {}).get(
            "id", call_id), "approved": decision.approved}  # fmt: skip
        if decision.reason:
            approval["reason"] = decision.reason
        part["approval"] = approval
        part["state"] = "approval-responded" if decision.approved else "output-denied"
        changed = True
    if not changed:
        return None
    server.persist_messages([*messages[:-1], updated])
    for decision in decisions:
        server.sessions.record_client_result(decision.tool_call_id,
                                             server.session.session_id or server.name)  # fmt: skip
    return updated


def approval_responses(server: AgentServer, message: Mapping[str, Any]) -> None:
    """The seed's ``tool_approval_response`` chunks for the decisions of the message's last
    step (the stream is open again: the run goes on)."""
    parts = list(message.get("parts") or ())
    starts = [i for i, p in enumerate(parts) if p.get("type") == "step-start"]
    for part in parts[starts[-1] if starts else 0 :]:
        approval = part.get("approval")
        if part.get("state") not in ("approval-responded", "output-denied"):
            continue
        if not isinstance(approval, Mapping) or not isinstance(approval.get("approved"), bool):
            continue
        chunk = {"type": "tool_approval_response", "toolCallId": part["toolCallId"],
                 "decision": "approve" if approval["approved"] else "reject",
                 "agentId": server.session.session_id}  # fmt: skip
        if approval.get("reason"):
            chunk["reason"] = approval["reason"]
        server.stream.append(chunk)


def _apply(part: dict[str, Any], req: ToolResultRequest) -> None:
    if req.error is not None:
        part["state"] = "output-error"
        part["errorText"] = req.error
    else:
        part["state"] = "output-available"
        part["output"] = req.result
