"""The OpenAPI 3.1 document of the admin API (served at ``/__doemu/api/openapi.json``).

Written by hand, next to the routes it describes: the test suite checks that its paths and
methods are exactly the routes ``doemu.server.admin`` serves, so the two cannot drift apart.
"""

from __future__ import annotations

from typing import Any

__all__ = ["OPENAPI"]

_ERROR: dict[str, Any] = {
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


_OBJECT: dict[str, Any] = {"type": "object"}
_ARRAY: dict[str, Any] = {"type": "array", "items": {"type": "object"}}


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


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


_KEY_PARAMS = [
    *_OBJECT_PARAMS,
    {"name": "key", "in": "path", "required": True, "schema": {"type": "string"}},
]


def _op(
    summary: str,
    ok: str,
    *,
    schema: dict[str, Any] = _OBJECT,
    params: list[dict[str, Any]] | None = None,
    body: dict[str, Any] | None = None,
    conflict: bool = False,
) -> dict[str, Any]:
    """One operation; every one can be refused (bad input, no token, not loopback, unknown)."""
    responses = {"200": _json(ok, schema)}
    for status in ("400", "401", "403", "404", "500"):
        responses[status] = _ERROR
    if conflict:
        responses["409"] = _ERROR
    op: dict[str, Any] = {"summary": summary, "responses": dict(sorted(responses.items()))}
    if params:
        op["parameters"] = params
    if body:
        op["responses"]["413"] = _ERROR  # body over the admin API's cap
        op["responses"]["415"] = _ERROR  # a JSON body needs content-type: application/json
        op["responses"] = dict(sorted(op["responses"].items()))
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
        "/__doemu/api/namespaces": {
            "get": _op("Durable Object namespaces", "Namespaces", schema=_ARRAY)
        },
        "/__doemu/api/objects": {
            "get": _op(
                "Objects (live and evicted) with name, alarm, sockets, last activity",
                "Objects",
                schema=_ARRAY,
                params=[{"name": "binding", "in": "query", "schema": {"type": "string"}}],
            )
        },
        _OBJ + "/kv": {
            "get": _op(
                "The object's KV entries, read from its file (never wakes it)",
                "KV entries",
                params=[
                    *_OBJECT_PARAMS,
                    {"name": "prefix", "in": "query", "schema": {"type": "string"}},
                    {
                        "name": "limit",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 0, "default": 1000},
                    },
                    {
                        "name": "after",
                        "in": "query",
                        "description": "Only keys after this one (paging)",
                        "schema": {"type": "string"},
                    },
                ],
            )
        },
        _OBJ + "/sql": {
            "post": _op(
                "Run one SQL statement: read-only from the file (at most 1000 rows, never wakes "
                "the object) unless write is true, then inside the object",
                "Columns and rows",
                params=_OBJECT_PARAMS,
                conflict=True,
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
        _OBJ + "/kv/{key}": {
            "put": _op(
                "Put one KV entry, as an event of the object (creates it)",
                "Put",
                params=_KEY_PARAMS,
                body={
                    "type": "object",
                    "properties": {"value": {"description": "Any JSON value"}},
                    "required": ["value"],
                },
                conflict=True,
            ),
            "delete": _op(
                "Delete one KV entry, as an event of the object",
                "Deleted",
                params=_KEY_PARAMS,
                conflict=True,
            ),
        },
        _OBJ + "/alarm": {"get": _op("The object's pending alarm", "Alarm", params=_OBJECT_PARAMS)},
        _OBJ + "/alarm/run": {
            "post": _op(
                "Deliver the pending alarm now", "Ran", params=_OBJECT_PARAMS, conflict=True
            )
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
                "Advance the manual clock, running what falls due (409 with the real clock)",
                "Clock",
                conflict=True,
                body={
                    "type": "object",
                    "properties": {"advance_ms": {"type": "number", "minimum": 0}},
                    "required": ["advance_ms"],
                },
            ),
        },
        "/__doemu/api/events": {
            "get": {
                "summary": "Server-sent events: constructed, evicted, reset, alarm.fired, "
                "alarm.retried, alarm.dropped",
                "responses": {
                    "200": {
                        "description": "SSE stream",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    },
                    "401": _ERROR,
                    "403": _ERROR,
                },
            }
        },
        "/__doemu/api/openapi.json": {"get": _op("This document", "OpenAPI document")},
    },
}
