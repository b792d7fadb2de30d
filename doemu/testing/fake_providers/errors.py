"""The providers' real error bodies, so the SDKs raise their typed errors against the fakes.

OpenAI answers ``{"error": {"message", "type", "param", "code"}}``; Anthropic answers
``{"type": "error", "error": {"type", "message"}, "request_id"}``. The SDKs pick the exception
class from the HTTP status (``openai.RateLimitError`` for 429, ``anthropic.BadRequestError`` for
400, …) and expose the body, so an adapter's error handling can be tested end to end.
"""

from __future__ import annotations

import secrets
from types import EllipsisType

from starlette.responses import JSONResponse

__all__ = ["anthropic_error", "openai_error"]

_OPENAI_TYPES = {
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    429: ("requests", "rate_limit_exceeded"),
}

_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def openai_error(
    status: int, message: str, *, param: str | None = None, code: str | EllipsisType | None = ...
) -> JSONResponse:
    """An OpenAI error response: the ``type`` the real API uses for that status, and its
    ``code`` (the status's usual one unless given: a refused body names its own)."""
    kind, usual = _OPENAI_TYPES.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    code = usual if isinstance(code, EllipsisType) else code
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return JSONResponse(body, status_code=status, headers={"x-request-id": _request_id()})


def anthropic_error(status: int, message: str) -> JSONResponse:
    """An Anthropic error response: ``error.type`` as the real API names it for that status."""
    kind = _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    request_id = _request_id()
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id}
    return JSONResponse(body, status_code=status, headers={"request-id": request_id})


def _request_id() -> str:
    return f"req_{secrets.token_hex(12)}"
