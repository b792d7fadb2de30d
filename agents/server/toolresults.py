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
from typing import TYPE_CHECKING, Any

from .calls import pending_client_calls
from .errors import RequestError
from .requests import ToolResultRequest
from .subagents import call_session

if TYPE_CHECKING:
    from .server import AgentServer

__all__ = ["submit_tool_result"]


async def submit_tool_result(server: AgentServer, req: ToolResultRequest) -> dict[str, Any]:
    """Apply ``req`` here, or forward it to the waiting descendant that owns the call; raises
    :class:`RequestError` (409 for a call of the run still streaming, 404 for a call no one
    here waits for)."""
    answer = _apply_here(server, req)
    if answer is not None:
        return answer
    for child in server.sessions.children():
        if child.status != "suspended":
            continue
        body = {"toolCallId": req.tool_call_id, "result": req.result, "error": req.error}
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


def _apply_here(server: AgentServer, req: ToolResultRequest) -> dict[str, Any] | None:
    """The result applied to this session's own call (None: it has no such call)."""
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
            updated = copy.deepcopy(dict(message))
            for target in updated["parts"]:
                if target.get("toolCallId") == req.tool_call_id:
                    _apply(target, req)
            server.persist_messages([*messages[:index], updated, *messages[index + 1 :]])
            server.sessions.record_client_result(req.tool_call_id, me or server.name)
            if not pending_client_calls(updated) and not server.is_executing:
                server.sessions.update(status="active")
                server.stream.reopen()
                server.stream.append(
                    {
                        "type": "tool_result",
                        "toolCallId": req.tool_call_id,
                        "result": req.result,
                        "error": req.error,
                        "agentId": me,
                    }
                )
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


def _apply(part: dict[str, Any], req: ToolResultRequest) -> None:
    if req.error is not None:
        part["state"] = "output-error"
        part["errorText"] = req.error
    else:
        part["state"] = "output-available"
        part["output"] = req.result
