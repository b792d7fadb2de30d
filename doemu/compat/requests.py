"""``Request`` as Cloudflare's Python ``workers`` module exposes it.

Internal hooks (for the server, stubs and ``fetch``): ``Request._from_parts(url, method,
headers, body)`` is trusted construction from an ASGI request; ``Request._for_fetch(resource,
options)`` is the new request ``fetch(resource, **options)`` and ``stub.fetch`` send (a streamed
body moves to it, as in JavaScript); ``request._url`` / ``._method`` / ``._headers`` (live
:class:`Headers`) / ``._body`` are the raw fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPMethod
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from ..jsboundary import is_strict
from .bodies import BodyData, BodyMixin, body_data
from .headers import (
    TOKEN,
    Headers,
    HeadersInit,
    check_fetch_headers,
    check_headers_init,
    http_message,
    to_headers,
)
from .readable import ReadableStream

if TYPE_CHECKING:
    from .headers import HTTPMessageMapping

__all__ = ["Request", "split_body"]

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


_OPTIONS = frozenset(
    {"method", "headers", "body", "redirect", "cf", "fetcher"} | {
        "signal", "cache", "credentials", "integrity", "keepalive", "mode", "referrer",
        "referrerPolicy", "priority", "duplex",
    }
)  # fmt: skip
#: What JavaScript's RequestInit members default to.
_DEFAULTS: dict[str, Any] = {
    "cache": "default",
    "credentials": "same-origin",
    "integrity": "",
    "keepalive": False,
    "mode": "cors",
    "referrer": "about:client",
    "referrerPolicy": "",
}


class Request(BodyMixin):
    """An HTTP request (Cloudflare's ``workers.Request``): ``Request(url, method=..., ...)``.

    ``Request(input, **options)`` takes a URL or another request and JavaScript's ``RequestInit``
    members as keywords (``method``, ``headers``, ``body``, ``redirect``, ``cf``, ``fetcher``,
    ``signal``, ``cache``, …). A body may be ``str``, ``bytes``, ``FormData``, ``Blob`` or a
    ``ReadableStream`` (taken over, not copied, when built from another request).
    """

    _url: str
    _method: str
    _headers: Headers
    _body: BodyData
    _redirect: str
    _cf: Any
    _body_used: bool
    _init: dict[str, Any]

    def __init__(self, input: Request | str, **options: Any) -> None:
        unknown = set(options) - _OPTIONS
        if unknown:
            raise TypeError(
                f"Request() got unknown options {sorted(unknown)}; expected some of "
                f"{sorted(_OPTIONS)}"
            )
        method = options.get("method")
        headers = options.get("headers")
        if "headers" in options:  # even None: the SDK converts whatever was given
            check_headers_init(headers)
        body = options.get("body")
        if isinstance(input, Request):
            url, base_method, base_headers = input._url, input._method, input._headers
            base_cf, base_redirect, base_init = input._cf, input._redirect, dict(input._init)
            base_body: BodyData = None
            if body is None and input._body is not None:
                if input.body_used:
                    raise TypeError("Cannot construct a Request with a Request whose body is used.")
                base_body = input._body
                input._body_used = True  # the body moves to the new request, as in JavaScript
        else:
            url, base_method, base_headers = _normalize_url(input), "GET", None
            base_body, base_cf, base_redirect, base_init = None, None, "follow", {}
        self._url = url
        self._method = _normalize_method(method) if method is not None else base_method
        self._headers = to_headers(headers if headers is not None else base_headers)
        if body is not None:
            if isinstance(body, bytearray | memoryview):
                body = bytes(body)
            self._body = body_data(body, "Request", self._headers)
        else:
            self._body = base_body
        if self._body is not None and self._method in ("GET", "HEAD"):
            raise TypeError("Request with a GET or HEAD method cannot have a body.")
        redirect = options.get("redirect")
        if redirect is not None and redirect not in ("follow", "manual", "error"):
            raise TypeError(f"Invalid redirect value: {redirect!r} (follow, manual or error)")
        self._redirect = redirect if redirect is not None else base_redirect
        self._cf = options.get("cf", base_cf)
        extra = {k: v for k, v in options.items() if k in _DEFAULTS or k in ("signal", "fetcher")}
        self._init = {**base_init, **extra}
        self._body_used = False

    @classmethod
    def _from_parts(
        cls,
        url: str,
        method: str = "GET",
        headers: HeadersInit | None = None,
        body: BodyData = None,
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
        self._init = {}
        self._body_used = False
        return self

    @classmethod
    def _for_fetch(cls, resource: Request | str, options: Mapping[str, Any]) -> Request:
        """doemu-internal: the request ``fetch(resource, **options)`` sends (always a new one)."""
        if isinstance(resource, Request) and not options:
            copy = cls._from_parts(
                resource._url, resource._method, resource._headers, None, cf=resource._cf
            )
            copy._redirect, copy._init = resource._redirect, dict(resource._init)
            if resource._body is not None:
                if resource.body_used:
                    raise TypeError("Cannot fetch() a Request whose body is already used.")
                copy._body = resource._body
                resource._body_used = True
            return copy
        if "headers" in options:  # fetch hands headers to JS through to_js, not the SDK's check
            check_fetch_headers(options["headers"])
            options = dict(options)
            headers = options.pop("headers")
            if headers is not None:
                options["headers"] = to_headers(headers)
        return cls(resource, **options)

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
    def headers(self) -> HTTPMessageMapping | Headers:
        """A new ``http.client.HTTPMessage`` on each access, as on Cloudflare (changing it changes
        nothing); a copy of doemu's :class:`Headers` under ``--lenient``."""
        return http_message(self._headers) if is_strict() else self._headers.copy()

    @property
    def cf(self) -> Any:
        return self._cf

    @property
    def redirect(self) -> str:
        return self._redirect

    @property
    def cache(self) -> str:
        return str(self._init.get("cache", _DEFAULTS["cache"]))

    @property
    def credentials(self) -> str:
        return str(self._init.get("credentials", _DEFAULTS["credentials"]))

    @property
    def destination(self) -> str:
        return ""

    @property
    def integrity(self) -> str:
        return str(self._init.get("integrity", _DEFAULTS["integrity"]))

    @property
    def keepalive(self) -> bool:
        return bool(self._init.get("keepalive", _DEFAULTS["keepalive"]))

    @property
    def mode(self) -> str:
        return str(self._init.get("mode", _DEFAULTS["mode"]))

    @property
    def referrer(self) -> str:
        return str(self._init.get("referrer", _DEFAULTS["referrer"]))

    @property
    def referrer_policy(self) -> str:
        return str(self._init.get("referrerPolicy", _DEFAULTS["referrerPolicy"]))

    @property
    def is_history_navigation(self) -> bool:
        return False

    # -- body ------------------------------------------------------------------------------------
    async def json(self, **kwargs: Any) -> Any:
        return await self._read_json(**kwargs)

    def clone(self) -> Request:
        if self.body_used:
            raise OSError("Body already used")
        copy = Request._from_parts(self._url, self._method, self._headers, None, cf=self._cf)
        copy._redirect, copy._init = self._redirect, dict(self._init)
        copy._body = split_body(self)
        return copy


def split_body(owner: BodyMixin) -> BodyData:
    """A body for a clone: the same bytes, or one branch of a tee (``owner`` keeps the other)."""
    data = owner._body
    if isinstance(data, ReadableStream):
        mine, theirs = data.tee()
        owner._body = mine
        return theirs
    return data
