"""The v7 chat routes: one entry (``POST /chat``) and four per-session actions.

The stateless model of the seed: a run suspends at every human-in-the-loop boundary and the
object may then be evicted; nothing is held open across the wait. ``submit-tool-result`` is a
durable write that also *continues the run itself* — an object has no process between
requests, so nothing else would — and ``/chat/{id}/stream`` only re-attaches to read it.
``interrupt`` writes a durable flag and answers 202 once the running loop has seen it, 504 when
``interrupt_observation_deadline_ms`` passes first.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from workers import Response

from .contexts import ChatContext
from .errors import RequestError
from .outcomes import end_run
from .requests import ResumeRequest, parse_start, parse_tool_result
from .runs import resume_run, start_run
from .toolresults import submit_tool_result

if TYPE_CHECKING:
    from .server import AgentServer

__all__ = ["ChatHandler", "chat_action", "chat_entry", "session_chat_handler"]

#: The seed's ``chatHandler``: ``(request, ChatContext) -> Response`` for the five chat routes.
ChatHandler = Callable[[Any, ChatContext], Awaitable[Any]]


async def session_chat_handler(request: Any, ctx: ChatContext) -> Any:
    """The chat routes answered in the session protocol (the ``/sse`` events): the default
    ``chat_handler``."""
    if ctx.session_id is None:
        return await chat_entry(ctx.server, request, await read_json(request))
    return await chat_action(ctx.server, request, ctx.session_id, ctx.action, ctx.params)


async def read_json(request: Any) -> Any:
    """The request's JSON body (None when empty); a 400 naming the error when it is not JSON."""
    text = await request.text()
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise RequestError(400, "BAD_JSON", f"the body is not JSON: {exc}") from None


async def chat_entry(server: AgentServer, request: Any, body: Any) -> Any:
    """``POST /chat``: ``mode`` fresh (default; a new run), continue (a new run on the same
    session: multi-turn), resume (continue an interrupted run), attach (read the current one);
    the answer is the run's SSE stream from where it starts."""
    if not isinstance(body, Mapping):
        raise RequestError(400, "BAD_REQUEST", "the /chat body must be a JSON object")
    mode = body.get("mode", "fresh")
    if mode in ("fresh", "continue"):
        started = await start_run(server, parse_start(body), request, body)
        if not isinstance(started, dict):
            return started
        return server.stream.sse(int(started["startSequence"]))
    if mode == "resume":
        resumed = await resume_run(server, ResumeRequest("continue", None, ()))
        if not isinstance(resumed, dict):
            return resumed
        return server.stream.sse(server.session.run_start_sequence)
    if mode == "attach":
        return server.stream.sse(server.session.run_start_sequence)
    raise RequestError(
        400, "BAD_REQUEST", f"mode must be fresh, continue, resume or attach, got {mode!r}"
    )


def _check_session(server: AgentServer, session_id: str) -> None:
    if server.session.session_id != session_id:
        raise RequestError(
            404, "SESSION_NOT_FOUND", f"no session {session_id!r} here", sessionId=session_id
        )


async def chat_action(
    server: AgentServer, request: Any, session_id: str, action: str, params: Mapping[str, str]
) -> Any:
    _check_session(server, session_id)
    if action == "stream":
        if request.method != "GET":
            raise RequestError(405, "METHOD_NOT_ALLOWED", "stream takes GET")
        raw = params.get("fromSequence")
        start = (
            server.stream.check_from_sequence(raw)
            if raw is not None
            else server.session.run_start_sequence
        )
        return server.stream.sse(start)
    if request.method != "POST":
        raise RequestError(405, "METHOD_NOT_ALLOWED", f"{action} takes POST")
    body = await read_json(request) or {}
    if action == "submit-tool-result":
        return await submit_tool_result(server, parse_tool_result(body))
    reason = str(body.get("reason") or action) if isinstance(body, Mapping) else action
    if action == "abort":
        if not await server.abort_run(reason):
            if server.session.status.startswith("suspended") or server.session.status in (
                "interrupted",
                "paused",
            ):
                server.stream.reopen()  # it holds the pause: the abort ends the run for good
                server.sessions.update(aborted=True)
                end_run(server, error=f"aborted: {reason}")
                return {"aborted": True, "status": "failed"}
            raise RequestError(409, "NOT_EXECUTING", "no run is executing to abort")
        return {"aborted": True, "reason": reason}
    if not server.is_executing:
        raise RequestError(409, "NOT_EXECUTING", "no run is executing to interrupt")
    observed = server.request_interrupt(reason)
    try:
        await asyncio.wait_for(observed.wait(), server.interrupt_observation_deadline_ms / 1000)
    except TimeoutError:
        raise RequestError(
            504,
            "INTERRUPT_NOT_OBSERVED",
            "the running step did not observe "
            "the interrupt within the deadline; it stays requested",
            deadlineMs=server.interrupt_observation_deadline_ms,
        ) from None
    return Response(
        json.dumps({"accepted": True, "observed": True, "reason": reason}),
        status=202,
        headers={"content-type": "application/json"},
    )
