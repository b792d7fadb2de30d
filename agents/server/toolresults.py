"""A client tool's result: applied durably, once, by the session that owns the call.

``submit-tool-result`` writes the result into the assistant message (the durable write) and,
when it was the last call the run waited for, *continues the run itself* — an object has no
process between requests, so nothing else would. A result for a call already answered changes
nothing (``accepted: false``). A call this session does not own may be waiting in one of the
sub-agents its run is suspended on (``clientToolCallOwnership`` in ``/snapshot``): the result is
forwarded to that child's object, which forwards it on to a grandchild the same way.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..providers.tools import run_tool
from .calls import pending_client_calls
from .errors import RequestError
from .requests import ToolResultRequest
from .servedtools import approved_tool
from .subagents import call_session

if TYPE_CHECKING:
    from .server import AgentServer

__all__ = ["submit_tool_result"]


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
    """The result applied to this session's own call (None: it has no such call). An
    approval's answer runs the approved tool first, through the ledger (a repeat after a crash
    replays its stored result)."""
    me = server.session.session_id
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
                    "ownerSessionId": me,
                }
            settled = await _settle(server, part, req)
            messages = server.messages  # re-read: the tool ran meanwhile
            if index >= len(messages) or messages[index].get("id") != message.get("id"):
                raise RequestError(409, "TRANSCRIPT_CHANGED", "the run's transcript changed "
                                   "while the call was settled: send it again")  # fmt: skip
            message = messages[index]
            updated = copy.deepcopy(dict(message))
            for target in updated["parts"]:
                if target.get("toolCallId") == req.tool_call_id:
                    _apply(target, settled)
            server.persist_messages([*messages[:index], updated, *messages[index + 1 :]])
            server.sessions.record_client_result(req.tool_call_id, me or server.name)
            if not pending_client_calls(updated) and not server.is_executing:
                server.sessions.update(status="active")
                server.stream.reopen()
                for answered in _answered_client_calls(updated):  # the step's calls, settled
                    server.stream.append({"type": "tool_result", "agentId": me, **answered})
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


async def _settle(
    server: AgentServer, part: Mapping[str, Any], req: ToolResultRequest
) -> ToolResultRequest:
    """What the call's part becomes: the client's result, or — for an approval-gated tool —
    the tool's own outcome (approved) or the denial."""
    name = str(part.get("type", ""))[5:]
    definition = await server.definition()
    tool = approved_tool(server, definition, name)
    if (tool is None) != (req.approved is None):
        expected = "{approved: true|false, reason?}" if tool else "{result} or {error}"
        raise RequestError(400, "BAD_REQUEST", f"tool {name!r} is answered with {expected}",
                           toolCallId=req.tool_call_id)  # fmt: skip
    if tool is None:
        return req
    if not req.approved:
        denial = f"the user denied this call{': ' + req.reason if req.reason else ''}"
        return ToolResultRequest(req.tool_call_id, None, denial)
    meta = (part.get("callProviderMetadata") or {}).get("agents") or {}
    position = str(meta.get("position") or f"approval/{req.tool_call_id}")
    given = part.get("input")
    args: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    outcome = await run_tool(server, tool, req.tool_call_id, args, position)
    if outcome.ok:
        return ToolResultRequest(req.tool_call_id, outcome.value, None)
    return ToolResultRequest(req.tool_call_id, None, str(outcome.value))


def _apply(part: dict[str, Any], req: ToolResultRequest) -> None:
    if req.error is not None:
        part["state"] = "output-error"
        part["errorText"] = req.error
    else:
        part["state"] = "output-available"
        part["output"] = req.result
