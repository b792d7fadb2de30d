"""``Request`` as Cloudflare's Python ``workers`` module exposes it.

Internal hooks (for the server, stubs and runtime): ``Request._from_parts(url, method, headers,
body)`` is trusted construction from an ASGI request; ``Request._coerce(input, init, **kwargs)``
is what ``stub.fetch(url_or_request, init, **kwargs)`` builds, always a fresh copy;
``request._url`` / ``._method`` / ``._headers`` (live :class:`Headers`) / ``._body`` are the raw
fields, ``_body`` readable even after user code consumed the body.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from http import HTTPMethod
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .bodies import TEXT_PLAIN, BodyMixin, body_bytes
from .headers import TOKEN, Headers, HeadersInit, to_headers

__all__ = ["Request"]

_HTTP_METHODS = {m.value: m for m in HTTPMethod}


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
    if not isinstance(text, str) or not TOKEN.match(text):
        raise TypeError(f"Invalid HTTP method string: {method}")
    return text.upper()


class Request(BodyMixin):
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
        self._headers = to_headers(headers if headers is not None else base_headers)
        if body is not None:
            self._body = body_bytes(body, "Request")
            if isinstance(body, str) and not self._headers.has("content-type"):
                self._headers.set("content-type", TEXT_PLAIN)
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
        self._headers = headers.copy() if isinstance(headers, Headers) else to_headers(headers)
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
