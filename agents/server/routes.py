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
import re
import traceback
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlparse

from workers import Response

from .chat_routes import read_json
from .chat_ui import handle_chat_stream
from .contexts import ChatContext, EndpointContext, TransformResponseContext
from .errors import RequestError, StreamRangeError
from .hooks import AbortResult, call_hook
from .requests import parse_start, query_int
from .rollup import usage_report
from .runs import children_settled, resume_request, start_run
from .views import messages_page, snapshot_of, status_of
from .workspace import workspace_report

if TYPE_CHECKING:
    from .server import AgentServer

__all__ = ["dispatch"]

_CHAT = re.compile(
    r"(?:^|/)chat/(?P<id>[^/]+)/(?P<action>stream|submit-tool-result|interrupt|abort)$"
)
_ENTRY = re.compile(r"(?:^|/)chat$")
_SETTLED = re.compile(r"(?:^|/)children/settled$")
_ROUTE = re.compile(
    r"(?:^|/)(?P<name>start|resume|retry|interrupt|abort|status|sse|history|"
    r"usage|messages|snapshot|workspace)$"
)
_METHODS = {
    "start": "POST",
    "resume": "POST",
    "retry": "POST",
    "interrupt": "POST",
    "abort": "POST",
}


def _json(body: Any, status: int = 200) -> Any:
    return Response(json.dumps(body), status=status, headers={"content-type": "application/json"})


_body = read_json


async def dispatch(server: AgentServer, request: Any) -> Any:
    url = urlparse(str(request.url))
    params = {k: v[-1] for k, v in parse_qs(url.query).items()}
    try:
        for path, handler in server.endpoints.items():
            if url.path.endswith(path):
                context = EndpointContext(server.env, server.execution_state, server.log, server)
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
        server.log.error(
            f"agent server {server.name}: {request.method} {url.path} failed",
            {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()},
        )
        return _json({"error": f"{type(exc).__name__}: {exc}", "code": "INTERNAL"}, 500)
    if isinstance(answer, AbortResult):
        return answer.response
    if isinstance(answer, dict | list):
        return _json(answer)
    return answer


async def _route(server: AgentServer, request: Any, path: str, params: dict[str, str]) -> Any:
    chat = _CHAT.search(path)
    if chat is not None or _ENTRY.search(path) is not None:
        if chat is None and request.method != "POST":
            raise RequestError(405, "METHOD_NOT_ALLOWED", f"chat takes POST, not {request.method}")
        context = ChatContext(
            server.env,
            server.execution_state,
            server.log,
            server,
            chat["id"] if chat else None,
            chat["action"] if chat else "chat",
            params,
        )
        handler: Any = getattr(type(server), "chat_handler", None) or handle_chat_stream
        return await handler(request, context)
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
        result = await start_run(server, parse_start(body), request, body)
        if server.hooks.transform_response is not None and isinstance(result, dict):
            shaping = TransformResponseContext(result["sessionId"], server.session.agent_type or "")
            return await call_hook(server.hooks.transform_response, result, shaping)
        return result
    if name in ("resume", "retry"):
        body = await _body(request)
        return await resume_request(server, body, retry=name == "retry", request=request)
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
    if name == "workspace":
        return await workspace_report(server)
    mode = params.get("mode", "self")
    if mode not in ("self", "rollup", "entries"):
        raise RequestError(400, "BAD_REQUEST", f"mode must be rollup or entries, got {mode!r}")
    return await usage_report(server, mode)
