"""Who may call the admin API: loopback only, or a bearer token; never a web page.

Loopback-only unless an admin token is configured; then every call needs
``Authorization: Bearer <token>``. Loopback-only also means the ``Host`` header must name a
loopback address (``localhost``, ``127.0.0.0/8``, ``[::1]``, any port), so a web page cannot reach
the API through DNS rebinding. With or without a token, a request carrying an ``Origin`` other than
the server's own is refused (a page of another site may not drive the API from the developer's
browser), and bodies may not exceed :data:`MAX_BODY_BYTES`. Clients that send no ``Origin`` (curl,
the CLI) are unaffected. :class:`AccessControl` sits in front of every route, unknown ones
included, so a stranger learns nothing, not even which paths exist.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote, urlsplit

from ...errors import HttpError

if TYPE_CHECKING:
    from starlette.responses import JSONResponse, Response
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["MAX_BODY_BYTES", "TOO_LARGE", "AccessControl", "error_response"]

#: The largest request body the admin API reads (larger ones are refused with 413).
MAX_BODY_BYTES = 1 << 20
TOO_LARGE = f"admin API request bodies are limited to {MAX_BODY_BYTES} bytes"
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def error_response(
    status: int, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """The admin API's refusal: ``{"error": message}`` with ``status``."""
    from starlette.responses import JSONResponse

    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _split_host(authority: str) -> tuple[str, int | None] | None:
    """``host[:port]`` (``[v6]:port`` for IPv6) as ``(lowercase host, port)``; None if malformed."""
    host, port = authority, ""
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            return None
        host, rest = authority[1:end], authority[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port = rest[1:]
    elif ":" in authority:
        host, _, port = authority.rpartition(":")
        if ":" in host:  # a bare IPv6 address is not a valid Host
            return None
    if port and not port.isdigit():
        return None
    if not host:
        return None
    return host.lower(), int(port) if port else None


def _header(scope: Scope, name: bytes) -> str | None:
    """The last value of header ``name`` (lowercase), decoded as Latin-1, or None."""
    found: bytes | None = None
    for key, value in scope["headers"]:
        if key.lower() == name:
            found = value
    return None if found is None else found.decode("latin-1")


def _same_origin(origin: str, scope: Scope) -> bool:
    """Whether ``origin`` is the origin the request was sent to (its scheme and ``Host``)."""
    host_header = _header(scope, b"host")
    if host_header is None or origin == "null":
        return False
    try:
        parts = urlsplit(origin)
        origin_port = parts.port
    except ValueError:
        return False
    if parts.path or parts.query or parts.fragment or parts.username or parts.password:
        return False
    target = _split_host(host_header)
    scheme = str(scope.get("scheme", "http")).lower()
    if target is None or parts.scheme.lower() != scheme or parts.hostname is None:
        return False
    default = _DEFAULT_PORTS.get(scheme)
    return (parts.hostname.lower(), origin_port or default) == (target[0], target[1] or default)


def _is_loopback_host(host_header: str) -> bool:
    parsed = _split_host(host_header)
    return parsed is not None and _is_loopback(parsed[0])


def _routing_path(scope: Scope) -> str:
    """The request path with each segment still percent-encoded.

    ASGI's ``path`` is decoded, so an object named ``a/b`` (which the CLI sends as ``a%2Fb``)
    would split into two segments and match no route. Routing on the raw path keeps a name one
    segment; handlers decode path parameters themselves.
    """
    path: str = scope["path"]
    raw = scope.get("raw_path")
    root = scope.get("root_path", "")
    if not raw:
        return quote(path, safe="/")
    text: str = raw.decode("latin-1")
    if root and text.startswith(root):
        text = text[len(root) :] or "/"
    # The raw path must be the same path; anything else (a proxy rewrote it) falls back.
    if unquote(text) != path:
        return quote(path, safe="/")
    return text


class AccessControl:
    """ASGI middleware in front of every admin route, unknown routes included.

    Sitting before the router means a stranger learns nothing, not even which paths exist. It
    also re-encodes the path for routing (see :func:`_routing_path`).
    """

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        # Bytes: compare_digest refuses a non-ASCII str, and a client may send any header bytes.
        self.token = None if token is None else token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app({**scope, "path": _routing_path(scope)}, _capped(receive), send)

    def _refusal(self, scope: Scope) -> Response | None:
        origin = _header(scope, b"origin")
        if origin is not None and not _same_origin(origin, scope):
            return error_response(
                403,
                f"admin API refuses cross-origin requests (Origin {origin!r}): a web page of "
                "another site may not call it; send no Origin header (as curl and the CLI do) "
                "or call it from the server's own origin",
            )
        length = _header(scope, b"content-length")
        if length is not None and length.strip().isdigit() and int(length) > MAX_BODY_BYTES:
            return error_response(413, TOO_LARGE)
        if self.token is not None:
            supplied = b""
            for name, value in scope["headers"]:
                if name.lower() == b"authorization":
                    supplied = value
            scheme, _, credentials = supplied.partition(b" ")
            # The scheme is case-insensitive (RFC 9110); the token is compared in constant time.
            valid = hmac.compare_digest(credentials, self.token)
            if scheme.lower() != b"bearer" or not valid:
                return error_response(
                    401,
                    "admin API requires 'Authorization: Bearer <admin token>'",
                    headers={"www-authenticate": "Bearer"},
                )
            return None
        client = scope.get("client")
        if not _is_loopback(client[0] if client else None):
            return error_response(
                403, "admin API is loopback-only; start with --admin-token to share"
            )
        host = _header(scope, b"host")
        if host is not None and not _is_loopback_host(host):
            # A browser tricked by DNS rebinding sends the attacker's name as Host.
            return error_response(
                403,
                f"admin API is loopback-only and the Host header {host!r} is not a loopback "
                "address; call it as localhost, 127.0.0.1 or [::1], or start with --admin-token",
            )
        return None


def _capped(receive: Receive) -> Receive:
    """``receive``, refusing (413) a body that grows past :data:`MAX_BODY_BYTES`."""
    seen = 0

    async def capped() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > MAX_BODY_BYTES:
                raise HttpError(413, TOO_LARGE)
        return message

    return capped
