"""JSON-RPC 2.0 as MCP uses it: the error codes, the message shapes, the answers.

The server side (:mod:`agents.mcp.server`, :mod:`agents.mcp_agent`) reads every body through
:func:`parse_messages`, so a body that is not JSON, or JSON that is not a JSON-RPC message, is
refused with the code the spec names before any handler sees it. The texts of the transport-level
errors are Cloudflare's ``McpAgent`` texts, word for word, so clients see the same messages.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import McpError

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "RESOURCE_NOT_FOUND",
    "SERVER_ERROR",
    "SESSION_NOT_FOUND",
    "JsonRpcError",
    "error_message",
    "is_notification",
    "is_request",
    "parse_messages",
    "result_message",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
#: The transport's own refusals (bad headers, a missing session id): JSON-RPC's server range.
SERVER_ERROR = -32000
#: Cloudflare's code for an unknown ``Mcp-Session-Id``.
SESSION_NOT_FOUND = -32001
#: MCP's code for ``resources/read`` of a URI the server does not have.
RESOURCE_NOT_FOUND = -32002

Message = dict[str, Any]


class JsonRpcError(McpError):
    """A request the server refuses with a JSON-RPC ``error`` (``code``, ``message``, ``data``)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_message(self, request_id: Any) -> Message:
        return error_message(request_id, self.code, self.message, self.data)


def error_message(request_id: Any, code: int, message: str, data: Any = None) -> Message:
    """A JSON-RPC error response (``id`` is ``None`` when the request's id is unknown)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def result_message(request_id: Any, result: Any) -> Message:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _is_message(value: Any) -> bool:
    """A request, a notification or a response, by JSON-RPC 2.0's shape rules."""
    if not isinstance(value, dict) or value.get("jsonrpc") != "2.0":
        return False
    if "method" in value:
        if not isinstance(value["method"], str):
            return False
        if "params" in value and not isinstance(value["params"], dict | list):
            return False
        return "id" not in value or _valid_id(value["id"])
    if "result" in value or "error" in value:  # a response to a request the server sent
        return "id" in value
    return False


def is_request(message: Message) -> bool:
    return "method" in message and "id" in message


def is_notification(message: Message) -> bool:
    return "method" in message and "id" not in message


def parse_messages(body: str | bytes) -> tuple[list[Message], bool]:
    """``(messages, batched)`` of a POST body: one message, or a JSON array of them (the
    2025-03-26 revision's batches). Raises :class:`JsonRpcError` ``-32700`` for a body that is
    not JSON or not JSON-RPC (Cloudflare's texts)."""
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise JsonRpcError(PARSE_ERROR, "Parse error: Invalid JSON") from None
    batched = isinstance(value, list)
    messages = value if batched else [value]
    if not messages or not all(_is_message(m) for m in messages):
        raise JsonRpcError(PARSE_ERROR, "Parse error: Invalid JSON-RPC message")
    return messages, batched
