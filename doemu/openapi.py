"""The OpenAPI 3.1 document of the admin API (served at ``/__doemu/api/openapi.json``)."""

from __future__ import annotations

from typing import Any

__all__ = ["OPENAPI"]

_ERROR = {
    "description": "Refused; the body says why",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {"error": {"type": "string"}},
                "required": ["error"],
            }
        }
    },
}


def _json(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": schema or {"type": "object"}}},
    }


_OBJECT_PARAMS = [
    {"name": "binding", "in": "path", "required": True, "schema": {"type": "string"}},
    {
        "name": "object",
        "in": "path",
        "required": True,
        "description": "An object name, or a 64-hex id of this namespace",
        "schema": {"type": "string"},
    },
]


def _op(
    summary: str,
    ok: str,
    *,
    params: list[dict[str, Any]] | None = None,
    body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "responses": {"200": _json(ok), "400": _ERROR, "401": _ERROR, "403": _ERROR, "404": _ERROR},
    }
    if params:
        op["parameters"] = params
    if body:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    return op


_OBJ = "/__doemu/api/objects/{binding}/{object}"

OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "doemu admin API",
        "version": "1",
        "description": "Inspect and control a running doemu dev server. Loopback-only unless "
        "the server was started with --admin-token (then send 'Authorization: Bearer <token>').",
    },
    "paths": {
        "/__doemu/api/health": {"get": _op("Liveness and runtime summary", "Health")},
        "/__doemu/api/namespaces": {"get": _op("Durable Object namespaces", "Namespaces")},
        "/__doemu/api/objects": {
            "get": _op(
                "Objects (live and evicted) with name, alarm, sockets, last activity",
                "Objects",
                params=[{"name": "binding", "in": "query", "schema": {"type": "string"}}],
            )
        },
        _OBJ + "/kv": {"get": _op("The object's KV entries", "KV entries", params=_OBJECT_PARAMS)},
        _OBJ + "/sql": {
            "post": _op(
                "Run SQL on the object (read-only unless write is true)",
                "Columns and rows",
                params=_OBJECT_PARAMS,
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
        _OBJ + "/alarm": {"get": _op("The object's pending alarm", "Alarm", params=_OBJECT_PARAMS)},
        _OBJ + "/alarm/run": {
            "post": _op("Deliver the pending alarm now", "Ran", params=_OBJECT_PARAMS)
        },
        _OBJ + "/evict": {
            "post": _op(
                "Evict gracefully (storage kept, sockets hibernate)",
                "Evicted",
                params=_OBJECT_PARAMS,
            )
        },
        _OBJ + "/reset": {
            "post": _op(
                "Reset: abort in-flight work, drop the instance", "Reset", params=_OBJECT_PARAMS
            )
        },
        "/__doemu/api/evict-all": {"post": _op("Evict every live object", "Count")},
        "/__doemu/api/reset-all": {"post": _op("Reset every live object", "Count")},
        "/__doemu/api/clock": {
            "get": _op("Current time", "Clock"),
            "post": _op(
                "Advance the manual clock (409 with the real clock)",
                "Clock",
                body={
                    "type": "object",
                    "properties": {"advance_ms": {"type": "number"}},
                    "required": ["advance_ms"],
                },
            ),
        },
        "/__doemu/api/events": {
            "get": {
                "summary": "Server-sent events: constructed, evicted, reset, alarm.fired, "
                "alarm.retried, alarm.dropped",
                "responses": {
                    "200": {"description": "SSE stream", "content": {"text/event-stream": {}}}
                },
            }
        },
        "/__doemu/api/openapi.json": {"get": _op("This document", "OpenAPI document")},
    },
}
