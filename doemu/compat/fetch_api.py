"""``Headers``, ``Request`` and ``Response`` as Cloudflare's Python ``workers`` module exposes them.

The Python SDK wraps JS objects and names its own members in Python style (``status_text``,
``body_used``, ``web_socket=``), while JS-defined behaviour keeps JS rules: a body can be read
once, a ``GET`` request has no body, statuses outside 200-599 are refused unless the response
carries a WebSocket, and so on, with workerd's error texts. Bodies are held as ``bytes``.

Internal hooks (for the server, stubs and runtime)
--------------------------------------------------
``Request._from_parts(url, method, headers, body)``
    Trusted construction from an ASGI request (no validation beyond the method's case).
``Request._coerce(input, init=None, **kwargs)``
    What ``stub.fetch(url_or_request, init, **kwargs)`` builds: always a fresh copy.
``request._url`` / ``._method`` / ``._headers`` (live :class:`Headers`) / ``._body``
    Raw fields; ``_body`` is readable even after user code consumed the body.
``Response._from_parts(status, headers, body, status_text=None)``
    Trusted construction (e.g. a response copied across an object boundary).
``response._status`` / ``._status_text`` / ``._headers`` / ``._body`` / ``._web_socket``
    What the server sends. A 101 response carries the client end of a ``WebSocketPair``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from http import HTTPMethod, HTTPStatus
from typing import Any, Union
from urllib.parse import urlsplit, urlunsplit

from .websocket import WebSocket

__all__ = ["FetchResponse", "Headers", "HeadersInit", "Request", "Response"]

HeadersInit = Union["Headers", Mapping[str, str], Iterable[tuple[str, str]]]
Body = str | bytes

_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_HTTP_WS = " \t\r\n"
_NULL_BODY_STATUSES = frozenset({101, 204, 205, 304})
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_TEXT_PLAIN = "text/plain;charset=UTF-8"
_HTTP_METHODS = {m.value: m for m in HTTPMethod}


def _check_byte_string(text: str) -> None:
    """Refuse a string that is not a WebIDL ``ByteString`` (every character below 256), with
    workerd's (V8's) message; the index and value are in UTF-16 code units, as JavaScript sees
    them. Header names and values must be ByteStrings: they go on the wire as Latin-1."""
    try:
        text.encode("latin-1")
    except UnicodeEncodeError as exc:
        index = len(text[: exc.start].encode("utf-16-le")) // 2
        unit = int.from_bytes(text[exc.start].encode("utf-16-le")[:2], "little")
        raise TypeError(
            "Cannot convert argument to a ByteString because the character at index "
            f"{index} has a value of {unit} which is greater than 255."
        ) from None


def _header_name(name: object) -> str:
    if isinstance(name, str):
        _check_byte_string(name)
    if not isinstance(name, str) or not _TOKEN.match(name):
        raise TypeError("Invalid header name.")
    return name.lower()


def _header_value(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise TypeError("Invalid header value.")
    _check_byte_string(value)
    value = value.strip(_HTTP_WS)
    if "\r" in value or "\n" in value or "\0" in value:
        raise TypeError("Invalid header value.")
    return value


class Headers:
    """A case-insensitive multi-dict of HTTP headers.

    It answers both ways user code reads headers: like the JS ``Headers`` (``get``, ``set``,
    ``append``, ``has``, ``delete``, ``getSetCookie``, ``entries``) and like the
    ``http.client.HTTPMessage`` that ``request.headers`` is on Cloudflare (``h["name"]`` returns
    ``None`` when absent, ``get_all``, ``keys``/``values``/``items``, ``in``, iteration over names,
    ``dict(h)``). Names are lowercased and iterate sorted, values of a repeated name are joined with
    ``", "`` except ``set-cookie``: exactly what Python code sees on Cloudflare.

    ``h[name] = value`` replaces (``HTTPMessage`` would append; use ``append`` for that).
    """

    __slots__ = ("_entries",)

    def __init__(self, init: HeadersInit | None = None) -> None:
        self._entries: list[tuple[str, str]] = []
        if init is None:
            return
        if isinstance(init, Headers):
            self._entries = list(init._entries)
            return
        pairs: Iterable[Any] = init.items() if isinstance(init, Mapping) else init
        if isinstance(pairs, str | bytes) or not isinstance(pairs, Iterable):
            raise TypeError("Received unexpected type for headers argument")
        for pair in pairs:
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                raise TypeError("Received unexpected type for headers argument")
            self.append(pair[0], pair[1])

    @classmethod
    def _trusted(cls, entries: list[tuple[str, str]]) -> Headers:
        """doemu-internal: adopt already-valid ``(lowercase name, value)`` pairs (no checks).

        The server builds one per request from the HTTP parser's output, which has already
        validated names and values; skipping re-validation keeps the hot path short.
        """
        self = cls.__new__(cls)
        self._entries = entries
        return self

    # -- JS Headers ------------------------------------------------------------------------------
    def append(self, name: str, value: str) -> None:
        self._entries.append((_header_name(name), _header_value(value)))

    def set(self, name: str, value: str) -> None:
        key, val = _header_name(name), _header_value(value)
        self._entries = [e for e in self._entries if e[0] != key]
        self._entries.append((key, val))

    def delete(self, name: str) -> None:
        key = _header_name(name)
        self._entries = [e for e in self._entries if e[0] != key]

    def has(self, name: str) -> bool:
        key = _header_name(name)
        return any(e[0] == key for e in self._entries)

    def get(self, name: str, default: str | None = None) -> str | None:
        """The value (repeats joined with ``", "``; the first ``set-cookie``), else ``default``."""
        key = name.lower()
        values = [v for k, v in self._entries if k == key]
        if not values:
            return default
        return values[0] if key == "set-cookie" else ", ".join(values)

    def getSetCookie(self) -> list[str]:
        return [v for k, v in self._entries if k == "set-cookie"]

    def entries(self) -> Iterator[tuple[str, str]]:
        return iter(self._combined())

    # -- HTTPMessage / mapping -------------------------------------------------------------------
    def keys(self) -> list[str]:
        return [k for k, _ in self._combined()]

    def values(self) -> list[str]:
        return [v for _, v in self._combined()]

    def items(self) -> list[tuple[str, str]]:
        return self._combined()

    def get_all(self, name: str, failobj: Any = None) -> list[str] | Any:
        key = name.lower()
        found = [v for k, v in self._combined() if k == key]
        return found if found else failobj

    def add_header(self, name: str, value: str) -> None:
        self.append(name, value)

    def replace_header(self, name: str, value: str) -> None:
        if not self.has(name):
            raise KeyError(name)
        self.set(name, value)

    def copy(self) -> Headers:
        return Headers(self)

    def __getitem__(self, name: str) -> str | None:
        return self.get(name)

    def __setitem__(self, name: str, value: str) -> None:
        self.set(name, value)

    def __delitem__(self, name: str) -> None:
        self.delete(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and any(e[0] == name.lower() for e in self._entries)

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self._combined())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Headers):
            return self._combined() == other._combined()
        if isinstance(other, Mapping):
            return dict(self.items()) == {str(k).lower(): v for k, v in other.items()}
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Headers({self._combined()!r})"

    def _combined(self) -> list[tuple[str, str]]:
        """The JS iteration order: sorted names, repeats joined, each set-cookie on its own."""
        grouped: dict[str, list[str]] = {}
        for key, value in self._entries:
            grouped.setdefault(key, []).append(value)
        out: list[tuple[str, str]] = []
        for key in sorted(grouped):
            if key == "set-cookie":
                out.extend((key, v) for v in grouped[key])
            else:
                out.append((key, ", ".join(grouped[key])))
        return out


def _to_headers(headers: HeadersInit | None) -> Headers:
    return Headers(headers) if headers is not None else Headers()


def _body_bytes(body: object, what: str) -> bytes | None:
    if body is None:
        return None
    if isinstance(body, str):
        return body.encode()
    if isinstance(body, bytes):
        return body
    raise TypeError(f"Unsupported type in {what}: {type(body).__name__}")


def _normalize_url(url: object) -> str:
    text = str(url)
    parts = urlsplit(text)
    if not parts.scheme or not parts.netloc:
        raise TypeError(f"Invalid URL: {text}")
    return urlunsplit(
        (parts.scheme.lower(), parts.netloc.lower(), parts.path or "/", parts.query, parts.fragment)
    )


def _normalize_method(method: object) -> str:
    text = method.value if isinstance(method, HTTPMethod) else method
    if not isinstance(text, str) or not _TOKEN.match(text):
        raise TypeError(f"Invalid HTTP method string: {method}")
    return text.upper()


class _Body:
    """What requests and responses share: a body that can be read once, as JS bodies can.

    ``text()`` decodes like the JS ``TextDecoder`` (a BOM is dropped, invalid UTF-8 becomes
    U+FFFD) rather than raising.
    """

    _body: bytes | None
    _body_used: bool
    _USED_MESSAGE = "Body already used"

    @property
    def body(self) -> bytes | None:
        return self._body

    @property
    def body_used(self) -> bool:
        return self._body_used

    def _consume(self) -> bytes:
        if self._body_used:
            raise OSError(self._USED_MESSAGE)
        if self._body is None:
            return b""
        self._body_used = True
        return self._body

    async def bytes(self) -> bytes:
        return self._consume()

    async def text(self) -> str:
        return self._consume().decode("utf-8-sig", errors="replace")


class Request(_Body):
    """An HTTP request (Cloudflare's ``workers.Request``): ``Request(url, method=..., ...)``."""

    _url: str
    _method: str
    _headers: Headers
    _body: bytes | None
    _redirect: str
    _cf: Any
    _body_used: bool

    def __init__(
        self,
        input: Request | str,
        *,
        method: str | HTTPMethod | None = None,
        headers: HeadersInit | None = None,
        body: str | bytes | None = None,
        redirect: str | None = None,
        cf: Any = None,
    ) -> None:
        if isinstance(input, Request):
            url, base_method, base_headers = input._url, input._method, input._headers
            base_body, base_cf, base_redirect = input._body, input._cf, input._redirect
        else:
            url, base_method, base_headers = _normalize_url(input), "GET", None
            base_body, base_cf, base_redirect = None, None, "follow"
        self._url = url
        self._method = _normalize_method(method) if method is not None else base_method
        self._headers = _to_headers(headers if headers is not None else base_headers)
        if body is not None:
            self._body = _body_bytes(body, "Request")
            if isinstance(body, str) and not self._headers.has("content-type"):
                self._headers.set("content-type", _TEXT_PLAIN)
        else:
            self._body = base_body
        if self._body is not None and self._method in ("GET", "HEAD"):
            raise TypeError("Request with a GET or HEAD method cannot have a body.")
        self._redirect = redirect if redirect is not None else base_redirect
        self._cf = cf if cf is not None else base_cf
        self._body_used = False

    @classmethod
    def _from_parts(
        cls,
        url: str,
        method: str = "GET",
        headers: HeadersInit | None = None,
        body: bytes | None = None,
        *,
        cf: Any = None,
    ) -> Request:
        """doemu-internal, trusted: build a request from the server's already-parsed parts."""
        self = cls.__new__(cls)
        self._url = url
        self._method = method.upper()
        self._headers = headers.copy() if isinstance(headers, Headers) else _to_headers(headers)
        self._body = body if body else None
        self._redirect = "follow"
        self._cf = cf
        self._body_used = False
        return self

    @classmethod
    def _coerce(
        cls, input: Request | str, init: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> Request:
        """doemu-internal: ``stub.fetch(input, init, **kwargs)`` → a fresh request."""
        options: dict[str, Any] = dict(init or {})
        options.update(kwargs)
        unknown = set(options) - {"method", "headers", "body", "redirect", "cf"}
        if unknown:
            raise TypeError(f"fetch() got unexpected options: {sorted(unknown)}")
        body = options.get("body")
        if isinstance(body, bytearray | memoryview):
            options["body"] = bytes(body)
        if isinstance(input, Request):
            copy = cls._from_parts(
                input._url, input._method, input._headers, input._body, cf=input._cf
            )
            return cls(copy, **options) if options else copy
        return cls(input, **options)

    def __repr__(self) -> str:
        return f"Request(method={self._method!r}, url={self._url!r})"

    # -- properties ------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return self._url

    @property
    def method(self) -> str:
        """An ``http.HTTPMethod`` (a ``str``) for standard methods, else the method string."""
        return _HTTP_METHODS.get(self._method, self._method)

    @property
    def headers(self) -> Headers:
        """A copy, as on Cloudflare (where each access builds a new ``HTTPMessage``)."""
        return self._headers.copy()

    @property
    def cf(self) -> Any:
        return self._cf

    @property
    def redirect(self) -> str:
        return self._redirect

    # -- body ------------------------------------------------------------------------------------
    async def json(self, **kwargs: Any) -> Any:
        return json.loads(await self.text(), **kwargs)

    def clone(self) -> Request:
        if self._body_used:
            raise OSError("Body already used")
        return Request._from_parts(self._url, self._method, self._headers, self._body, cf=self._cf)


class _JsonMethod:
    """``Response.json``: static use builds a JSON response, instance use reads the body."""

    def __get__(self, instance: FetchResponse | None, owner: type[Any]) -> Callable[..., Any]:
        if instance is None:
            return owner.from_json  # type: ignore[no-any-return]
        return instance._read_json


class FetchResponse(_Body):
    """The reading half of a response: ``pyodide.http.FetchResponse`` and Cloudflare's extras."""

    _status: int
    _status_text: str
    _headers: Headers
    _body: bytes | None
    _web_socket: WebSocket | None
    _url: str
    _USED_MESSAGE = "Response body is already used"

    json = _JsonMethod()

    def _init_parts(
        self,
        status: int,
        status_text: str | None,
        headers: Headers,
        body: bytes | None,
        web_socket: WebSocket | None = None,
    ) -> None:
        self._status = status
        self._status_text = status_text if status_text is not None else _default_status_text(status)
        self._headers = headers
        self._body = body
        self._web_socket = web_socket
        self._url = ""
        self._body_used = False

    # -- properties ------------------------------------------------------------------------------
    @property
    def status(self) -> int:
        return self._status

    @property
    def status_text(self) -> str:
        return self._status_text

    @property
    def headers(self) -> Headers:
        """A copy, as on Cloudflare (where each access builds a new ``HTTPMessage``)."""
        return self._headers.copy()

    @property
    def ok(self) -> bool:
        return 200 <= self._status <= 299

    @property
    def url(self) -> str:
        return self._url

    @property
    def redirected(self) -> bool:
        return False

    @property
    def type(self) -> str:
        return "default"

    # -- body ------------------------------------------------------------------------------------
    async def _read_json(self, **kwargs: Any) -> Any:
        return json.loads(await self.text(), **kwargs)

    def raise_for_status(self) -> None:
        if 400 <= self._status < 500:
            raise OSError(f"{self._status} Client Error: {self._status_text} for url: {self._url}")
        if 500 <= self._status < 600:
            raise OSError(f"{self._status} Server Error: {self._status_text} for url: {self._url}")

    def clone(self) -> Response:
        if self._web_socket is not None:
            raise TypeError("Cannot clone a response to a WebSocket handshake.")
        if self._body_used:
            raise OSError("Response body is already used")
        return Response._from_parts(self._status, self._headers, self._body, self._status_text)

    def replace_body(self, body: Body | None) -> Response:
        """A new response with this one's status and headers and ``body``."""
        return Response(body, self._status, self._status_text, self._headers.copy())

    # -- static constructors ---------------------------------------------------------------------
    @staticmethod
    def redirect(url: str, status: HTTPStatus | int = HTTPStatus.FOUND) -> Response:
        code = int(status)
        if code not in _REDIRECT_STATUSES:
            raise ValueError(
                f"{code} is not a redirect status code. "
                "It must be one of: 301, 302, 303, 307, or 308."
            )
        if "\r" in url or "\n" in url or "\0" in url:
            raise TypeError(f"Redirect URL cannot contain '\\r', '\\n', or '\\0': {url}")
        return Response._from_parts(code, Headers([("location", url)]), None)

    @staticmethod
    def from_json(
        data: Any,
        status: HTTPStatus | int = HTTPStatus.OK,
        status_text: str = "",
        headers: HeadersInit | None = None,
    ) -> Response:
        """A response whose body is ``json.dumps(data)`` (content-type ``application/json``)."""
        merged = _to_headers(headers)
        if not merged.has("content-type"):
            merged.set("content-type", "application/json")
        return Response(json.dumps(data), status, status_text, merged)


class Response(FetchResponse):
    """An HTTP response: ``Response(body, status, status_text, headers, web_socket)``."""

    def __init__(
        self,
        body: Body | None = None,
        status: HTTPStatus | int | None = None,
        status_text: str = "",
        headers: HeadersInit | None = None,
        web_socket: WebSocket | None = None,
    ) -> None:
        if body is not None and not isinstance(body, str | bytes):
            raise TypeError(f"Unsupported type in Response: {type(body).__name__}")
        code = int(status) if status else 200
        if web_socket is None:
            if not 200 <= code <= 599:
                raise ValueError(
                    "Responses may only be constructed with status codes in the range 200 to "
                    "599, inclusive."
                )
        else:
            if not isinstance(web_socket, WebSocket):
                raise TypeError(
                    "web_socket must be a WebSocket from WebSocketPair.new(), "
                    f"got {type(web_socket).__name__}"
                )
            if code != 101:
                raise ValueError("Responses with a WebSocket must have status code 101.")
        if status_text and any(ord(c) < 0x20 for c in status_text):
            raise TypeError("Invalid statusText")
        merged = _to_headers(headers)
        data = _body_bytes(body, "Response")
        if code in _NULL_BODY_STATUSES and data is not None:
            if data:
                raise TypeError(
                    "Response with null body status (101, 204, 205, or 304) cannot have a body."
                )
            data = None
        if isinstance(body, str) and not merged.has("content-type"):
            merged.set("content-type", _TEXT_PLAIN)
        self._init_parts(code, status_text or None, merged, data, web_socket)

    @classmethod
    def _from_parts(
        cls,
        status: int,
        headers: HeadersInit | None,
        body: bytes | None,
        status_text: str | None = None,
        web_socket: WebSocket | None = None,
    ) -> Response:
        """doemu-internal, trusted: no validation, headers copied, body taken as is."""
        self = cls.__new__(cls)
        hdrs = headers.copy() if isinstance(headers, Headers) else _to_headers(headers)
        self._init_parts(status, status_text, hdrs, body, web_socket)
        return self

    def __repr__(self) -> str:
        parts = [f"status={self._status}"]
        if self._status_text != _default_status_text(self._status):
            parts.append(f"status_text={self._status_text!r}")
        content_type = self._headers.get("content-type")
        if content_type is not None:
            parts.append(f"content_type={content_type!r}")
        return f"Response({', '.join(parts)})"


def _default_status_text(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""
