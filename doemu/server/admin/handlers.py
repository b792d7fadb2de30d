"""What every admin route shares: JSON refusals for any exception, path parameters, JSON bodies.

Kept apart from the route modules (:mod:`.routes` for objects, :mod:`.bindings` for KV, D1, R2
and crons) so each can use them without importing the other.
"""

from __future__ import annotations

import functools
import json
import logging
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote

from starlette.requests import Request
from starlette.responses import Response

from ...errors import DoemuError, HttpError, ObjectResetError, error_text
from .access import error_response

__all__ = ["Handler", "endpoint", "error_for", "int_query", "json_body", "param", "sql_body"]

SQL_BODY = 'expected a JSON body like {"query": "SELECT 1", "params": [], "write": false}'

_log = logging.getLogger("doemu.admin")

Handler = Callable[[Request], Awaitable[Response]]


def error_for(exc: Exception) -> Response:
    """Map an exception raised by a route to its JSON refusal.

    Bad input (ids, SQL, storage misuse) is the client's problem: 4xx with the runtime's own
    message. A reset that raced the request is a conflict the client can retry. Anything else is a
    bug or a failing user constructor: logged with its traceback, answered as a JSON 500.
    """
    if isinstance(exc, HttpError):
        return error_response(exc.status, exc.message)
    if isinstance(exc, ObjectResetError):
        return error_response(409, f"the object was reset while the request ran: {exc.reason}")
    if isinstance(exc, DoemuError | sqlite3.Error):  # bad ids, bad SQL, storage misuse
        return error_response(400, error_text(exc))
    _log.error("admin route failed", exc_info=exc)
    return error_response(500, f"{type(exc).__name__}: {exc}")


def endpoint(handler: Handler) -> Handler:
    """Run ``handler`` so that no exception escapes as a traceback or a plain-text 500."""

    @functools.wraps(handler)
    async def run(request: Request) -> Response:
        try:
            return await handler(request)
        except Exception as exc:
            return error_for(exc)

    return run


def param(request: Request, name: str) -> str:
    """A path parameter, decoded (routing saw it percent-encoded; see the access control)."""
    return unquote(str(request.path_params[name]))


async def json_body(request: Request, usage: str) -> dict[str, Any]:
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        # Also what keeps a page of another site from posting here without a CORS preflight.
        raise HttpError(
            415, f"{usage}, sent with 'content-type: application/json' (got {media_type!r})"
        )
    try:
        body = json.loads(await request.body())
    except (ValueError, UnicodeDecodeError):
        raise HttpError(400, f"{usage}; the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise HttpError(400, f"{usage}; got {type(body).__name__}")
    return body


def int_query(request: Request, name: str, default: int) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise HttpError(400, f"query parameter {name!r} must be an integer >= 0, got {text!r}")
    return value


async def sql_body(request: Request) -> tuple[str, list[Any], bool]:
    """``(query, params, write)`` of a SQL route's JSON body, each checked (an object's SQL, a
    D1 database's)."""
    body = await json_body(request, SQL_BODY)
    query, params, write = body.get("query"), body.get("params", []), body.get("write", False)
    if not isinstance(query, str):
        raise HttpError(400, f"{SQL_BODY}; 'query' must be a string")
    if not isinstance(params, list):
        raise HttpError(400, f"'params' must be a list, got {type(params).__name__}")
    if not isinstance(write, bool):
        raise HttpError(400, f"'write' must be true or false, got {json.dumps(write)}")
    return query, params, write
