"""The admin API at ``/__doemu/api``: inspect, evict, reset, run alarms, move the clock.

Loopback-only unless an admin token is configured; then every call needs
``Authorization: Bearer <token>``. Loopback-only also means the ``Host`` header must name a
loopback address (``localhost``, ``127.0.0.0/8``, ``[::1]``, any port), so a web page cannot reach
the API through DNS rebinding. With or without a token, a request carrying an ``Origin`` other than
the server's own is refused (a page of another site may not drive the API from the developer's
browser), POST bodies must be sent as ``application/json`` (which a page cannot send cross-site
without a CORS preflight) and may not exceed :data:`MAX_BODY_BYTES`. Clients that send no
``Origin`` (curl, the CLI) are unaffected. Every answer is JSON; every refusal is a 4xx with
``{"error": ...}`` naming the problem, and an unexpected failure is a JSON 500 (the traceback goes
to the log, never to the client). The CLI's ``objects``/``sql``/``alarms``/``evict``/``reset``
commands are thin wrappers over these routes.

Inspection (``/objects``, ``…/kv``, read-only ``…/sql``, ``…/alarm``) reads files and tables and
never constructs, wakes or writes to an object: looking at a system must not change it. Only the
control routes (write SQL, ``alarm/run``, ``evict``, ``reset``, ``clock``) act on objects.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import ipaddress
import json
import logging
import math
import sqlite3
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

from .errors import DoemuError, ObjectResetError

# Starlette and the modules only the routes use (OpenAPI document, event stream, file
# inspection) are imported when the first admin request arrives (see AdminApp): ``doemu dev``
# builds the admin app before it reports ready, and object traffic never needs them.
if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import BaseRoute
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from .ids import DurableObjectId
    from .runtime import Namespace, Runtime

    Handler = Callable[[Request], Awaitable[Response]]

__all__ = ["ADMIN_PREFIX", "AdminApp", "build_admin_app"]

ADMIN_PREFIX = "/__doemu/api"

#: The largest request body the admin API reads (larger ones are refused with 413).
MAX_BODY_BYTES = 1 << 20

_log = logging.getLogger("doemu.admin")

_SQL_BODY = 'expected a JSON body like {"query": "SELECT 1", "params": [], "write": false}'
_CLOCK_BODY = 'expected a JSON body like {"advance_ms": 1000}'
_TOO_LARGE = f"admin API request bodies are limited to {MAX_BODY_BYTES} bytes"
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


class _Refusal(Exception):
    """A request the admin API turns down: becomes ``{"error": message}`` with ``status``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    from starlette.responses import JSONResponse

    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _error_for(exc: Exception) -> JSONResponse:
    """Map an exception raised by a route to its JSON refusal.

    Bad input (ids, SQL, storage misuse) is the client's problem: 4xx with the runtime's own
    message. A reset that raced the request is a conflict the client can retry. Anything else is a
    bug or a failing user constructor: logged with its traceback, answered as a JSON 500.
    """
    if isinstance(exc, _Refusal):
        return _error(exc.status, exc.message)
    if isinstance(exc, ObjectResetError):
        return _error(409, f"the object was reset while the request ran: {exc.reason}")
    if isinstance(exc, DoemuError | sqlite3.Error):  # bad ids, bad SQL, storage misuse
        return _error(400, str(exc))
    _log.error("admin route failed", exc_info=exc)
    return _error(500, f"{type(exc).__name__}: {exc}")


def _endpoint(handler: Handler) -> Handler:
    """Run ``handler`` so that no exception escapes as a traceback or a plain-text 500."""

    @functools.wraps(handler)
    async def run(request: Request) -> Response:
        try:
            return await handler(request)
        except Exception as exc:
            return _error_for(exc)

    return run


def _is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _split_host(authority: str) -> tuple[str, int | None] | None:
    """``host[:port]`` (``[v6]:port`` for IPv6) as ``(lowercase host, port)``; None if malformed."""
    host, port = authority, ""
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            return None
        host, rest = authority[1:end], authority[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port = rest[1:]
    elif ":" in authority:
        host, _, port = authority.rpartition(":")
        if ":" in host:  # a bare IPv6 address is not a valid Host
            return None
    if port and not port.isdigit():
        return None
    if not host:
        return None
    return host.lower(), int(port) if port else None


def _header(scope: Scope, name: bytes) -> str | None:
    """The last value of header ``name`` (lowercase), decoded as Latin-1, or None."""
    found: bytes | None = None
    for key, value in scope["headers"]:
        if key.lower() == name:
            found = value
    return None if found is None else found.decode("latin-1")


def _same_origin(origin: str, scope: Scope) -> bool:
    """Whether ``origin`` is the origin the request was sent to (its scheme and ``Host``)."""
    host_header = _header(scope, b"host")
    if host_header is None or origin == "null":
        return False
    try:
        parts = urlsplit(origin)
        origin_port = parts.port
    except ValueError:
        return False
    if parts.path or parts.query or parts.fragment or parts.username or parts.password:
        return False
    target = _split_host(host_header)
    scheme = str(scope.get("scheme", "http")).lower()
    if target is None or parts.scheme.lower() != scheme or parts.hostname is None:
        return False
    default = _DEFAULT_PORTS.get(scheme)
    return (parts.hostname.lower(), origin_port or default) == (target[0], target[1] or default)


def _is_loopback_host(host_header: str) -> bool:
    parsed = _split_host(host_header)
    return parsed is not None and _is_loopback(parsed[0])


def _routing_path(scope: Scope) -> str:
    """The request path with each segment still percent-encoded.

    ASGI's ``path`` is decoded, so an object named ``a/b`` (which the CLI sends as ``a%2Fb``)
    would split into two segments and match no route. Routing on the raw path keeps a name one
    segment; handlers decode path parameters themselves (see :func:`_param`).
    """
    path: str = scope["path"]
    raw = scope.get("raw_path")
    root = scope.get("root_path", "")
    if not raw:
        return quote(path, safe="/")
    text: str = raw.decode("latin-1")
    if root and text.startswith(root):
        text = text[len(root) :] or "/"
    # The raw path must be the same path; anything else (a proxy rewrote it) falls back.
    if unquote(text) != path:
        return quote(path, safe="/")
    return text


class _AccessControl:
    """ASGI middleware in front of every admin route, unknown routes included.

    Sitting before the router means a stranger learns nothing, not even which paths exist. It
    also re-encodes the path for routing (see :func:`_routing_path`).
    """

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        # Bytes: compare_digest refuses a non-ASCII str, and a client may send any header bytes.
        self.token = None if token is None else token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app({**scope, "path": _routing_path(scope)}, _capped(receive), send)

    def _refusal(self, scope: Scope) -> Response | None:
        origin = _header(scope, b"origin")
        if origin is not None and not _same_origin(origin, scope):
            return _error(
                403,
                f"admin API refuses cross-origin requests (Origin {origin!r}): a web page of "
                "another site may not call it; send no Origin header (as curl and the CLI do) "
                "or call it from the server's own origin",
            )
        length = _header(scope, b"content-length")
        if length is not None and length.strip().isdigit() and int(length) > MAX_BODY_BYTES:
            return _error(413, _TOO_LARGE)
        if self.token is not None:
            supplied = b""
            for name, value in scope["headers"]:
                if name.lower() == b"authorization":
                    supplied = value
            scheme, _, credentials = supplied.partition(b" ")
            # The scheme is case-insensitive (RFC 9110); the token is compared in constant time.
            valid = hmac.compare_digest(credentials, self.token)
            if scheme.lower() != b"bearer" or not valid:
                return _error(
                    401,
                    "admin API requires 'Authorization: Bearer <admin token>'",
                    headers={"www-authenticate": "Bearer"},
                )
            return None
        client = scope.get("client")
        if not _is_loopback(client[0] if client else None):
            return _error(403, "admin API is loopback-only; start with --admin-token to share")
        host = _header(scope, b"host")
        if host is not None and not _is_loopback_host(host):
            # A browser tricked by DNS rebinding sends the attacker's name as Host.
            return _error(
                403,
                f"admin API is loopback-only and the Host header {host!r} is not a loopback "
                "address; call it as localhost, 127.0.0.1 or [::1], or start with --admin-token",
            )
        return None


def _capped(receive: Receive) -> Receive:
    """``receive``, refusing (413) a body that grows past :data:`MAX_BODY_BYTES`."""
    seen = 0

    async def capped() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > MAX_BODY_BYTES:
                raise _Refusal(413, _TOO_LARGE)
        return message

    return capped


def _param(request: Request, name: str) -> str:
    """A path parameter, decoded (routing saw it percent-encoded; see :func:`_routing_path`)."""
    return unquote(str(request.path_params[name]))


async def _json_body(request: Request, usage: str) -> dict[str, Any]:
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        # Also what keeps a page of another site from posting here without a CORS preflight.
        raise _Refusal(
            415, f"{usage}, sent with 'content-type: application/json' (got {media_type!r})"
        )
    try:
        body = json.loads(await request.body())
    except (ValueError, UnicodeDecodeError):
        raise _Refusal(400, f"{usage}; the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise _Refusal(400, f"{usage}; got {type(body).__name__}")
    return body


def _int_query(request: Request, name: str, default: int) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise _Refusal(400, f"query parameter {name!r} must be an integer >= 0, got {text!r}")
    return value


class AdminApp:
    """The admin ASGI app; the Starlette app behind it is built on the first request.

    The server constructs this before it reports ready, and building it eagerly would import
    Starlette and the route modules (tens of milliseconds, more without cached bytecode) on the
    path from a restart to the first object request, which never touches the admin API. Only the
    first admin request pays for the build; the app and its routes are the same either way.
    """

    __slots__ = ("_app", "_runtime", "_token")

    def __init__(self, runtime: Runtime, token: str | None) -> None:
        self._runtime = runtime
        self._token = token
        self._app: Starlette | None = None

    @property
    def app(self) -> Starlette:
        """The Starlette app, built now if no request has needed it yet."""
        if self._app is None:
            self._app = _build_starlette(self._runtime, self._token)
        return self._app

    @property
    def routes(self) -> list[BaseRoute]:
        """The admin routes (the OpenAPI document is checked against them)."""
        return self.app.routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def build_admin_app(runtime: Runtime, *, token: str | None = None) -> AdminApp:
    """The admin ASGI app (mounted by the server under :data:`ADMIN_PREFIX`)."""
    return AdminApp(runtime, token)


def _build_starlette(runtime: Runtime, token: str | None) -> Starlette:
    """The admin API's routes, access control and JSON error handling as a Starlette app."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.middleware import Middleware
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from .admin_events import EventStream
    from .clock import ManualClock
    from .inspection import jsonable, read_kv, read_names, read_sql
    from .openapi import OPENAPI

    def namespace_of(request: Request) -> Namespace:
        binding = _param(request, "binding")
        ns = runtime.bindings.get(binding)
        if ns is None:
            raise _Refusal(
                404,
                f"unknown Durable Object binding {binding!r}; known: {sorted(runtime.bindings)}",
            )
        return ns

    def address(request: Request) -> tuple[Namespace, DurableObjectId]:
        """The namespace and id a request names, without creating a host for it."""
        ns = namespace_of(request)
        return ns, ns.resolve(_param(request, "object"))

    def pending_alarm(ns: Namespace, hex_id: str) -> float | None:
        # The scheduler has retries and fresh alarms; the table covers a delivery in progress.
        scheduled = runtime.scheduler.get((ns.unique_key, hex_id))
        return scheduled if scheduled is not None else ns.alarm_table.get(hex_id)

    async def name_of(ns: Namespace, object_id: DurableObjectId) -> str | None:
        """The name an object was created from (an id in the URL does not carry it)."""
        host = ns.hosts.get(str(object_id))
        name = object_id.name or (host.id.name if host is not None else None)
        if name is None:
            [name] = await read_names([ns.object_path(str(object_id))])
        return name

    async def health(request: Request) -> Response:
        return JSONResponse(
            {
                "ok": True,
                "worker": runtime.worker_name,
                "persist_dir": str(runtime.persist_dir),
                "live_objects": runtime.eviction.live_count,
                "pending_alarms": len(runtime.scheduler),
                "clock": {"now": runtime.clock.now(), "manual": runtime.clock.manual},
            }
        )

    async def namespaces(request: Request) -> Response:
        return JSONResponse(
            [
                {
                    "binding": binding,
                    "class_name": ns.class_name,
                    "unique_key": ns.unique_key,
                    "sql": ns.sql_enabled,
                    "live": sum(1 for h in ns.hosts.values() if h.live),
                    "stored": len(ns.stored_ids()),
                }
                for binding, ns in runtime.bindings.items()
            ]
        )

    async def objects(request: Request) -> Response:
        binding = request.query_params.get("binding")
        if binding is None:
            spaces = list(runtime.namespaces.values())
        elif binding in runtime.bindings:
            spaces = [runtime.bindings[binding]]
        else:
            raise _Refusal(
                404,
                f"unknown Durable Object binding {binding!r}; known: {sorted(runtime.bindings)}",
            )
        out: list[dict[str, Any]] = []
        for ns in spaces:
            alarms = {row[0]: row for row in await ns.alarm_table.load_all()}
            # Every object with a file, plus live ones and evicted ones still holding sockets.
            kept = {h for h, host in ns.hosts.items() if host.live or len(host.sockets)}
            ids = sorted(set(ns.stored_ids()) | kept)
            names: dict[str, str | None] = {}
            for hex_id in ids:
                host = ns.hosts.get(hex_id)
                row = alarms.get(hex_id)
                names[hex_id] = (host.id.name if host is not None else None) or (
                    row[2] if row is not None else None
                )
            # An evicted object without an alarm keeps its name only in its own file.
            unnamed = [h for h in ids if names[h] is None]
            found = await read_names([ns.object_path(h) for h in unnamed])
            names.update(zip(unnamed, found, strict=True))
            for hex_id in ids:
                host = ns.hosts.get(hex_id)
                scheduled = runtime.scheduler.get((ns.unique_key, hex_id))
                if scheduled is None and hex_id in alarms:
                    scheduled = alarms[hex_id][1]
                out.append(
                    {
                        "binding": ns.binding,
                        "id": hex_id,
                        "name": names[hex_id],
                        "state": "live" if host is not None and host.live else "evicted",
                        "alarm": scheduled,
                        "sockets": len(host.sockets) if host is not None else 0,
                        "last_activity": host.last_activity if host is not None else None,
                    }
                )
        return JSONResponse(out)

    async def object_kv(request: Request) -> Response:
        ns, object_id = address(request)
        rows = await read_kv(
            ns.object_path(str(object_id)),
            prefix=request.query_params.get("prefix", ""),
            limit=_int_query(request, "limit", 1000),
        )
        return JSONResponse(
            {"id": str(object_id), "name": await name_of(ns, object_id), "entries": rows}
        )

    async def object_sql(request: Request) -> Response:
        ns, object_id = address(request)
        body = await _json_body(request, _SQL_BODY)
        query = body.get("query")
        params = body.get("params", [])
        write = body.get("write", False)
        if not isinstance(query, str):
            raise _Refusal(400, f"{_SQL_BODY}; 'query' must be a string")
        if not isinstance(params, list):
            raise _Refusal(400, f"'params' must be a list, got {type(params).__name__}")
        if not isinstance(write, bool):
            raise _Refusal(400, f"'write' must be true or false, got {json.dumps(write)}")
        if write:
            # Writes run as an event of the object, so its authorizer, gates and alarm
            # bookkeeping apply exactly as to the object's own SQL.
            host = ns.host(object_id)

            def run(instance: Any) -> dict[str, Any]:
                storage = host.storage
                assert storage is not None  # the host activated the object for this event
                cursor = storage.sql.exec(query, *params)
                rows = [[jsonable(v) for v in row] for row in cursor.raw()]
                return {
                    "columns": cursor.columnNames,
                    "rows": rows,
                    "rowsWritten": cursor.rowsWritten,
                }

            return JSONResponse(await host.call("admin.sql", run))
        path = ns.object_path(str(object_id))
        if not await asyncio.to_thread(path.exists):
            raise _Refusal(404, f"object {object_id} of {ns.binding} has no storage yet")
        return JSONResponse(await read_sql(path, query, params))

    async def object_alarm(request: Request) -> Response:
        ns, object_id = address(request)
        hex_id = str(object_id)
        return JSONResponse({"id": hex_id, "scheduled_time": pending_alarm(ns, hex_id)})

    async def run_alarm(request: Request) -> Response:
        ns, object_id = address(request)
        hex_id = str(object_id)
        missing = _Refusal(404, f"object {hex_id} of {ns.binding} has no pending alarm")
        if pending_alarm(ns, hex_id) is None:
            raise missing  # checked first: asking about an object without an alarm touches nothing
        if not await runtime.run_alarm_now(ns.binding, hex_id):
            raise missing
        return JSONResponse({"id": hex_id, "ran": True})

    async def evict(request: Request) -> Response:
        ns, object_id = address(request)
        host = ns.hosts.get(str(object_id))
        was_live = host is not None and host.live
        if host is not None:
            await host.evict()
        return JSONResponse({"id": str(object_id), "evicted": was_live})

    async def reset(request: Request) -> Response:
        ns, object_id = address(request)
        host = ns.hosts.get(str(object_id))
        was_live = host is not None and host.live
        if host is not None:
            host.reset("Durable Object reset through the doemu admin API.")
        return JSONResponse({"id": str(object_id), "reset": was_live})

    async def evict_all(request: Request) -> Response:
        return JSONResponse({"evicted": await runtime.evict_all()})

    async def reset_all(request: Request) -> Response:
        return JSONResponse({"reset": runtime.reset_all("Durable Objects reset by doemu admin.")})

    async def clock(request: Request) -> Response:
        if request.method == "POST":
            if not isinstance(runtime.clock, ManualClock):
                raise _Refusal(409, "the clock is real; start with a manual clock to move time")
            advance = (await _json_body(request, _CLOCK_BODY)).get("advance_ms")
            # bool is an int subclass, and json accepts NaN/Infinity: refuse all three.
            if isinstance(advance, bool) or not isinstance(advance, int | float):
                raise _Refusal(400, f"{_CLOCK_BODY}; 'advance_ms' must be a number")
            if not math.isfinite(advance) or advance < 0:
                raise _Refusal(400, f"advance_ms must be a finite number >= 0, got {advance}")
            await runtime.advance(float(advance))
        return JSONResponse({"now": runtime.clock.now(), "manual": runtime.clock.manual})

    async def openapi(request: Request) -> Response:
        return JSONResponse(OPENAPI)

    obj = "/objects/{binding}/{object}"
    routes = [
        Route("/health", _endpoint(health)),
        Route("/namespaces", _endpoint(namespaces)),
        Route("/objects", _endpoint(objects)),
        Route(obj + "/kv", _endpoint(object_kv)),
        Route(obj + "/sql", _endpoint(object_sql), methods=["POST"]),
        Route(obj + "/alarm", _endpoint(object_alarm)),
        Route(obj + "/alarm/run", _endpoint(run_alarm), methods=["POST"]),
        Route(obj + "/evict", _endpoint(evict), methods=["POST"]),
        Route(obj + "/reset", _endpoint(reset), methods=["POST"]),
        Route("/evict-all", _endpoint(evict_all), methods=["POST"]),
        Route("/reset-all", _endpoint(reset_all), methods=["POST"]),
        Route("/clock", _endpoint(clock), methods=["GET", "POST"]),
        Route("/events", EventStream(runtime.events), methods=["GET"]),
        Route("/openapi.json", _endpoint(openapi)),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        """Starlette's own refusals (no route, wrong method) in the API's JSON shape."""
        assert isinstance(exc, HTTPException)  # the only class this handler is registered for
        path = unquote(request.url.path)
        root = request.scope.get("root_path", "")
        if not path.startswith(root):
            path = root + path
        if exc.status_code == 404:
            return _error(404, f"no admin route {request.method} {path}")
        if exc.status_code == 405:
            allowed = ", ".join(sorted((exc.headers or {}).get("Allow", "").split(", ")))
            return _error(
                405,
                f"method {request.method} not allowed on {path}; allowed: {allowed}",
                headers={"allow": allowed},
            )
        return _error(exc.status_code, str(exc.detail))

    return Starlette(
        routes=routes,
        middleware=[Middleware(_AccessControl, token=token)],
        exception_handlers={HTTPException: http_error},
    )
