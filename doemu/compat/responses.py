"""``Response`` (and ``FetchResponse``, its reading half) as Cloudflare's Python ``workers``
module exposes them.

Statuses outside 200-599 are refused unless the response carries a WebSocket, null-body statuses
carry no body, and so on, with workerd's error texts. Internal hooks: ``Response._from_parts
(status, headers, body, status_text=None)`` is trusted construction (e.g. a response copied
across an object boundary); ``response._status`` / ``._status_text`` / ``._headers`` / ``._body``
/ ``._web_socket`` are what the server sends (a 101 response carries the client end of a
``WebSocketPair``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from ..jsboundary import JsException, is_strict
from .bodies import Body, BodyData, BodyMixin, body_data
from .headers import (
    Headers,
    HeadersInit,
    check_headers_init,
    http_message,
    to_headers,
)
from .readable import ReadableStream
from .requests import split_body
from .websocket import WebSocket

if TYPE_CHECKING:
    from .headers import HTTPMessageMapping

__all__ = ["FetchResponse", "Response"]

_NULL_BODY_STATUSES = frozenset({101, 204, 205, 304})
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


class _JsonMethod:
    """``Response.json``: static use builds a JSON response, instance use reads the body."""

    def __get__(self, instance: FetchResponse | None, owner: type[Any]) -> Callable[..., Any]:
        if instance is None:
            return owner.from_json  # type: ignore[no-any-return]
        return instance._read_json


class FetchResponse(BodyMixin):
    """The reading half of a response: ``pyodide.http.FetchResponse`` and Cloudflare's extras."""

    _status: int
    _status_text: str
    _headers: Headers
    _body: BodyData
    _web_socket: WebSocket | None
    _url: str
    _redirected: bool
    _abort: Callable[[object], None] | None
    _USED_MESSAGE = "Response body is already used"

    json = _JsonMethod()

    def _init_parts(
        self,
        status: int,
        status_text: str | None,
        headers: Headers,
        body: BodyData,
        web_socket: WebSocket | None = None,
    ) -> None:
        self._status = status
        self._status_text = status_text if status_text is not None else _default_status_text(status)
        self._headers = headers
        self._body = body
        self._web_socket = web_socket
        self._url = ""
        self._redirected = False
        self._abort = None
        self._body_used = False

    # -- properties ------------------------------------------------------------------------------
    @property
    def status(self) -> int:
        return self._status

    @property
    def status_text(self) -> str:
        return self._status_text

    @property
    def headers(self) -> HTTPMessageMapping | Headers:
        """A new ``http.client.HTTPMessage`` on each access, as on Cloudflare (changing it changes
        nothing); a copy of doemu's :class:`Headers` under ``--lenient``."""
        return http_message(self._headers) if is_strict() else self._headers.copy()

    @property
    def ok(self) -> bool:
        return 200 <= self._status <= 299

    @property
    def url(self) -> str:
        return self._url

    @property
    def redirected(self) -> bool:
        return self._redirected

    @property
    def type(self) -> str:
        return "default"

    # -- body ------------------------------------------------------------------------------------
    @property
    def js_response(self) -> Any:
        """Pyodide's name for the JS ``Response`` behind this one; the object itself here."""
        return self

    async def memoryview(self) -> memoryview:
        return memoryview(await self._consume())

    async def string(self) -> str:
        """Deprecated alias of :meth:`text` (kept by Pyodide's ``FetchResponse``)."""
        return await self.text()

    async def formData(self) -> Any:
        """Alias of :meth:`form_data`, as Cloudflare's SDK keeps it."""
        return await self.form_data()

    def abort(self, reason: object = None) -> None:
        """Stop reading the body of a ``fetch()`` response and close its connection.

        Only a response from ``fetch()`` can be aborted; for any other, as on Cloudflare,
        ``ValueError("abort_controller is not set")``.
        """
        if self._abort is None:
            raise ValueError("abort_controller is not set")
        self._abort(reason)

    async def unpack_archive(
        self, *, extract_dir: str | None = None, format: str | None = None
    ) -> None:
        """Unpack the body as an archive (``shutil.unpack_archive``), named after the URL."""
        import asyncio
        import os
        import shutil
        import tempfile
        from urllib.parse import urlsplit

        data = await self._consume()
        filename = os.path.basename(urlsplit(self._url).path) or "archive"

        def unpack() -> None:
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, filename)
                with open(path, "wb") as f:
                    f.write(data)
                shutil.unpack_archive(path, extract_dir, format)

        await asyncio.to_thread(unpack)

    def raise_for_status(self) -> None:
        if 400 <= self._status < 500:
            raise OSError(f"{self._status} Client Error: {self._status_text} for url: {self._url}")
        if 500 <= self._status < 600:
            raise OSError(f"{self._status} Server Error: {self._status_text} for url: {self._url}")

    def clone(self) -> Response:
        if self._web_socket is not None:
            raise TypeError("Cannot clone a response to a WebSocket handshake.")
        if self.body_used:
            raise OSError("Response body is already used")
        copy = Response._from_parts(self._status, self._headers, None, self._status_text)
        copy._body = split_body(self)
        copy._url, copy._redirected = self._url, self._redirected
        return copy

    def replace_body(self, body: Body | None) -> Response:
        """A new response with this one's status and headers and ``body``."""
        return Response(body, self._status, self._status_text, self._headers.copy())

    # -- static constructors ---------------------------------------------------------------------
    @staticmethod
    def redirect(url: str, status: HTTPStatus | int = HTTPStatus.FOUND) -> Response:
        code = int(status)
        if code not in _REDIRECT_STATUSES:
            raise _range_error(
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
        if headers:  # the SDK looks at a truthy headers= only
            check_headers_init(headers)
        merged = to_headers(headers)
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
        if isinstance(body, FetchResponse):  # Response(other.js_object): adopt it, as on CF
            if status is not None or status_text or headers is not None:
                raise ValueError(
                    "Expected no options when constructing Response from a js.Response"
                )
            self._init_parts(body._status, body._status_text, body._headers.copy(), body._body)
            self._url, self._web_socket, self._abort = body._url, body._web_socket, body._abort
            body._body_used = body._body is not None  # one body, now this response's
            return
        code = int(status) if status else 200
        if web_socket is None:
            if not 200 <= code <= 599:
                raise _range_error(
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
                raise _range_error("Responses with a WebSocket must have status code 101.")
        if status_text and any(ord(c) < 0x20 for c in status_text):
            raise TypeError("Invalid statusText")
        if headers:  # the SDK looks at a truthy headers= only
            check_headers_init(headers)
        merged = to_headers(headers if headers else None)
        data = body_data(body, "Response", merged)
        if code in _NULL_BODY_STATUSES and data is not None:
            if isinstance(data, ReadableStream) or data:
                raise TypeError(
                    "Response with null body status (101, 204, 205, or 304) cannot have a body."
                )
            data = None
        self._init_parts(code, status_text or None, merged, data, web_socket)

    @classmethod
    def _from_parts(
        cls,
        status: int,
        headers: HeadersInit | None,
        body: BodyData,
        status_text: str | None = None,
        web_socket: WebSocket | None = None,
    ) -> Response:
        """doemu-internal, trusted: no validation, headers copied, body taken as is."""
        self = cls.__new__(cls)
        hdrs = headers.copy() if isinstance(headers, Headers) else to_headers(headers)
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


def _range_error(message: str) -> JsException:
    """A JavaScript ``RangeError`` from the ``Response`` constructor (as workerd raises it)."""
    return JsException("RangeError", message)
