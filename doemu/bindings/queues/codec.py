"""A message body as each ``contentType`` carries it.

``json`` (the default): the value as JSON, parsed again for the consumer (a dict comes back as a
``JsDict``); ``text``: a string; ``bytes``: bytes (a ``memoryview`` for the consumer, an
``ArrayBuffer`` through the SDK); ``v8``: the structured clone (dates, bytes, nested values).
"""

from __future__ import annotations

import json
from typing import Any

from ... import clone
from ...compat.rpc import python_from_rpc, python_to_rpc
from ...errors import DataCloneError
from ..errors import BindingTypeError

__all__ = ["CONTENT_TYPES", "decode_body", "encode_body"]

CONTENT_TYPES = ("json", "text", "bytes", "v8")


def encode_body(body: Any, content_type: str) -> bytes:
    """``body`` as stored for ``content_type`` (a ``TypeError`` when it cannot be)."""
    if content_type == "text":
        if not isinstance(body, str):
            raise BindingTypeError(
                'Content Type "text" requires a value of type string, but received '
                f"{type(body).__name__}"
            )
        return body.encode()
    if content_type == "bytes":
        if not isinstance(body, bytes | memoryview):
            raise BindingTypeError(
                'Content Type "bytes" requires a value of type ArrayBuffer or '
                f"ArrayBufferView, but received {type(body).__name__}"
            )
        return bytes(body)
    if content_type == "json":
        try:
            return json.dumps(python_to_rpc(body), separators=(",", ":"), allow_nan=False).encode()
        except (TypeError, ValueError) as exc:
            raise BindingTypeError(f"Failed to serialize the message body as JSON: {exc}") from None
    try:
        return clone.encode(python_to_rpc(body))
    except DataCloneError as exc:
        raise BindingTypeError(exc.message) from None


def decode_body(data: bytes, content_type: str) -> Any:
    """The body a consumer sees (``python_from_rpc``'s shapes)."""
    if content_type == "text":
        return data.decode()
    if content_type == "bytes":
        return memoryview(data)
    if content_type == "json":
        return python_from_rpc(json.loads(data))
    return python_from_rpc(clone.decode(data))
