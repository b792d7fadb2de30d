"""The entry Worker's half of ``McpAgent``: streamable HTTP at a path, one object per session.

``McpAgent.serve("/mcp", binding="MCP_OBJECT")`` (Cloudflare's ``McpAgent.serve``) answers a
handler whose ``fetch(request, env, ctx)`` a ``WorkerEntrypoint`` delegates to;
:func:`route_mcp_request` is the same as a function that answers ``None`` off its path, so a
Worker can try it before its own routes (as ``route_agent_request``).

Here, before any object is woken, the request is checked as Cloudflare's handler checks it,
with its status codes and texts: ``Accept`` must name ``application/json`` and
``text/event-stream`` (406), the body must be JSON (415, 413, and ``-32700``), an
``initialize`` must come alone and without a session id (``-32600``), every other request
needs ``Mcp-Session-Id`` (400) and a supported ``MCP-Protocol-Version`` when it names one (400).
An ``initialize`` gets a new session id (64 hex digits from ``secrets``); every request goes to
the object ``streamable-http:<id>``, which answers ``404`` for a session it does not know.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from workers import Request, Response

from ..core.portable import from_js
from ..lifecycle import PROPS_HEADER, encode_props, header_pairs
from ..mcp.jsonrpc import (
    INVALID_REQUEST,
    SERVER_ERROR,
    SESSION_NOT_FOUND,
    JsonRpcError,
    error_message,
    is_request,
    parse_messages,
)
from ..mcp.server import SUPPORTED_PROTOCOL_VERSIONS

__all__ = [
    "MAX_MESSAGE_BYTES",
    "SESSION_HEADER",
    "SESSION_PREFIX",
    "McpHandler",
    "json_response",
    "route_mcp_request",
    "session_not_found",
]

_log = logging.getLogger("agents.mcp")

#: The transport's session header.
SESSION_HEADER = "mcp-session-id"
#: The object name of a session is this prefix and its id (Cloudflare's naming).
SESSION_PREFIX = "streamable-http:"


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Any:
    return Response(
        json.dumps(body),
        status=status,
        headers=[("content-type", "application/json"), *(headers or {}).items()],
    )


def session_not_found() -> Any:
    return json_response(error_message(None, SESSION_NOT_FOUND, "Session not found"), 404)


#: Cloudflare's limit on one POST body.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
#: A session id a client may send back: visible ASCII (the spec's rule), bounded.
_SESSION_ID = re.compile(r"^[\x21-\x7e]{1,256}$")


def _refuse(status: int, message: str, code: int = SERVER_ERROR) -> Any:
    return json_response(error_message(None, code, message), status)


def _namespace(env: Any, binding: str) -> Any:
    try:
        value = env[binding] if isinstance(env, Mapping) else getattr(env, binding, None)
    except Exception:
        value = None
    return value if callable(getattr(value, "idFromName", None)) else None


def _unsupported_version(request: Any) -> Any | None:
    version = request.headers.get("mcp-protocol-version")
    if version is None or version in SUPPORTED_PROTOCOL_VERSIONS:
        return None
    return _refuse(
        400,
        f"Bad Request: Unsupported protocol version: {version} "
        f"(supported versions: {', '.join(SUPPORTED_PROTOCOL_VERSIONS)})",
    )


async def route_mcp_request(
    request: Any,
    env: Any,
    *,
    path: str = "/mcp",
    binding: str = "MCP_OBJECT",
    props: Any = None,
) -> Any | None:
    """Serve MCP's streamable HTTP at ``path`` from the ``McpAgent`` bound as ``binding``;
    ``None`` for a request to another path. ``props`` reach the session's ``self.props``."""
    if urlsplit(str(request.url)).path.rstrip("/") != path.rstrip("/"):
        return None
    namespace = _namespace(env, binding)
    if namespace is None:
        _log.error(
            "Could not find McpAgent binding for %s. Did you update your wrangler configuration?",
            binding,
        )
        return _refuse(
            500,
            f"Could not find McpAgent binding for {binding}. Did you update "
            "your wrangler configuration?",
        )
    method = str(request.method).upper()
    accept = str(request.headers.get("accept") or "")
    session_id = request.headers.get(SESSION_HEADER)
    body: str | None = None
    if method == "POST":
        if "application/json" not in accept or "text/event-stream" not in accept:
            return _refuse(
                406,
                "Not Acceptable: Client must accept both application/json and text/event-stream",
            )
        if "application/json" not in str(request.headers.get("content-type") or ""):
            return _refuse(415, "Unsupported Media Type: Content-Type must be application/json")
        body = await request.text()
        if len(body.encode("utf-8")) > MAX_MESSAGE_BYTES:
            return _refuse(
                413, f"Request body too large. Maximum size is {MAX_MESSAGE_BYTES} bytes"
            )
        try:
            messages, _ = parse_messages(body)
        except JsonRpcError as exc:
            return json_response(exc.to_message(None), 400)
        initialize = any(m.get("method") == "initialize" and is_request(m) for m in messages)
        if initialize and session_id:
            return _refuse(
                400,
                "Invalid Request: Initialization requests must not include a sessionId",
                INVALID_REQUEST,
            )
        if initialize and len(messages) > 1:
            return _refuse(
                400, "Invalid Request: Only one initialization request is allowed", INVALID_REQUEST
            )
        if not initialize:
            unsupported = _unsupported_version(request)
            if unsupported is not None:
                return unsupported
        if initialize:
            session_id = secrets.token_hex(32)
    elif method in ("GET", "DELETE"):
        if method == "GET" and "text/event-stream" not in accept:
            return _refuse(406, "Not Acceptable: Client must accept text/event-stream")
        unsupported = _unsupported_version(request)
        if unsupported is not None:
            return unsupported
    else:
        return json_response(
            error_message(None, SERVER_ERROR, "Method not allowed."),
            405,
            {"allow": "GET, POST, DELETE"},
        )
    if not session_id:
        return _refuse(400, "Bad Request: Mcp-Session-Id header is required")
    if not _SESSION_ID.match(session_id):
        return session_not_found()  # never a name this server gave out
    if method == "GET":  # no server-to-client stream: the spec's answer is 405
        return json_response(
            error_message(None, SERVER_ERROR, "Method not allowed."), 405, {"allow": "POST, DELETE"}
        )
    extra = {SESSION_HEADER: session_id}
    if props is not None:
        extra[PROPS_HEADER] = encode_props(props)
    forwarded = Request(
        str(request.url),
        method=method,
        headers=header_pairs(request.headers, extra, drop=("content-length",)),
        body=body,
    )
    stub = namespace.get(namespace.idFromName(SESSION_PREFIX + session_id))
    return await stub.fetch(forwarded)


class McpHandler:
    """What :meth:`McpAgent.serve` answers: ``await handler.fetch(request, env, ctx)``; the
    props are ``ctx.props`` (what an OAuth provider put there), if any; a request off the
    path answers Cloudflare's ``404`` ``Not found``."""

    def __init__(self, path: str, binding: str) -> None:
        self.path = path
        self.binding = binding

    async def fetch(self, request: Any, env: Any, ctx: Any = None) -> Any:
        # An entry Worker's ``ctx.props`` is ``{}`` when nothing set it: no props, then (an
        # empty object must not overwrite what the session was started with).
        props = from_js(getattr(ctx, "props", None)) if ctx is not None else None
        answer = await route_mcp_request(
            request, env, path=self.path, binding=self.binding, props=props or None
        )
        if answer is None:
            return _refuse(404, "Not found")
        return answer
