"""The admin API's routes for the bindings beyond Durable Objects: KV, D1, R2, crons.

Reads go to the binding's own store (a KV listing, one entry, a read-only SQL query on a D1
database, an R2 listing): looking never changes anything. Writes (a KV put or delete, write SQL
on D1, running a cron now) go through the binding exactly as user code's calls do, with the same
limits and error texts, so the admin API cannot put a binding in a state its Worker could not.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...bindings import BindingError, NoScheduledHandler, WorkerBindings
from ...bindings.d1.engine import Query, d1_value
from ...bindings.d1.migrations import apply_migrations, migration_files, migration_state
from ...config.bindings import D1DatabaseBinding
from ...errors import HttpError
from ...inspection.readers import jsonable, read_sql
from ...runtime import Runtime
from .handlers import endpoint, int_query, json_body, param, sql_body
from .openapi import _ARRAY, _op

__all__ = ["BINDING_PATHS", "BindingRoutes"]

_CRON_BODY = 'expected a JSON body like {"cron": "*/5 * * * *", "scheduledTime": 1700000000000}'
_KV_BODY = (
    'expected a JSON body like {"value": "text", "metadata": {...}, "expirationTtl": 3600} '
    '(or "base64": "..." instead of "value" for bytes)'
)


def _jsonable_value(value: bytes) -> Any:
    """Text as is; anything that is not UTF-8 as ``{"$bytes": base64}`` (as the object views)."""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return {"$bytes": base64.b64encode(value).decode("ascii")}


def _r2_json(row: Any) -> dict[str, Any]:
    """An R2 object's metadata as the admin API shows it (``uploaded`` in epoch ms)."""
    return {
        "key": row.key,
        "size": row.size,
        "etag": row.etag,
        "version": row.version,
        "uploaded": row.uploaded,
        "multipart": row.blob_id is None,
        "httpMetadata": json.loads(row.http_metadata),
        "customMetadata": json.loads(row.custom_metadata),
        "checksums": json.loads(row.checksums),
        "storageClass": row.storage_class,
    }


class BindingRoutes:
    """The handlers of the binding routes, over one runtime's :class:`WorkerBindings`."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @property
    def extra(self) -> WorkerBindings:
        return self.runtime.extra

    def _kv(self, request: Request) -> str:
        binding = param(request, "binding")
        if binding not in self.extra.kv:
            known = ", ".join(sorted(self.extra.kv)) or "none"
            raise HttpError(404, f"unknown KV binding {binding!r}; known: {known}")
        return binding

    def _d1(self, request: Request) -> D1DatabaseBinding:
        binding = param(request, "binding")
        for spec in self.extra.resources.d1:
            if spec.binding == binding:
                return spec
        known = ", ".join(sorted(self.extra.d1)) or "none"
        raise HttpError(404, f"unknown D1 binding {binding!r}; known: {known}")

    # -- all bindings ----------------------------------------------------------------------------
    async def bindings(self, request: Request) -> Response:
        return JSONResponse(self.extra.describe())

    # -- KV --------------------------------------------------------------------------------------
    async def kv_keys(self, request: Request) -> Response:
        binding = self._kv(request)
        store = self.extra.kv_store(binding)
        limit = int_query(request, "limit", 1000) or 1000
        prefix = request.query_params.get("prefix", "")
        page = store.list(prefix, min(limit, 1000), request.query_params.get("cursor"))
        keys = [
            {"name": n, "expiration": e, "metadata": None if m is None else json.loads(m)}
            for n, e, m in page.keys
        ]
        return JSONResponse(
            {
                "keys": keys,
                "list_complete": page.cursor is None,
                "cursor": page.cursor,
                "count": store.count(prefix),  # every live key with the prefix, for "N of M"
            }
        )

    async def kv_entry(self, request: Request) -> Response:
        binding = self._kv(request)
        key = param(request, "key")
        if request.method == "GET":
            entry = self.extra.kv_store(binding).get(key)
            if entry is None:
                raise HttpError(404, f"no key {key!r} in KV namespace {binding}")
            return JSONResponse(
                {
                    "key": key,
                    "value": _jsonable_value(entry.value),
                    "metadata": None if entry.metadata is None else json.loads(entry.metadata),
                    "expiration": entry.expiration,
                }
            )
        namespace = self.extra.kv[binding]
        try:
            if request.method == "DELETE":
                await namespace.delete(key)
                return JSONResponse({"key": key, "deleted": True})
            body = await json_body(request, _KV_BODY)
            value: Any = body.get("value")
            if "base64" in body:
                value = base64.b64decode(str(body["base64"]), validate=True)
            if not isinstance(value, str | bytes):
                raise HttpError(400, f"{_KV_BODY}; 'value' must be a string")
            options = {k: body[k] for k in ("metadata", "expirationTtl", "expiration") if k in body}
            await namespace.put(key, value, **options)
        except BindingError as exc:
            raise HttpError(400, exc.message) from None
        except ValueError as exc:
            raise HttpError(400, f"{_KV_BODY}; {exc}") from None
        return JSONResponse({"key": key, "stored": True})

    # -- D1 --------------------------------------------------------------------------------------
    async def d1_sql(self, request: Request) -> Response:
        spec = self._d1(request)
        query, params, write = await sql_body(request)
        engine = self.extra.d1_engine(spec.binding)  # the file exists from here on
        if not write:  # read from the file, beside the engine: never blocks or writes
            return JSONResponse(await read_sql(engine.path, query, params))
        try:
            [result] = engine.run([Query(query, tuple(d1_value(v) for v in params))])
        except BindingError as exc:
            raise HttpError(400, exc.message) from None
        durable = engine.durable([result])
        if durable is not None:
            await durable
        return JSONResponse(
            {
                "columns": result.columns,
                "rows": [[jsonable(v) for v in row] for row in result.rows],
                "meta": result.meta,
            }
        )

    async def d1_migrations(self, request: Request) -> Response:
        spec = self._d1(request)
        engine = self.extra.d1_engine(spec.binding)
        if request.method == "POST":
            try:
                applied = apply_migrations(engine, spec)
            except BindingError as exc:
                raise HttpError(400, exc.message) from None
            durable = engine.file.durable()
            if durable is not None:
                await durable
            return JSONResponse({"applied": applied})
        table = spec.migrations_table
        listed = await read_sql(
            engine.path, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [table]
        )
        if not listed["rows"]:  # looking does not create the table (the inspector looks often)
            return JSONResponse(
                {
                    "folder": str(spec.migrations_dir),
                    "applied": [],
                    "pending": migration_files(spec.migrations_dir),
                }
            )
        state = migration_state(engine, spec)
        return JSONResponse(
            {
                "folder": str(spec.migrations_dir),
                "applied": [{"name": n, "applied_at": at} for n, at in state.applied],
                "pending": state.pending,
            }
        )

    # -- R2 --------------------------------------------------------------------------------------
    def _r2(self, request: Request) -> str:
        binding = param(request, "binding")
        if binding not in self.extra.r2:
            known = ", ".join(sorted(self.extra.r2)) or "none"
            raise HttpError(404, f"unknown R2 binding {binding!r}; known: {known}")
        return binding

    async def r2_objects(self, request: Request) -> Response:
        store = self.extra.r2_store(self._r2(request))
        query = request.query_params
        limit = int_query(request, "limit", 1000) or 1000
        cursor = query.get("cursor")
        try:
            start = base64.b64decode(cursor).decode("utf-8", "replace") if cursor else None
        except ValueError:
            raise HttpError(400, f"cursor {cursor!r} is not a cursor this API gave") from None
        prefix = query.get("prefix", "")
        rows, prefixes, last = store.list(
            prefix, start, min(limit, 1000), query.get("delimiter") or None
        )
        count, size = store.count(prefix)  # under the prefix at any depth, for a summary
        return JSONResponse(
            {
                "objects": [_r2_json(row) for row in rows],
                "delimitedPrefixes": prefixes,
                "truncated": last is not None,
                "cursor": None if last is None else base64.b64encode(last.encode()).decode(),
                "count": count,
                "bytes": size,
            }
        )

    async def r2_object(self, request: Request) -> Response:
        binding = self._r2(request)
        key = param(request, "key")
        store = self.extra.r2_store(binding)
        row = store.head(key)
        if request.method == "DELETE":
            await self.extra.r2[binding].delete(key)
            return JSONResponse({"key": key, "deleted": row is not None})
        if row is None:
            raise HttpError(404, f"no object {key!r} in R2 bucket {binding}")
        if request.query_params.get("body") not in (None, "", "0", "false"):
            chunks = await store.read(row, 0, row.size)
            data = b"".join([chunk async for chunk in chunks])
            media = json.loads(row.http_metadata).get("contentType") or "application/octet-stream"
            return Response(data, media_type=media)
        return JSONResponse(_r2_json(row))

    # -- crons -----------------------------------------------------------------------------------
    async def crons(self, request: Request) -> Response:
        crons = self.extra.crons
        # "now" is the doemu clock's, which "next" is on (a manual clock's, with --clock manual).
        now = {"now": self.runtime.clock.now()}
        if crons is None:
            return JSONResponse({"handler": False, "crons": [], "history": [], **now})
        return JSONResponse({**crons.describe(), **now})

    async def run_cron(self, request: Request) -> Response:
        crons = self.extra.crons
        body = await json_body(request, _CRON_BODY) if await request.body() else {}
        cron = body.get("cron")
        if cron is None:
            cron = crons.crons[0] if crons is not None and crons.crons else ""
        when = body.get("scheduledTime")
        if not isinstance(cron, str):
            raise HttpError(400, f"{_CRON_BODY}; 'cron' must be a string")
        if when is not None and (isinstance(when, bool) or not isinstance(when, int | float)):
            raise HttpError(400, f"{_CRON_BODY}; 'scheduledTime' must be epoch milliseconds")
        if crons is None:
            raise HttpError(404, "this runtime runs no cron triggers")
        try:
            return JSONResponse(await crons.run(cron, when))
        except NoScheduledHandler as exc:
            raise HttpError(404, str(exc)) from None

    def routes(self) -> list[Route]:
        return [
            Route("/bindings", endpoint(self.bindings)),
            Route("/kv/{binding}/keys", endpoint(self.kv_keys)),
            Route(
                "/kv/{binding}/keys/{key}",  # a key with "/" is sent as %2F
                endpoint(self.kv_entry),
                methods=["GET", "PUT", "DELETE"],
            ),
            Route("/r2/{binding}/objects", endpoint(self.r2_objects)),
            Route(
                "/r2/{binding}/objects/{key}",  # a key with "/" is sent as %2F
                endpoint(self.r2_object),
                methods=["GET", "DELETE"],
            ),
            Route("/crons", endpoint(self.crons)),
            Route("/crons/run", endpoint(self.run_cron), methods=["POST"]),
            Route("/d1/{binding}/sql", endpoint(self.d1_sql), methods=["POST"]),
            Route("/d1/{binding}/migrations", endpoint(self.d1_migrations), methods=["GET"]),
            Route("/d1/{binding}/migrations/apply", endpoint(self.d1_migrations), methods=["POST"]),
        ]


_BINDING = {"name": "binding", "in": "path", "required": True, "schema": {"type": "string"}}
_KEY = {"name": "key", "in": "path", "required": True, "schema": {"type": "string"}}
_API = "/__doemu/api"

#: The OpenAPI paths of these routes (merged into the admin API's document).
BINDING_PATHS: dict[str, Any] = {
    _API + "/bindings": {
        "get": _op(
            "KV namespaces, D1 databases, R2 buckets, services, crons, assets",
            "Bindings",
            schema=_ARRAY,
        )
    },
    _API + "/kv/{binding}/keys": {
        "get": _op(
            "A page of a KV namespace's live keys (expiration in seconds, metadata as JSON), and "
            "count: how many live keys have the prefix",
            "Keys",
            params=[
                _BINDING,
                {"name": "prefix", "in": "query", "schema": {"type": "string"}},
                {"name": "limit", "in": "query", "schema": {"type": "integer", "maximum": 1000}},
                {"name": "cursor", "in": "query", "schema": {"type": "string"}},
            ],
        )
    },
    _API + "/kv/{binding}/keys/{key}": {
        "get": _op('One KV entry (bytes as {"$bytes": base64})', "Entry", params=[_BINDING, _KEY]),
        "put": _op(
            "Store a KV entry through the binding (Cloudflare's limits apply)",
            "Stored",
            params=[_BINDING, _KEY],
            body={
                "type": "object",
                "properties": {
                    "value": {"type": "string"},
                    "base64": {"type": "string"},
                    "metadata": {},
                    "expirationTtl": {"type": "integer", "minimum": 60},
                    "expiration": {"type": "integer"},
                },
            },
        ),
        "delete": _op("Delete a KV entry", "Deleted", params=[_BINDING, _KEY]),
    },
    _API + "/r2/{binding}/objects": {
        "get": _op(
            "A page of an R2 bucket's objects (metadata only), and count and bytes: the objects "
            "under the prefix (at any depth) and their total size",
            "Objects",
            params=[
                _BINDING,
                {"name": "prefix", "in": "query", "schema": {"type": "string"}},
                {"name": "delimiter", "in": "query", "schema": {"type": "string"}},
                {"name": "limit", "in": "query", "schema": {"type": "integer", "maximum": 1000}},
                {"name": "cursor", "in": "query", "schema": {"type": "string"}},
            ],
        )
    },
    _API + "/r2/{binding}/objects/{key}": {
        "get": _op(
            "One R2 object's metadata, or with ?body=1 its body (the stored content type)",
            "Object",
            params=[_BINDING, _KEY, {"name": "body", "in": "query", "schema": {"type": "string"}}],
        ),
        "delete": _op("Delete an R2 object", "Deleted", params=[_BINDING, _KEY]),
    },
    _API + "/crons": {
        "get": _op(
            "Cron triggers with their next time and now, both on the doemu clock (epoch ms), "
            "and the last 100 runs",
            "Crons",
        )
    },
    _API + "/crons/run": {
        "post": _op(
            "Run the scheduled() handler now for a cron (default: the first trigger)",
            "Outcome",
            body={
                "type": "object",
                "properties": {"cron": {"type": "string"}, "scheduledTime": {"type": "number"}},
            },
        )
    },
    _API + "/d1/{binding}/sql": {
        "post": _op(
            "Run SQL on a D1 database: read-only from its file (at most 1000 rows) unless write "
            "is true, then through the binding (D1's rules and texts)",
            "Columns and rows",
            params=[_BINDING],
            body={
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "params": {"type": "array"},
                    "write": {"type": "boolean", "default": False},
                },
                "required": ["query"],
            },
        )
    },
    _API + "/d1/{binding}/migrations": {
        "get": _op(
            "Applied and pending migrations of the migrations folder (looking creates no "
            "migrations table)",
            "Migrations",
            params=[_BINDING],
        )
    },
    _API + "/d1/{binding}/migrations/apply": {
        "post": _op("Apply the pending migrations in order", "Applied", params=[_BINDING])
    },
}
