"""The agent server's HTTP surface: the seed's endpoints, JSON in and out, errors as 4xx.

Routes match the *end* of the path, so the same object answers ``stub.fetch("http://x/start")``
from a Worker and ``/agents/<binding>/<name>/start`` through ``route_agent_request``. Custom
endpoints are matched first. Whatever goes wrong in a request — a malformed body, an unknown
agent type, a conflict with the session's state — is a :class:`~.errors.RequestError` answered
as ``{"error", "code", …}`` with its status; an unexpected exception is a 500 with its type and
message, logged, never a traceback.
"""

from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlparse

from workers import Response

from .chat_routes import chat_action, chat_entry
from .errors import RequestError, StreamRangeError
from .hooks import AbortResult, EndpointContext, call_hook
from .requests import parse_start, query_int
from .rollup import usage_report
from .runs import children_settled, resume_request, start_run
from .views import messages_page, snapshot_of, status_of

if TYPE_CHECKING:
    from .server import AgentServer

__all__ = ["dispatch"]

_log = logging.getLogger("agents.server")
_CHAT = re.compile(
    r"(?:^|/)chat/(?P<id>[^/]+)/(?P<action>stream|submit-tool-result|interrupt|abort)$"
)
_SETTLED = re.compile(r"(?:^|/)children/settled$")
_ROUTE = re.compile(
    r"(?:^|/)(?P<name>start|resume|retry|interrupt|abort|status|sse|history|"
    r"usage|messages|snapshot|chat)$"
)
_METHODS = {
    "start": "POST",
    "resume": "POST",
    "retry": "POST",
    "interrupt": "POST",
    "abort": "POST",
    "chat": "POST",
}


def _json(body: Any, status: int = 200) -> Any:
    return Response(json.dumps(body), status=status, headers={"content-type": "application/json"})


async def _body(request: Any) -> Any:
    text = await request.text()
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise RequestError(400, "BAD_JSON", f"the body is not JSON: {exc}") from None


async def dispatch(server: AgentServer, request: Any) -> Any:
    url = urlparse(str(request.url))
    params = {k: v[-1] for k, v in parse_qs(url.query).items()}
    try:
        for path, handler in server.endpoints.items():
            if url.path.endswith(path):
                context = EndpointContext(server.env, server.execution_state, server)
                return await handler(request, context)
        answer = await _route(server, request, url.path, params)
    except RequestError as exc:
        return _json(exc.body(), exc.status)
    except StreamRangeError as exc:
        return _json(
            {"error": str(exc), "code": "BAD_FROM_SEQUENCE", "latestSequence": exc.latest_sequence},
            exc.status,
        )
    except Exception as exc:
        _log.exception("agent server %s: %s %s failed", server.name, request.method, url.path)
        return _json({"error": f"{type(exc).__name__}: {exc}", "code": "INTERNAL"}, 500)
    if isinstance(answer, AbortResult):
        return answer.response
    if isinstance(answer, dict | list):
        return _json(answer)
    return answer


async def _route(server: AgentServer, request: Any, path: str, params: dict[str, str]) -> Any:
    chat = _CHAT.search(path)
    if chat is not None:
        return await chat_action(server, request, chat["id"], chat["action"], params)
    if _SETTLED.search(path) is not None and request.method == "POST":
        return await children_settled(server)
    match = _ROUTE.search(path)
    if match is None:
        raise RequestError(404, "NOT_FOUND", f"no endpoint {path!r} on the agent server")
    name = match["name"]
    method = _METHODS.get(name, "GET")
    if request.method != method:
        raise RequestError(
            405, "METHOD_NOT_ALLOWED", f"{name} takes {method}, not {request.method}"
        )
    if name == "start":
        raw = await _body(request)
        transform = server.hooks.transform_request
        body = await call_hook(transform, raw, server.env) if transform else raw
        result = await start_run(server, parse_start(body), request)
        if server.hooks.transform_response is not None and isinstance(result, dict):
            context = {"session_id": result["sessionId"], "agent_type": server.session.agent_type}
            return await call_hook(server.hooks.transform_response, result, context)
        return result
    if name in ("resume", "retry"):
        return await resume_request(server, await _body(request), retry=name == "retry")
    if name == "interrupt":
        body = await _body(request) or {}
        reason = (
            str(body.get("reason") or "interrupted") if isinstance(body, dict) else "interrupted"
        )
        if not server.is_executing:
            raise RequestError(409, "NOT_EXECUTING", "no run is executing to interrupt")
        server.request_interrupt(reason)
        return _json({"accepted": True, "reason": reason}, 202)
    if name == "abort":
        body = await _body(request) or {}
        reason = str(body.get("reason") or "aborted") if isinstance(body, dict) else "aborted"
        if not await server.abort_run(reason):
            raise RequestError(409, "NOT_EXECUTING", "no run is executing to abort")
        return {"aborted": True, "reason": reason}
    if name == "chat":
        return await chat_entry(server, request, await _body(request))
    if name == "status":
        return status_of(server)
    if name == "sse":
        start = server.stream.check_from_sequence(params.get("fromSequence", "0"))
        return server.stream.sse(start)
    if name == "history":
        start = server.stream.check_from_sequence(params.get("fromSequence", "0"))
        return server.stream.history(start, query_int(params, "limit", 100, 1, 1000))
    if name == "messages":
        offset = query_int(params, "offset", 0, 0, 10**9)
        return messages_page(server, offset, query_int(params, "limit", 50, 1, 1000))
    if name == "snapshot":
        return await snapshot_of(server)
    mode = params.get("mode", "self")
    if mode not in ("self", "rollup", "entries"):
        raise RequestError(400, "BAD_REQUEST", f"mode must be rollup or entries, got {mode!r}")
    return await usage_report(server, mode)
