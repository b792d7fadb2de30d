"""The admin API's routes: inspect objects, run alarms now, evict, reset, move the clock.

Inspection (``/objects``, ``…/kv``, read-only ``…/sql``, ``…/alarm``) reads files and tables and
never constructs, wakes or writes to an object: looking at a system must not change it. Only the
control routes (write SQL, ``alarm/run``, ``evict``, ``reset``, ``clock``) act on objects, through
:class:`~doemu.control.RuntimeControl` exactly as the test harness does. Every answer is JSON;
every refusal is an :class:`~doemu.errors.HttpError` turned into a 4xx with ``{"error": ...}``
naming the problem, and an unexpected failure is a JSON 500 (the traceback goes to the log,
never to the client).
"""

from __future__ import annotations

import asyncio
import math
from typing import Any
from urllib.parse import unquote

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...clock import ManualClock
from ...control import RuntimeControl
from ...errors import HttpError
from ...ids import DurableObjectId
from ...inspection.objects import scan_namespace
from ...inspection.readers import jsonable, read_kv, read_names, read_sql
from ...objects import Namespace
from ...persist import object_file
from ...runtime import Runtime
from .access import AccessControl, error_response
from .bindings import BINDING_PATHS, BindingRoutes
from .durable import DURABLE_PATHS, DurableRoutes
from .events import EventStream
from .handlers import endpoint, int_query, json_body, param, sql_body
from .inspector import InspectorGate
from .openapi import OPENAPI

__all__ = ["AdminRoutes", "build_starlette"]

_CLOCK_BODY = 'expected a JSON body like {"advance_ms": 1000}'
_KV_BODY = 'expected a JSON body like {"value": "any JSON value"}'


def _ms(when: float | None) -> int | float | None:
    """An alarm time as Cloudflare's ``getAlarm()`` gives it: whole milliseconds, an integer."""
    return int(when) if when is not None and when == int(when) else when


class AdminRoutes:
    """The handlers of every admin route, over one runtime."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.control = RuntimeControl(runtime)

    # -- addressing --------------------------------------------------------------------------------
    def _namespace(self, binding: str) -> Namespace:
        ns = self.runtime.bindings.get(binding)
        if ns is None:
            raise HttpError(
                404,
                f"unknown Durable Object binding {binding!r}; "
                f"known: {sorted(self.runtime.bindings)}",
            )
        return ns

    def _address(self, request: Request) -> tuple[Namespace, DurableObjectId]:
        """The namespace and id a request names, without creating a host for it."""
        ns = self._namespace(param(request, "binding"))
        return ns, ns.resolve(param(request, "object"))

    async def _existing(self, request: Request) -> tuple[Namespace, DurableObjectId]:
        """:meth:`_address`, refused with 404 if that object never existed (see
        :meth:`_require_existing`)."""
        ns, object_id = self._address(request)
        await self._require_existing(request, ns, object_id)
        return ns, object_id

    async def _require_existing(
        self, request: Request, ns: Namespace, object_id: DurableObjectId
    ) -> None:
        """Refuse with 404 unless the object exists: it has a file (or, without one yet, it is
        live, holds sockets or has an alarm), exactly the objects ``GET /objects`` lists.

        Without this a typo in a name answered 200 with nothing in it (an empty KV,
        ``"evicted": false``), which reads as "the object is empty" rather than "there is no such
        object". Inspection and control never create an object; only write SQL does, because it
        is an event delivered to the object, as a request to it would be.
        """
        hex_id = str(object_id)
        host = ns.hosts.get(hex_id)
        if host is not None and (host.live or len(host.sockets)):
            return
        if self.runtime.alarms.pending((ns.unique_key, hex_id)) is not None:
            return
        if await asyncio.to_thread(object_file(ns.kind.directory, hex_id).exists):
            return
        address = param(request, "object")
        named = hex_id if address.lower() == hex_id else f"{address!r} (id {hex_id})"
        raise HttpError(
            404, f"no object {named} in {ns.binding}: it was never created (no storage, not live)"
        )

    async def _name_of(self, ns: Namespace, object_id: DurableObjectId) -> str | None:
        """The name an object was created from (an id in the URL does not carry it)."""
        host = ns.hosts.get(str(object_id))
        name = object_id.name or (host.id.name if host is not None else None)
        if name is None:
            [name] = await read_names([object_file(ns.kind.directory, str(object_id))])
        return name

    # -- inspection --------------------------------------------------------------------------------
    async def health(self, request: Request) -> Response:
        runtime = self.runtime
        return JSONResponse(
            {
                "ok": True,
                "worker": runtime.worker_name,
                "persist_dir": str(runtime.persist_dir),
                "live_objects": runtime.eviction.live_count,
                "pending_alarms": len(runtime.alarms),
                "clock": {"now": runtime.clock.now(), "manual": runtime.clock.manual},
            }
        )

    async def namespaces(self, request: Request) -> Response:
        return JSONResponse(
            [
                {
                    "binding": binding,
                    "class_name": ns.class_name,
                    "unique_key": ns.unique_key,
                    "sql": ns.kind.spec.sql,
                    "live": sum(1 for h in ns.hosts.values() if h.live),
                    "stored": len(ns.stored_ids()),
                }
                for binding, ns in self.runtime.bindings.items()
            ]
        )

    async def objects(self, request: Request) -> Response:
        binding = request.query_params.get("binding")
        runtime = self.runtime
        spaces = (
            list(runtime.namespaces.values()) if binding is None else [self._namespace(binding)]
        )
        out: list[dict[str, Any]] = []
        for ns in spaces:
            # Every object with a file, plus live ones and evicted ones still holding sockets.
            hosts = {h: host for h, host in ns.hosts.items() if host.live or len(host.sockets)}
            names = {h: host.id.name for h, host in hosts.items()}
            for found in await scan_namespace(ns.kind.directory, also=hosts, names=names):
                host = hosts.get(found.id)
                out.append(
                    {
                        "binding": ns.binding,
                        "id": found.id,
                        "name": found.name,
                        "state": "live" if host is not None and host.live else "evicted",
                        "alarm": _ms(runtime.alarms.pending((ns.unique_key, found.id))),
                        "sockets": len(host.sockets) if host is not None else 0,
                        "last_activity": host.last_activity if host is not None else None,
                    }
                )
        return JSONResponse(out)

    async def object_kv(self, request: Request) -> Response:
        ns, object_id = await self._existing(request)
        rows = await read_kv(
            object_file(ns.kind.directory, str(object_id)),
            prefix=request.query_params.get("prefix", ""),
            limit=int_query(request, "limit", 1000),
            after=request.query_params.get("after"),
        )
        name = await self._name_of(ns, object_id)
        return JSONResponse({"id": str(object_id), "name": name, "entries": rows})

    async def object_kv_write(self, request: Request) -> Response:
        """``PUT …/kv/{key}`` ``{"value": …}`` and ``DELETE …/kv/{key}``: an event of the object
        (it is created, as a request would create it), through its own ``ctx.storage.kv``."""
        ns, object_id = self._address(request)
        key = param(request, "key")
        value: Any = None
        if request.method == "PUT":
            body = await json_body(request, _KV_BODY)
            if "value" not in body:
                raise HttpError(400, f"{_KV_BODY}; 'value' is missing")
            value = body["value"]
        host = ns.host(object_id)

        def run(_instance: Any) -> dict[str, Any]:
            storage = host.storage
            assert storage is not None  # the host activated the object for this event
            if request.method == "PUT":
                storage.kv.put(key, value)
                return {"id": str(object_id), "key": key, "put": True}
            return {"id": str(object_id), "key": key, "deleted": bool(storage.kv.delete(key))}

        result: dict[str, Any] = await host.call("admin.kv", run)
        return JSONResponse(result)

    async def object_sql(self, request: Request) -> Response:
        ns, object_id = self._address(request)
        query, params, write = await sql_body(request)
        if write:  # an event of the object: creates it, as a request to it would
            return JSONResponse(await self._write_sql(ns, object_id, query, params))
        await self._require_existing(request, ns, object_id)
        path = object_file(ns.kind.directory, str(object_id))
        if not await asyncio.to_thread(path.exists):  # live, but nothing written yet
            raise HttpError(404, f"object {object_id} of {ns.binding} has no storage yet")
        return JSONResponse(await read_sql(path, query, params))

    async def _write_sql(
        self, ns: Namespace, object_id: DurableObjectId, query: str, params: list[Any]
    ) -> dict[str, Any]:
        """Writes run as an event of the object, so its authorizer, gates and alarm bookkeeping
        apply exactly as to the object's own SQL."""
        host = ns.host(object_id)

        def run(_instance: Any) -> dict[str, Any]:
            storage = host.storage
            assert storage is not None  # the host activated the object for this event
            cursor = storage.sql.exec(query, *params)
            rows = [[jsonable(v) for v in row] for row in cursor.raw()]
            return {"columns": cursor.columnNames, "rows": rows, "rowsWritten": cursor.rowsWritten}

        result: dict[str, Any] = await host.call("admin.sql", run)
        return result

    async def object_alarm(self, request: Request) -> Response:
        ns, object_id = await self._existing(request)
        hex_id = str(object_id)
        pending = self.runtime.alarms.pending((ns.unique_key, hex_id))
        return JSONResponse({"id": hex_id, "scheduled_time": _ms(pending)})

    # -- control -----------------------------------------------------------------------------------
    async def run_alarm(self, request: Request) -> Response:
        ns, object_id = await self._existing(request)
        hex_id = str(object_id)
        if not await self.control.run_alarm(ns.binding, hex_id):
            raise HttpError(404, f"object {hex_id} of {ns.binding} has no pending alarm")
        return JSONResponse({"id": hex_id, "ran": True})

    async def evict(self, request: Request) -> Response:
        ns, object_id = await self._existing(request)
        host = ns.hosts.get(str(object_id))
        was_live = host is not None and host.live
        await self.control.evict(ns.binding, str(object_id))
        return JSONResponse({"id": str(object_id), "evicted": was_live})

    async def reset(self, request: Request) -> Response:
        ns, object_id = await self._existing(request)
        reason = "Durable Object reset through the doemu admin API."
        was_live = self.control.reset(ns.binding, str(object_id), reason)
        return JSONResponse({"id": str(object_id), "reset": was_live})

    async def evict_all(self, request: Request) -> Response:
        return JSONResponse({"evicted": await self.control.evict_all()})

    async def reset_all(self, request: Request) -> Response:
        reset = self.control.reset_all("Durable Objects reset by doemu admin.")
        return JSONResponse({"reset": reset})

    async def clock(self, request: Request) -> Response:
        runtime = self.runtime
        if request.method == "POST":
            if not isinstance(runtime.clock, ManualClock):
                raise HttpError(409, "the clock is real; start with a manual clock to move time")
            advance = (await json_body(request, _CLOCK_BODY)).get("advance_ms")
            # bool is an int subclass, and json accepts NaN/Infinity: refuse all three.
            if isinstance(advance, bool) or not isinstance(advance, int | float):
                raise HttpError(400, f"{_CLOCK_BODY}; 'advance_ms' must be a number")
            if not math.isfinite(advance) or advance < 0:
                raise HttpError(400, f"advance_ms must be a finite number >= 0, got {advance}")
            await self.control.advance(float(advance))
        return JSONResponse({"now": runtime.clock.now(), "manual": runtime.clock.manual})

    async def openapi(self, request: Request) -> Response:
        paths = {**OPENAPI["paths"], **BINDING_PATHS, **DURABLE_PATHS}
        return JSONResponse({**OPENAPI, "paths": paths})

    def routes(self) -> list[Route]:
        obj = "/objects/{binding}/{object}"
        return [
            Route("/health", endpoint(self.health)),
            Route("/namespaces", endpoint(self.namespaces)),
            Route("/objects", endpoint(self.objects)),
            Route(obj + "/kv", endpoint(self.object_kv)),
            Route(obj + "/kv/{key}", endpoint(self.object_kv_write), methods=["PUT", "DELETE"]),
            Route(obj + "/sql", endpoint(self.object_sql), methods=["POST"]),
            Route(obj + "/alarm", endpoint(self.object_alarm)),
            Route(obj + "/alarm/run", endpoint(self.run_alarm), methods=["POST"]),
            Route(obj + "/evict", endpoint(self.evict), methods=["POST"]),
            Route(obj + "/reset", endpoint(self.reset), methods=["POST"]),
            Route("/evict-all", endpoint(self.evict_all), methods=["POST"]),
            Route("/reset-all", endpoint(self.reset_all), methods=["POST"]),
            Route("/clock", endpoint(self.clock), methods=["GET", "POST"]),
            Route("/events", EventStream(self.runtime.events), methods=["GET"]),
            Route("/openapi.json", endpoint(self.openapi)),
        ]


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no route, wrong method) in the API's JSON shape."""
    assert isinstance(exc, HTTPException)  # the only class this handler is registered for
    path = unquote(request.url.path)
    root = request.scope.get("root_path", "")
    if not path.startswith(root):
        path = root + path
    if exc.status_code == 404:
        return error_response(404, f"no admin route {request.method} {path}")
    if exc.status_code == 405:
        allowed = ", ".join(sorted((exc.headers or {}).get("Allow", "").split(", ")))
        return error_response(
            405,
            f"method {request.method} not allowed on {path}; allowed: {allowed}",
            headers={"allow": allowed},
        )
    return error_response(exc.status_code, str(exc.detail))


def build_starlette(runtime: Runtime, token: str | None) -> Starlette:
    """The admin API's routes, access control and JSON error handling as a Starlette app."""
    return Starlette(
        routes=[
            *AdminRoutes(runtime).routes(),
            *BindingRoutes(runtime).routes(),
            *DurableRoutes(runtime).routes(),
        ],
        # The inspector page first: with a token it is served without one (see .inspector).
        middleware=[
            Middleware(InspectorGate, token=token),
            Middleware(AccessControl, token=token),
        ],
        exception_handlers={HTTPException: _http_error},
    )
