"""``handle_chat_stream``: the v7 chat routes for the AI SDK's ``useChat`` (the default
``chat_handler``; the seed wires ``handleChatStream`` the same way).

* ``POST /chat`` takes the AI SDK's request — ``{id, messages, trigger, messageId?}`` plus the
  transport's ``body`` (``agentType``) — or the seed's ``{mode, agentType, sessionId, input}``:

  - a new user message (``submit-message``; ``mode`` fresh / continue) starts a run on session
    ``id`` with it, as ``/start`` does;
  - an assistant message whose client tool calls now have outputs (``addToolOutput``) or whose
    approval-gated calls have answers (``addToolApprovalResponse``) submits them, durably and
    once each, as ``submit-tool-result`` does — which continues the run;
  - ``regenerate-message`` answers the last user message again (``retry``); ``mode`` resume
    continues an interrupted run, attach reads the current one.

  The answer is the run's UI-message stream (:mod:`.uistream`) from where that request starts
  it: a continuation starts with ``start`` for the assistant message the client already holds.
* ``GET /chat/{id}/stream`` (the transport's ``reconnectToStream``) re-attaches to the run still
  going on: its assistant message from its first chunk (the AI SDK replaces what it had), then
  live; ``204`` when no run is going on (the client has the messages).
* ``submit-tool-result``, ``interrupt`` and ``abort`` answer JSON, as the session handler does.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from workers import Response

from .chat_routes import chat_action, read_json
from .contexts import ChatContext
from .errors import RequestError
from .requests import ResumeRequest, StartRequest, ToolResultRequest, parse_start
from .runs import resume_run, start_run
from .toolresults import submit_tool_result
from .uistream import UIMessageFormat

if TYPE_CHECKING:
    from .server import AgentServer

__all__ = ["handle_chat_stream"]


def _bad(message: str, **details: Any) -> RequestError:
    return RequestError(400, "BAD_REQUEST", message, **details)


async def _format(server: AgentServer, message_id: str | None = None) -> UIMessageFormat:
    record = server.session
    return UIMessageFormat(record.session_id or server.name, message_id=message_id)


def _going_on(server: AgentServer) -> bool:
    return server.is_executing or server.session.status == "active"


async def _reattach(server: AgentServer, params: Mapping[str, str]) -> Any:
    """The run going on, from its assistant message's first chunk (or ``fromSequence``)."""
    if not _going_on(server):
        return Response(None, status=204)
    record = server.session
    raw = params.get("fromSequence")
    if raw is not None:
        return server.stream.sse(server.stream.check_from_sequence(raw), await _format(server))
    found = server.stream.message_start(record.session_id or server.name, record.run_start_sequence)
    start = found[0] if found is not None else record.run_start_sequence
    return server.stream.sse(start, await _format(server))


def _user_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """The AI SDK's user message, checked: text and file parts only."""
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts:
        raise _bad("the user message needs parts", field="messages")
    for part in parts:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text" and isinstance(part.get("text"), str):
            continue
        if kind == "file" and isinstance(part.get("url"), str):
            continue
        raise _bad(f"a user message part must be text or a file, got {kind!r}", field="messages")
    out: dict[str, Any] = {"role": "user", "parts": list(parts)}
    if isinstance(message.get("id"), str) and message["id"]:
        out["id"] = message["id"]  # the client's id: its copy and the transcript agree
    else:
        out["id"] = f"u_{secrets.token_hex(8)}"
    if isinstance(message.get("metadata"), Mapping):
        out["metadata"] = dict(message["metadata"])
    return out


def _answers(message: Mapping[str, Any]) -> list[ToolResultRequest]:
    """What the client answered in its copy of the assistant message: approvals given and
    client tool outputs added."""
    answers = []
    for part in message.get("parts") or ():
        if not isinstance(part, Mapping) or not part.get("toolCallId"):
            continue
        call_id = str(part["toolCallId"])
        state = part.get("state")
        given = part.get("approval")
        approval: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
        if state == "approval-responded" and isinstance(approval.get("approved"), bool):
            reason = approval.get("reason")
            why = reason if isinstance(reason, str) else None
            answers.append(ToolResultRequest(call_id, None, None, approval["approved"], why))
        elif state == "output-available":
            answers.append(ToolResultRequest(call_id, part.get("output"), None))
        elif state == "output-error":
            answers.append(ToolResultRequest(call_id, None, str(part.get("errorText"))))
    return answers


async def _answer_calls(server: AgentServer, message: Mapping[str, Any]) -> Any:
    """Submit what the client answered; the continuation's stream, from here on."""
    pending = {
        str(p.get("toolCallId"))
        for m in server.messages[-1:]
        for p in m.get("parts") or ()
        if p.get("state") in ("input-available", "approval-requested")
    }
    answers = [a for a in _answers(message) if a.tool_call_id in pending]
    if not answers:
        raise RequestError(409, "NOTHING_TO_ANSWER", "the assistant message answers no call the "
                           "run waits for", status=server.session.status)  # fmt: skip
    start = server.stream.latest_sequence + 1
    for answer in answers:
        await submit_tool_result(server, answer)
    message_id = str(message.get("id") or server.messages[-1].get("id") or "")
    return server.stream.sse(start, await _format(server, message_id or None))


async def _ai_sdk(server: AgentServer, request: Any, body: Mapping[str, Any]) -> Any:
    session_id = body.get("id")
    if not isinstance(session_id, str) or not session_id:
        raise _bad("the chat request needs its id (the session)", field="id")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], Mapping):
        raise _bad("messages must be a non-empty list of UI messages", field="messages")
    record = server.session
    if record.session_id is not None and record.session_id != session_id:
        hosted = record.session_id
        raise RequestError(
            409, "SESSION_MISMATCH", f"this object hosts session {hosted!r}, not {session_id!r}"
        )
    last = messages[-1]
    if body.get("trigger") == "regenerate-message":
        start = server.stream.latest_sequence + 1
        answer = await resume_run(server, ResumeRequest("retry", None, ()), request=request,
                                  body=body)  # fmt: skip
        if not isinstance(answer, dict):
            return answer
        return server.stream.sse(start, await _format(server))
    if last.get("role") == "assistant":
        return await _answer_calls(server, last)
    if last.get("role") != "user":
        raise _bad(f"the last message must be the user's or the assistant's, got "
                   f"{last.get('role')!r}", field="messages")  # fmt: skip
    agent_type = body.get("agentType") or record.agent_type
    if not isinstance(agent_type, str) or not agent_type:
        raise _bad("name the agent: agentType in the request body (the transport's body)",
                   field="agentType")  # fmt: skip
    user_id = body.get("userId") if isinstance(body.get("userId"), str) else None
    start_request = StartRequest(agent_type, (_user_message(last),), session_id, user_id)
    started = await start_run(server, start_request, request, body)
    if not isinstance(started, dict):
        return started
    return server.stream.sse(int(started["startSequence"]), await _format(server))


async def _seed_modes(server: AgentServer, request: Any, body: Mapping[str, Any]) -> Any:
    mode = body.get("mode", "fresh")
    if mode in ("fresh", "continue"):
        started = await start_run(server, parse_start(body), request, body)
        if not isinstance(started, dict):
            return started
        return server.stream.sse(int(started["startSequence"]), await _format(server))
    if mode == "resume":
        start = server.stream.latest_sequence + 1
        resumed = await resume_run(server, ResumeRequest("continue", None, ()), request=request,
                                   body=body)  # fmt: skip
        if not isinstance(resumed, dict):
            return resumed
        message_id = (server.messages[-1:] or [{}])[0].get("id")
        return server.stream.sse(start, await _format(server, message_id))
    if mode == "attach":
        return await _reattach(server, {})
    raise _bad(f"mode must be fresh, continue, resume or attach, got {mode!r}", field="mode")


async def handle_chat_stream(request: Any, ctx: ChatContext) -> Any:
    """The v7 chat routes in the AI SDK's UI-message stream (see the module docstring)."""
    server: AgentServer = ctx.server
    if ctx.session_id is None:
        body = await read_json(request)
        if not isinstance(body, Mapping):
            raise _bad("the /chat body must be a JSON object")
        if "messages" in body:
            return await _ai_sdk(server, request, body)
        return await _seed_modes(server, request, body)
    if ctx.action == "stream":
        if server.session.session_id != ctx.session_id:
            raise RequestError(404, "SESSION_NOT_FOUND", f"no session {ctx.session_id!r} here",
                               sessionId=ctx.session_id)  # fmt: skip
        if request.method != "GET":
            raise RequestError(405, "METHOD_NOT_ALLOWED", "stream takes GET")
        return await _reattach(server, ctx.params)
    return await chat_action(server, request, ctx.session_id, ctx.action, ctx.params)
