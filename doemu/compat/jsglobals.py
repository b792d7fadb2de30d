"""The JavaScript globals user code imports from ``js`` (see :mod:`doemu.compat.js`).

On Cloudflare, ``from js import X`` gives a proxy of the JS global ``X``, and ``X.new(...)`` calls
its constructor. doemu implements, in Python, the globals Durable Object code commonly uses:
``Date.now()`` (read from the runtime's clock, so a manual clock in tests moves it),
``WebSocketPair`` / ``WebSocket``, ``WebSocketRequestResponsePair``, ``JSON``, ``console``,
``Object`` and the ``Response`` / ``Request`` / ``Headers`` constructors (they build the same
objects as the ``workers`` module, so either may be returned from ``fetch``).
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import math
from collections.abc import Iterable, Mapping
from http import HTTPStatus
from typing import Any

from ..errors import not_emulated
from ..jsboundary import JsException
from . import _state
from .fetch_api import FetchResponse as _FetchResponse
from .fetch_api import Headers as _Headers
from .fetch_api import HeadersInit as _HeadersInit
from .fetch_api import Request as _Request
from .fetch_api import Response as _Response
from .jsvalues import JsArray, JsObject, JsProxy, to_python
from .websocket import WebSocketPair

__all__ = [
    "JSON",
    "Date",
    "Headers",
    "Object",
    "Request",
    "Response",
    "WebSocket",
    "WebSocketPair",
    "WebSocketRequestResponsePair",
    "console",
]

_console_log = logging.getLogger("doemu.console")


class Date:
    """``Date``: ``Date.now()`` (ms since the epoch, an ``int``) and ``Date.new(...)``.

    Pyodide turns a JS number holding an integer into a Python ``int``, which is what
    ``Date.now()`` returns on Cloudflare. Both read the runtime's clock, so a manual clock in
    tests moves them.
    """

    @staticmethod
    def now() -> int:
        return int(_state.get_clock().now())

    @staticmethod
    def new(value: Any = None, /) -> JsDate:
        """``new Date()`` (now), ``new Date(ms)``, ``new Date("2026-11-26T09:00:00Z")``."""
        if value is None:
            return JsDate(float(Date.now()))
        if isinstance(value, JsDate):
            return JsDate(value.getTime())
        if isinstance(value, int | float) and not isinstance(value, bool):
            return JsDate(float(value))
        if isinstance(value, str):
            try:
                moment = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                return JsDate(math.nan)
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=_dt.UTC)
            return JsDate(moment.timestamp() * 1000.0)
        raise TypeError(f"Date.new() expects ms, an ISO string or a Date, got {value!r}")


class JsDate:
    """A JS ``Date`` value: ``getTime()``, ``valueOf()``, ``toISOString()``, ``to_py()``."""

    __slots__ = ("_ms",)

    def __init__(self, ms: float) -> None:
        self._ms = float(int(ms)) if math.isfinite(ms) else math.nan

    def getTime(self) -> float:
        return self._ms

    def valueOf(self) -> float:
        return self._ms

    def toISOString(self) -> str:
        if not math.isfinite(self._ms):
            raise JsException("RangeError", "Invalid time value")
        moment = _dt.datetime.fromtimestamp(self._ms / 1000.0, _dt.UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(self._ms) % 1000:03d}Z"

    def toJSON(self) -> str | None:
        return self.toISOString() if math.isfinite(self._ms) else None

    def to_py(self) -> _dt.datetime:
        return _dt.datetime.fromtimestamp(self._ms / 1000.0, _dt.UTC)

    def __repr__(self) -> str:
        return f"Date({self.toJSON()})"


class JSON:
    """``JSON.stringify`` / ``JSON.parse`` with JS's output format (compact unless ``space``)."""

    @staticmethod
    def stringify(value: Any, replacer: Any = None, space: int | str | None = None) -> str:
        if space is None or space == 0 or space == "":
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        indent = min(space, 10) if isinstance(space, int) else str(space)[:10]
        return json.dumps(value, ensure_ascii=False, indent=indent, separators=(",", ": "))

    @staticmethod
    def parse(text: str | bytes) -> Any:
        return json.loads(text)


def _format(args: tuple[Any, ...]) -> str:
    return " ".join(a if isinstance(a, str) else repr(a) for a in args)


class console:
    """``console.log`` and friends, written to the Python logger ``doemu.console``."""

    @staticmethod
    def log(*args: Any) -> None:
        _console_log.info(_format(args))

    @staticmethod
    def info(*args: Any) -> None:
        _console_log.info(_format(args))

    @staticmethod
    def debug(*args: Any) -> None:
        _console_log.debug(_format(args))

    @staticmethod
    def warn(*args: Any) -> None:
        _console_log.warning(_format(args))

    @staticmethod
    def error(*args: Any) -> None:
        _console_log.error(_format(args))


class Object:
    """``Object.fromEntries`` / ``keys`` / ``values`` / ``entries``.

    ``fromEntries`` makes a plain JavaScript object (a ``JsObject``), which is what
    ``to_js(d, dict_converter=Object.fromEntries)`` hands to a JS API; the others read a JS
    object's own properties, or a Python mapping's items.
    """

    @staticmethod
    def fromEntries(entries: Mapping[Any, Any] | Iterable[Any]) -> JsObject:
        if isinstance(entries, Mapping):
            return JsObject({str(k): v for k, v in entries.items()})
        return JsObject({str(k): v for k, v in entries})

    @staticmethod
    def keys(obj: Mapping[Any, Any] | JsObject) -> JsArray:
        return JsArray(list(_props(obj).keys()))

    @staticmethod
    def values(obj: Mapping[Any, Any] | JsObject) -> JsArray:
        return JsArray(list(_props(obj).values()))

    @staticmethod
    def entries(obj: Mapping[Any, Any] | JsObject) -> JsArray:
        return JsArray([JsArray([k, v]) for k, v in _props(obj).items()])


def _props(obj: Mapping[Any, Any] | JsObject) -> Mapping[Any, Any]:
    return obj.as_object_map() if isinstance(obj, JsObject) else obj


def _init(
    init: Mapping[str, Any] | _FetchResponse | None, kwargs: dict[str, Any]
) -> dict[str, Any]:
    if isinstance(init, _FetchResponse):  # new Response(body, otherResponse)
        options: dict[str, Any] = {
            "status": init._status,
            "statusText": init._status_text,
            "headers": init._headers.copy(),
            "webSocket": init._web_socket,
        }
    else:
        options = dict(to_python(init) or {})
    options.update(kwargs)
    if isinstance(options.get("headers"), JsProxy):
        options["headers"] = to_python(options["headers"])
    return options


def _js_body(body: Any) -> Any:
    """A JS body: typed arrays as bytes; str, streams, FormData and Blob as they are."""
    if isinstance(body, bytearray | memoryview):
        return bytes(body)
    return body


class Response:
    """The JS ``Response`` constructor: ``Response.new(body, init)`` and its static methods.

    Each returns a ``workers.Response``; ``init`` is a JS init dict (``status``, ``statusText``,
    ``headers``, ``webSocket``) given as a mapping or as keyword arguments.
    """

    @staticmethod
    def new(
        body: Any = None, init: Mapping[str, Any] | _FetchResponse | None = None, /, **kwargs: Any
    ) -> _Response:
        """``new Response(body, init)``; ``init`` may also be another response to copy from."""
        options = _init(init, kwargs)
        return _Response(
            _js_body(body),
            status=options.get("status"),
            status_text=options.get("statusText") or "",
            headers=options.get("headers"),
            web_socket=options.get("webSocket"),
        )

    @staticmethod
    def json(data: Any, init: Mapping[str, Any] | None = None, /, **kwargs: Any) -> _Response:
        options = _init(init, kwargs)
        headers = _Headers(options.get("headers"))
        if not headers.has("content-type"):
            headers.set("content-type", "application/json")
        options["headers"] = headers
        return Response.new(JSON.stringify(data), options)

    @staticmethod
    def redirect(url: str, status: int = HTTPStatus.FOUND) -> _Response:
        return _Response.redirect(url, status)


class Request:
    """The JS ``Request`` constructor: ``Request.new(url_or_request, init)``."""

    @staticmethod
    def new(
        input: _Request | str, init: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> _Request:
        options = {**(to_python(init) or {}), **kwargs}
        if isinstance(options.get("headers"), JsProxy):
            options["headers"] = to_python(options["headers"])
        if "body" in options:
            options["body"] = _js_body(options["body"])
        return _Request(input, **options)


class Headers:
    """The JS ``Headers`` constructor: ``Headers.new(init)``."""

    @staticmethod
    def new(init: _HeadersInit | None = None, /) -> _Headers:
        return _Headers(to_python(init))


class WebSocket:
    """The JS ``WebSocket`` constructor: its ready-state constants, and ``new(url)``.

    ``WebSocket.new(url)`` opens an outbound client connection on Cloudflare, which doemu does
    not support yet; server-side sockets come from ``WebSocketPair.new()``.
    """

    CONNECTING = 0
    OPEN = 1
    CLOSING = 2
    CLOSED = 3
    READY_STATE_CONNECTING = 0
    READY_STATE_OPEN = 1
    READY_STATE_CLOSING = 2
    READY_STATE_CLOSED = 3

    @staticmethod
    def new(url: str, protocols: Any = None, /) -> Any:
        raise not_emulated(
            "WebSocket",
            "new",
            "an outbound WebSocket client connection; server-side sockets come from "
            "WebSocketPair.new()",
        )


class WebSocketRequestResponsePair:
    """``new WebSocketRequestResponsePair(request, response)`` for ``setWebSocketAutoResponse``."""

    __slots__ = ("_request", "_response")

    def __init__(self, request: str, response: str) -> None:
        if not isinstance(request, str) or not isinstance(response, str):
            raise TypeError("WebSocketRequestResponsePair expects two strings")
        self._request = request
        self._response = response

    @classmethod
    def new(cls, request: str, response: str) -> WebSocketRequestResponsePair:
        return cls(request, response)

    @property
    def request(self) -> str:
        return self._request

    @property
    def response(self) -> str:
        return self._response

    def __repr__(self) -> str:
        return f"WebSocketRequestResponsePair({self._request!r}, {self._response!r})"
