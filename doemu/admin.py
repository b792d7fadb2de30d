"""The admin API at ``/__doemu/api``: inspect, evict, reset, run alarms, move the clock.

Loopback-only unless an admin token is configured; then every call needs
``Authorization: Bearer <token>``. Every answer is JSON; every refusal is a 4xx with
``{"error": ...}``. The CLI's ``objects``/``sql``/``alarms``/``evict``/``reset`` commands are thin
wrappers over these routes.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .clock import ManualClock
from .errors import DoemuError, InvalidIdError, SqlError
from .host import ObjectHost
from .inspection import jsonable, read_kv, read_sql
from .openapi import OPENAPI
from .runtime import Namespace, Runtime

__all__ = ["ADMIN_PREFIX", "build_admin_app"]

ADMIN_PREFIX = "/__doemu/api"

Handler = Callable[[Request], Awaitable[Response]]


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def build_admin_app(runtime: Runtime, *, token: str | None = None) -> Starlette:
    """The admin ASGI app (mounted by the server under :data:`ADMIN_PREFIX`)."""

    def guarded(handler: Handler) -> Handler:
        async def wrapper(request: Request) -> Response:
            if token is not None:
                supplied = request.headers.get("authorization", "")
                if not hmac.compare_digest(supplied, f"Bearer {token}"):
                    return error(401, "admin API requires 'Authorization: Bearer <admin token>'")
            elif not _is_loopback(request.client.host if request.client else None):
                return error(403, "admin API is loopback-only; start with --admin-token to share")
            try:
                return await handler(request)
            except (InvalidIdError, SqlError, sqlite3.Error) as exc:
                return error(400, str(exc))
            except DoemuError as exc:
                return error(404 if "unknown" in str(exc) else 400, str(exc))

        return wrapper

    def namespace_of(request: Request) -> Namespace:
        return runtime.namespace(request.path_params["binding"])

    def host_of(request: Request) -> ObjectHost:
        ns = namespace_of(request)
        return ns.host(ns.resolve(request.path_params["object"]))

    def describe(ns: Namespace, hex_id: str) -> dict[str, Any]:
        host = ns.hosts.get(hex_id)
        alarm = runtime.scheduler.get((ns.unique_key, hex_id))
        return {
            "binding": ns.binding,
            "id": hex_id,
            "name": host.id.name if host is not None else None,
            "state": "live" if host is not None and host.live else "evicted",
            "alarm": alarm,
            "sockets": len(host.sockets) if host is not None else 0,
            "last_activity": host.last_activity if host is not None else None,
        }

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
        out = []
        for binding, ns in runtime.bindings.items():
            out.append(
                {
                    "binding": binding,
                    "class_name": ns.class_name,
                    "unique_key": ns.unique_key,
                    "sql": ns.sql_enabled,
                    "live": sum(1 for h in ns.hosts.values() if h.live),
                    "stored": len(ns.stored_ids()),
                }
            )
        return JSONResponse(out)

    async def objects(request: Request) -> Response:
        binding = request.query_params.get("binding")
        spaces = [runtime.namespace(binding)] if binding else list(runtime.namespaces.values())
        out = []
        for ns in spaces:
            ids = set(ns.stored_ids()) | {h for h, host in ns.hosts.items() if host.live}
            names = {row[0]: row[2] for row in await ns.alarm_table.load_all()}
            for hex_id in sorted(ids):
                item = describe(ns, hex_id)
                if item["name"] is None:
                    item["name"] = names.get(hex_id)
                out.append(item)
        return JSONResponse(out)

    async def object_kv(request: Request) -> Response:
        host = host_of(request)
        host.output_gate()
        rows = await read_kv(
            host.namespace.object_path(host.hex_id),
            prefix=request.query_params.get("prefix", ""),
            limit=int(request.query_params.get("limit", "1000")),
        )
        return JSONResponse({"id": host.hex_id, "name": host.id.name, "entries": rows})

    async def object_sql(request: Request) -> Response:
        host = host_of(request)
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return error(400, 'expected a JSON body like {"query": "SELECT 1"}')
        if not isinstance(body, dict) or not isinstance(body.get("query"), str):
            return error(400, 'expected a JSON body like {"query": "SELECT 1"}')
        params = body.get("params") or []
        if not isinstance(params, list):
            return error(400, "'params' must be a list")
        if body.get("write"):

            def run(instance: Any) -> dict[str, Any]:
                storage = host.storage
                assert storage is not None
                cursor = storage.sql.exec(body["query"], *params)
                rows = [list(r) for r in cursor.raw()]
                return {
                    "columns": list(cursor.columnNames),
                    "rows": [[jsonable(v) for v in r] for r in rows],
                    "rowsWritten": cursor.rowsWritten,
                }

            return JSONResponse(await host.call("admin.sql", run))
        host.output_gate()
        path = host.namespace.object_path(host.hex_id)
        if not path.exists():
            return error(404, f"object {host.hex_id} has no storage yet")
        return JSONResponse(await read_sql(path, body["query"], params))

    async def object_alarm(request: Request) -> Response:
        host = host_of(request)
        scheduled = runtime.scheduler.get(host.key)
        if scheduled is None:
            scheduled = host.namespace.alarm_table.get(host.hex_id)
        return JSONResponse({"id": host.hex_id, "scheduled_time": scheduled})

    async def run_alarm(request: Request) -> Response:
        ns = namespace_of(request)
        ran = await runtime.run_alarm_now(ns.binding, request.path_params["object"])
        if not ran:
            return error(404, "object has no pending alarm")
        return JSONResponse({"ran": True})

    async def evict(request: Request) -> Response:
        host = host_of(request)
        was_live = host.live
        await host.evict()
        return JSONResponse({"id": host.hex_id, "evicted": was_live})

    async def reset(request: Request) -> Response:
        host = host_of(request)
        was_live = host.live
        host.reset("Durable Object reset through the doemu admin API.")
        return JSONResponse({"id": host.hex_id, "reset": was_live})

    async def evict_all(request: Request) -> Response:
        return JSONResponse({"evicted": await runtime.evict_all()})

    async def reset_all(request: Request) -> Response:
        return JSONResponse({"reset": runtime.reset_all("Durable Objects reset by doemu admin.")})

    async def clock(request: Request) -> Response:
        if request.method == "POST":
            if not isinstance(runtime.clock, ManualClock):
                return error(409, "the clock is real; start with a manual clock to move time")
            try:
                body = await request.json()
                advance = float(body["advance_ms"])
            except (ValueError, KeyError, TypeError, UnicodeDecodeError):
                return error(400, 'expected a JSON body like {"advance_ms": 1000}')
            if advance < 0:
                return error(400, "advance_ms must be >= 0")
            await runtime.advance(advance)
        return JSONResponse({"now": runtime.clock.now(), "manual": runtime.clock.manual})

    async def events(request: Request) -> Response:
        async def stream() -> AsyncIterator[bytes]:
            yield b": doemu lifecycle events\n\n"
            async for event in runtime.events.subscribe():
                yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
                await asyncio.sleep(0)

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"cache-control": "no-cache"}
        )

    async def openapi(request: Request) -> Response:
        return JSONResponse(OPENAPI)

    obj = "/objects/{binding}/{object}"
    routes = [
        Route("/health", guarded(health)),
        Route("/namespaces", guarded(namespaces)),
        Route("/objects", guarded(objects)),
        Route(obj + "/kv", guarded(object_kv)),
        Route(obj + "/sql", guarded(object_sql), methods=["POST"]),
        Route(obj + "/alarm", guarded(object_alarm)),
        Route(obj + "/alarm/run", guarded(run_alarm), methods=["POST"]),
        Route(obj + "/evict", guarded(evict), methods=["POST"]),
        Route(obj + "/reset", guarded(reset), methods=["POST"]),
        Route("/evict-all", guarded(evict_all), methods=["POST"]),
        Route("/reset-all", guarded(reset_all), methods=["POST"]),
        Route("/clock", guarded(clock), methods=["GET", "POST"]),
        Route("/events", guarded(events)),
        Route("/openapi.json", guarded(openapi)),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        return error(404, f"no admin route {request.method} {request.url.path}")

    async def bad_method(request: Request, exc: Exception) -> Response:
        return error(405, f"method {request.method} not allowed on {request.url.path}")

    return Starlette(routes=routes, exception_handlers={404: not_found, 405: bad_method})
