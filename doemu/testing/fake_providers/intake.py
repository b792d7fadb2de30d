"""A request's way in: counted, authenticated, parsed and checked as each provider does it.

Every request is counted before anything can refuse it, so a test can see a client that sends
the wrong key as surely as one that succeeds. The refusals are the providers' own: OpenAI wants
``Authorization: Bearer <key>``, Anthropic ``x-api-key`` (or, as its recent SDKs send it,
``Authorization: Bearer <key>``) and an ``anthropic-version`` header;
a body that is not a JSON object, lacks a required field, does not fit the official SDK's
request type or breaks a rule across its messages (:mod:`.request_rules`) is a 400 with the real
body shape and the real API's words.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .errors import anthropic_error, openai_error
from .request_rules import check_request
from .script import Api, Reply
from .state import Ledger, Record

__all__ = [
    "anthropic_intake",
    "begin",
    "lower_headers",
    "new_id",
    "openai_authorized",
    "openai_intake",
]


def new_id(prefix: str) -> str:
    """A fresh provider-shaped id: ``resp_…``, ``msg_…``, ``call_…``, ``chatcmpl-…``."""
    return f"{prefix}{secrets.token_hex(12)}"


def lower_headers(request: Request) -> dict[str, str]:
    """The request's headers, names lower-cased (a repeated header keeps its last value)."""
    return {name.lower(): value for name, value in request.headers.items()}


def begin(
    ledger: Ledger, record: Record, input_tokens: int, error: Callable[[int, str], Response]
) -> Reply | Response:
    """A new generation takes the next reply: billed its input and recorded, or (a scripted
    ``fail``) recorded as failed, billed nothing, and answered with ``error``."""
    reply = ledger.next_reply()
    if reply.fail is not None:
        ledger.refuse(record)
        refusal = error(*reply.fail)
        if reply.retry_after is not None:
            refusal.headers["retry-after"] = f"{reply.retry_after:g}"
        return refusal
    ledger.start(record, input_tokens)
    return reply


async def _json_object(request: Request) -> dict[str, Any] | None:
    try:
        body = json.loads(await request.body())
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def openai_authorized(request: Request, ledger: Ledger) -> Response | None:
    """``None`` when the bearer key is right, else OpenAI's 401."""
    header = request.headers.get("authorization", "")
    if not header:
        return openai_error(
            401,
            "You didn't provide an API key. You need to provide your API key in an "
            "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
        )
    if header != f"Bearer {ledger.api_key}":
        given = header.removeprefix("Bearer ")
        return openai_error(401, f"Incorrect API key provided: {given[:3]}***{given[-4:]}.")
    return None


async def openai_intake(
    request: Request, ledger: Ledger, api: Api, route: str, required: tuple[str, ...]
) -> dict[str, Any] | Response:
    """Count, authenticate and parse an OpenAI request: its JSON body, or the error to answer."""
    ledger.count(route)
    refused = openai_authorized(request, ledger)
    if refused is not None:
        return refused
    body = await _json_object(request)
    if body is None:
        return openai_error(
            400,
            "We could not parse the JSON body of your request. (HINT: This likely means you "
            "aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, "
            "but what was sent was not valid JSON.)",
        )
    ledger.received(api, body)
    for name in required:
        if body.get(name) is None:
            return openai_error(400, f"Missing required parameter: '{name}'.", param=name)
    refusal = check_request(api, body)
    if refusal is not None:
        return openai_error(400, refusal.message, param=refusal.param, code=refusal.code)
    return body


async def anthropic_intake(request: Request, ledger: Ledger) -> dict[str, Any] | Response:
    """Count, authenticate and parse an Anthropic Messages request."""
    ledger.count("messages")
    # The key as ``x-api-key``, or as a bearer token: recent SDKs send ``Authorization: Bearer``.
    keys = {request.headers.get("x-api-key"), request.headers.get("authorization")}
    if not keys & {ledger.api_key, f"Bearer {ledger.api_key}"}:
        return anthropic_error(401, "invalid x-api-key")
    if not request.headers.get("anthropic-version"):
        return anthropic_error(400, "anthropic-version: header is required")
    body = await _json_object(request)
    if body is None:
        return anthropic_error(400, "There was an error parsing the body of your request")
    ledger.received("messages", body)
    for name in ("model", "messages", "max_tokens"):
        if body.get(name) is None:
            return anthropic_error(400, f"{name}: Field required")
    refusal = check_request("messages", body)
    if refusal is not None:
        return anthropic_error(400, refusal.message)
    return body
