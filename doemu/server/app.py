"""The ASGI app ``doemu dev`` serves: the entry worker, the default router, the WebSocket bridge.

Object traffic goes through a thin ASGI callable rather than a routing framework: one request is
one dict lookup, one ``Request`` built from the scope, one event on the object. The admin API is a
small Starlette app mounted under ``/__doemu/api``.

* With a ``Default(WorkerEntrypoint)`` in the main module, every request goes to its ``fetch``.
* Without one, ``/<BINDING>/<name>/<rest>`` goes to that object's ``fetch`` (the default router).
* A WebSocket upgrade is answered by whatever ``fetch`` returns: a 101 ``Response`` with a
  ``web_socket`` completes the handshake and the server bridges frames; anything else refuses it
  with that response's status and body. A request with ``Upgrade: websocket`` that is not a
  valid handshake (no ``Connection: upgrade``) reaches ``fetch`` as plain HTTP; if ``fetch``
  accepts anyway, the client gets a JSON 426 naming what is missing.

Every failure becomes a JSON ``{"error": ...}`` response with a 4xx/5xx status (a browser gets
the same as an HTML page, see :mod:`.errorpage`); the server keeps serving other requests and
other objects. Every 5xx is also logged with its cause, the user's own frames first, so the
terminal says why a client got a 500.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import unquote

from ..compat import call_relaxed
from ..compat.bodies import read_all
from ..compat.boundary import accept_entry_promise
from ..compat.fetch_api import Headers, Request, Response
from ..compat.readable import ReadableStream
from ..compat.websocket import end_of
from ..errors import (
    DataCloneError,
    HttpError,
    InvalidIdError,
    ObjectResetError,
    WebSocketError,
    error_text,
    not_emulated,
)
from ..jsboundary import JsDict
from ..objects.diagnostics import explain, forgot_await
from ..runtime import Runtime, current_entry
from ..sockets.bridge import WriteBatch, bridge
from ..sockets.protocol import ABORT, SEND_FRAME
from ..tracebacks import user_traceback
from .admin import ADMIN_PREFIX, AdminApp
from .errorpage import error_page, is_loopback, wants_html
from .scheduled import SCHEDULED_PATHS, run_scheduled
from .transfer import RequestBody, read_request_body, send_response

__all__ = ["DEFAULT_MAX_BODY", "DoemuApp", "EntryContext"]

#: Where people look for the inspector: ``/__doemu/`` serves the page (the API's own root serves
#: it too), ``/__doemu`` redirects there.
_INSPECTOR_HOME = "/__doemu/"


async def _redirect(send: Send, location: str) -> None:
    """A bare 307 (the page derives the API's address from its own URL; a ``#token=`` fragment
    survives the redirect in browsers)."""
    await send(
        {
            "type": "http.response.start",
            "status": 307,
            "headers": [(b"location", location.encode()), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})


Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_log = logging.getLogger("doemu.server")

#: Cloudflare's request-body limit on the smallest plan (100 MB).
DEFAULT_MAX_BODY = 100 * 1024 * 1024


class EntryContext:
    """The ``ctx`` a ``WorkerEntrypoint`` receives: ``waitUntil``, ``props`` (empty: nothing
    calls the default entrypoint with props) and pass-through."""

    __slots__ = ("_tasks", "props")

    def __init__(self, tasks: set[asyncio.Task[Any]]) -> None:
        self._tasks = tasks
        self.props: dict[str, Any] = JsDict()

    def __getattr__(self, name: str) -> Any:
        if name == "exports":
            raise not_emulated("ctx", name, "loopback bindings to this Worker's own exports")
        raise AttributeError(f"'ExecutionContext' object has no attribute {name!r}")

    def waitUntil(self, awaitable: Awaitable[Any]) -> None:
        promise = accept_entry_promise(awaitable)
        if promise is None:
            return
        task = asyncio.ensure_future(promise)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def passThroughOnException(self) -> None:
        """There is no origin to pass through to locally; kept for API compatibility."""


def _json_response(
    status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> Response:
    return Response._from_parts(
        status, {"content-type": "application/json", **(headers or {})}, json.dumps(body).encode()
    )


class DoemuApp:
    """The root ASGI application."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        entry: type | None = None,
        admin_token: str | None = None,
        max_body: int = DEFAULT_MAX_BODY,
        hold_alarms: bool = False,
    ) -> None:
        self.runtime = runtime
        #: Let the server report ready before persisted alarms fire (see Runtime.start).
        self.hold_alarms = hold_alarms
        self.entry = entry
        self.max_body = max_body
        self.admin = AdminApp(runtime, token=admin_token)
        self._entry_tasks: set[asyncio.Task[Any]] = set()
        #: Frames the objects sent this loop turn (see doemu.sockets.bridge).
        self._writes = WriteBatch()

    # -- ASGI -----------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            path: str = scope["path"]
            if path == _INSPECTOR_HOME[:-1]:
                await _redirect(send, scope.get("root_path", "") + _INSPECTOR_HOME)
                return
            if path == _INSPECTOR_HOME:  # the page, under the admin API's access rules
                child = dict(scope)
                child["root_path"] = scope.get("root_path", "") + ADMIN_PREFIX
                child["path"] = "/"
                await self.admin(child, receive, send)
                return
            if path in SCHEDULED_PATHS:  # wrangler dev --test-scheduled's route, always on
                await send_response(send, await run_scheduled(self.runtime, scope))
                return
            if path == ADMIN_PREFIX or path.startswith(ADMIN_PREFIX + "/"):
                child = dict(scope)
                child["root_path"] = scope.get("root_path", "") + ADMIN_PREFIX
                child["path"] = path[len(ADMIN_PREFIX) :] or "/"
                await self.admin(child, receive, send)
                return
            await self._http(scope, receive, send)
        elif kind == "websocket":
            await self._websocket(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.runtime.start(hold_alarms=self.hold_alarms)
                except Exception as exc:
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.runtime.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    # -- HTTP -------------------------------------------------------------------------------------
    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        body: RequestBody | None = None
        try:
            body = await read_request_body(scope, receive, self.max_body)
            request = self._request(scope, body.data)
            assets = self.runtime.extra.assets
            if assets is not None and assets.first(request.method, request.url, request._headers):
                response = await assets.respond(request)  # [assets]: before the Worker
            else:
                response = await self._dispatch(scope, request)
            if response._web_socket is not None:
                _discard_server_end(response._web_socket)
                response = _not_upgraded(request._headers)
        except HttpError as exc:
            response = _error_response(scope, exc)
        listen = receive if body is not None and body.complete else None
        try:
            await send_response(send, response, head=scope["method"] == "HEAD", receive=listen)
        except HttpError as exc:
            await send_response(send, _error_response(scope, exc))

    def _request(self, scope: Scope, body: bytes | ReadableStream | None) -> Request:
        # ASGI servers hand over lowercase names that their HTTP parser has validated.
        entries = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in scope["headers"]]
        headers = Headers._trusted(entries)
        host = next((v for n, v in entries if n == "host"), None)
        if host is None:
            server = scope.get("server") or ("127.0.0.1", 8787)
            host = f"{server[0]}:{server[1]}"
        scheme = scope.get("scheme", "http")
        if scheme == "ws":
            scheme = "http"
        elif scheme == "wss":
            scheme = "https"
        raw_path = scope.get("raw_path")
        path = raw_path.decode("latin-1") if raw_path else scope["path"]
        query = scope.get("query_string", b"").decode("latin-1")
        url = f"{scheme}://{host}{path}" + (f"?{query}" if query else "")
        method = scope.get("method", "GET")
        return Request._from_parts(url, method, headers, body)

    async def _dispatch(self, scope: Scope, request: Request) -> Response:
        """Run ``fetch`` (entry worker or routed object); user errors become JSON 500s."""
        try:
            if self.entry is not None:
                ctx = EntryContext(self._entry_tasks)
                instance = self.entry(ctx, self.runtime.env)
                token = current_entry.set(ctx.waitUntil)  # workers.waitUntil in this request
                try:
                    result = await call_relaxed(instance.fetch, request)
                finally:
                    current_entry.reset(token)
            else:
                stub = self._route(scope)
                result = await stub._deliver_fetch(request)  # fresh request: no copy needed
        except HttpError:
            raise
        except ObjectResetError as exc:
            raise HttpError(500, f"Durable Object reset: {exc.reason}") from exc
        except (InvalidIdError, DataCloneError) as exc:
            raise HttpError(400, error_text(exc)) from None
        except Exception as exc:
            raise HttpError(500, f"{type(exc).__name__}: {exc}") from exc  # logged with its cause
        if not isinstance(result, Response):
            message = f"fetch() must return a Response, got {type(result).__name__}"
            if inspect.isawaitable(result):
                message += f" (did you forget `await`? {forgot_await()})"
            raise HttpError(500, message)
        return result

    def _route(self, scope: Scope) -> Any:
        # Split the raw path and decode each segment once: the ASGI "path" is already decoded,
        # so "/B/a%2Fb/x" would otherwise route to object "a" instead of "a/b".
        raw = scope.get("raw_path")
        path = raw.decode("latin-1").split("?", 1)[0] if raw else scope["path"]
        parts = path.split("/", 3)  # "", BINDING, name, rest
        if len(parts) < 3 or not parts[1] or not parts[2]:
            raise HttpError(
                404,
                f"no route for {path!r}: without a Default entry worker, doemu routes "
                f"/<BINDING>/<name>/<path> to an object; bindings: {sorted(self.runtime.bindings)}",
            )
        binding, name = parts[1], unquote(parts[2]) if raw else parts[2]
        ns = self.runtime.bindings.get(binding)
        if ns is None:
            raise HttpError(
                404, f"unknown binding {binding!r}; known: {sorted(self.runtime.bindings)}"
            )
        return self.runtime.stub_namespace(binding).getByName(name)

    # -- WebSocket ------------------------------------------------------------------------------
    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        try:
            request = self._request({**scope, "method": "GET"}, None)
            response = await self._dispatch(scope, request)
        except HttpError as exc:
            response = _error_response(scope, exc)
        socket = response._web_socket
        if socket is None or response.status != 101:
            if response.status == 101 or response.status < 200:
                response = _json_response(
                    500,
                    {
                        "error": "fetch() must return Response(None, status=101, "
                        "web_socket=client) to accept a WebSocket"
                    },
                )
            await _refuse(scope, send, response)
            return
        try:
            client = end_of(socket)
            client.couple()
        except WebSocketError as exc:
            await _refuse(scope, send, _json_response(500, {"error": error_text(exc)}))
            return
        accept: Message = {"type": "websocket.accept"}
        protocol = response._headers.get("sec-websocket-protocol")
        if protocol:
            accept["subprotocol"] = protocol
        await send(accept)
        extensions = scope.get("extensions") or {}
        send_frame = extensions.get(SEND_FRAME)
        await bridge(client, receive, send, self._writes, send_frame, extensions.get(ABORT))


def _error_response(scope: Scope, exc: HttpError) -> Response:
    """The answer to a request that failed with ``exc``: JSON, or an HTML page for a browser.

    A 5xx is logged with its cause (the user's own frames, and doemu's advice for mistakes it
    recognises), so the terminal says what the client was told and why.
    """
    cause = exc.__cause__
    detail = None
    if cause is not None:
        explain(cause)
        detail = user_traceback(cause)
    if exc.status >= 500:
        path = scope.get("path", "")
        method = scope.get("method", "WS" if scope.get("type") == "websocket" else "GET")
        if detail is None:
            _log.error("%s %s answered %d: %s", method, path, exc.status, exc.message)
        else:
            _log.error("%s %s answered %d: %s\n%s", method, path, exc.status, exc.message, detail)
    if scope.get("type") == "http" and wants_html(scope.get("headers", ())):
        shown = detail if is_loopback(scope.get("client")) else None
        return Response._from_parts(
            exc.status,
            {"content-type": "text/html; charset=utf-8"},
            error_page(exc.status, exc.message, shown),
        )
    return _json_response(exc.status, {"error": exc.message})


def _not_upgraded(headers: Headers) -> Response:
    """The answer when ``fetch`` returns a 101 WebSocket response to a request not upgraded.

    uvicorn hands a request to the WebSocket protocol only when it has both ``Upgrade:
    websocket`` and ``Connection: upgrade``, as RFC 6455 (4.2.1) requires of a handshake. One
    with ``Upgrade: websocket`` alone reaches ``fetch`` as plain HTTP, and a worker that checks
    only the Upgrade header (the usual pattern) accepts it: the handshake cannot complete, and
    that is the client's mistake, so it gets the 426 the WebSocket protocol gives a bad
    ``Connection`` header, naming what is missing. (workerd checks only Upgrade and would
    upgrade; every WebSocket client sends both.) A 101 to a request that asked for no WebSocket
    at all is the worker's bug: a 500.
    """
    upgrade = headers.get("upgrade")
    if "websocket" not in _tokens(upgrade):
        return _json_response(
            500, {"error": "fetch() returned a 101 WebSocket response to a plain HTTP request"}
        )
    connection = headers.get("connection")
    if connection is None:
        problem = "no Connection header; a handshake needs 'Connection: upgrade'"
    elif "upgrade" not in _tokens(connection):
        problem = f"the Connection header ({connection!r}) does not include 'upgrade'"
    else:
        problem = f"the Upgrade header must be exactly 'websocket', got {upgrade!r}"
    return _json_response(
        426, {"error": f"WebSocket handshake refused: {problem}"}, {"upgrade": "websocket"}
    )


def _tokens(value: str | None) -> list[str]:
    """The lowercased tokens of a comma-separated header value (none for a missing header)."""
    return [token.strip().lower() for token in value.split(",")] if value else []


def _discard_server_end(client: Any) -> None:
    """Forget the server end of a pair whose client end will never reach the network."""
    try:
        peer = end_of(client).peer
    except WebSocketError:
        return
    if peer is not None:
        peer.discard()


async def _refuse(scope: Scope, send: Send, response: Response) -> None:
    """Refuse a WebSocket handshake with ``response``'s status and body where ASGI allows."""
    if "websocket.http.response" in scope.get("extensions", {}):
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response._headers.items()]
        await send(
            {"type": "websocket.http.response.start", "status": response.status, "headers": headers}
        )
        body = await read_all(response._body)
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": 1008})
