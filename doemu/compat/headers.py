"""``Headers``: a case-insensitive multi-dict of HTTP headers, with workerd's validation; and
``HTTPMessageMapping``, what ``request.headers`` / ``response.headers`` give Python on Cloudflare.

Names and values must be WebIDL ``ByteString``s (they go on the wire as Latin-1), names are
tokens, values are trimmed and may not contain CR, LF or NUL: each refusal is a ``TypeError``
with workerd's (V8's) text.

:class:`Headers` is the JavaScript ``Headers`` object (``js.Headers``) and doemu's own store of a
request's or a response's headers. Python code on Cloudflare never sees it from
``request.headers``: the SDK converts the JS ``Headers`` into a new ``http.client.HTTPMessage``
(a :class:`HTTPMessageMapping`) on each access, with email semantics (``h[k] = v`` *adds* a
header), and that object is not a ``headers=`` argument ``Request``/``Response`` take (observed on
workerd, ``e2e/differential/test_boundary.py``). :func:`http_message` builds the same;
:func:`check_headers_init` refuses what the SDK refuses.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Union

from ..jsboundary import hinted, is_strict

__all__ = [
    "TOKEN",
    "HTTPMessageMapping",
    "Headers",
    "HeadersInit",
    "check_fetch_headers",
    "check_headers_init",
    "http_message",
    "to_headers",
]

HeadersInit = Union["Headers", Mapping[str, str], Iterable[tuple[str, str]]]

#: An HTTP token (header names and methods).
TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_HTTP_WS = " \t\r\n"


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
    if not isinstance(name, str) or not TOKEN.match(name):
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

    It is ``js.Headers`` and doemu's store of a request's or response's headers, and what
    ``request.headers`` is under ``--lenient`` (by default it is an :class:`HTTPMessageMapping`,
    as on Cloudflare). It answers both ways user code reads headers: like the JS ``Headers``
    (``get``, ``set``, ``append``, ``has``, ``delete``, ``getSetCookie``, ``entries``) and like
    the ``http.client.HTTPMessage`` that ``request.headers`` is on Cloudflare (``h["name"]`` returns
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
        pairs: Iterable[Any] = init.items() if _has_items(init) else init  # type: ignore[union-attr]
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
        entries = self._entries
        if len({k for k, _ in entries}) == len(entries):  # no repeats (the usual case)
            return sorted(entries, key=_name_of)
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


def _name_of(entry: tuple[str, str]) -> str:
    return entry[0]


def to_headers(headers: HeadersInit | None) -> Headers:
    return Headers(headers) if headers is not None else Headers()


if TYPE_CHECKING:
    import http.client

    class HTTPMessageMapping(http.client.HTTPMessage, Mapping[str, str]):  # type: ignore[misc]
        """``request.headers`` / ``response.headers`` on Cloudflare (see :func:`_message_class`)."""

else:

    def __getattr__(name: str) -> Any:
        if name == "HTTPMessageMapping":
            return _message_class()
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_message_classes: list[type[Any]] = []


def _message_class() -> type[HTTPMessageMapping]:
    """``HTTPMessageMapping``, made on first use: ``http.client`` imports the email parser, a few
    milliseconds of start-up that a worker which never reads ``request.headers`` should not pay.
    """
    if not _message_classes:
        import http.client

        class HTTPMessageMapping(http.client.HTTPMessage, Mapping[str, str]):  # type: ignore[misc]
            """``request.headers`` / ``response.headers`` on Cloudflare: an
            ``http.client.HTTPMessage`` that is also a ``Mapping`` (the SDK's class of this name).

            Email semantics: ``h[name]`` is the first value or ``None``, ``h[name] = value``
            *adds* a header, ``del h[name]`` removes all, ``get_all`` lists them; reads are
            case-insensitive.
            """

        HTTPMessageMapping.__module__, HTTPMessageMapping.__qualname__ = (
            __name__,
            "HTTPMessageMapping",
        )
        _message_classes.append(HTTPMessageMapping)
    return _message_classes[0]


def _has_items(init: object) -> bool:
    """Whether ``init`` is a mapping or an ``email.message.Message`` (``HTTPMessage``); the
    latter only exists once ``email.message`` is imported, which this module does not do."""
    if isinstance(init, Mapping):
        return True
    message = sys.modules.get("email.message")
    return message is not None and isinstance(init, message.Message)


def http_message(headers: Headers) -> HTTPMessageMapping:
    """A new :class:`HTTPMessageMapping` of ``headers``, built as the SDK builds it from a JS
    ``Headers``: in JS iteration order (names lowercased and sorted, repeated values joined with
    ``", "``, each ``set-cookie`` on its own). Nothing is shared: changing it changes nothing."""
    message = _message_class()()
    for name, value in headers._combined():
        message[name] = value
    return message


_UNEXPECTED = "Received unexpected type for headers argument"
_ADVICE = (
    "headers= takes a dict, a list of (name, value) pairs or a js.Headers; "
    "request.headers / response.headers is an http.client.HTTPMessage on Cloudflare, so pass "
    "list(headers.items()) (keeps repeated headers) or dict(headers)"
)


def check_headers_init(headers: object) -> None:
    """Refuse a ``headers=`` argument of ``Request``/``Response`` that the SDK refuses: anything
    but a ``list``, a ``dict`` or a JS ``Headers`` (an ``HTTPMessage``, a tuple, ``None`` given
    to ``Request``…), with its ``TypeError``. Nothing is refused under ``--lenient``."""
    if not is_strict() or isinstance(headers, list | dict | Headers):
        return
    raise hinted(TypeError(_UNEXPECTED), f"{_ADVICE} (got {type(headers).__name__})")


def check_fetch_headers(headers: object) -> None:
    """Refuse a ``headers=`` argument of ``fetch``/``stub.fetch`` that Pyodide cannot hand to
    JavaScript: ``to_js`` converts a dict, list or tuple; anything else (an ``HTTPMessage``)
    reaches the JS ``Headers`` constructor as a proxy, which on Cloudflare is a *fatal* Pyodide
    error that aborts the isolate (observed on workerd). doemu raises its text instead."""
    if not is_strict() or headers is None or isinstance(headers, list | tuple | dict | Headers):
        return
    raise hinted(
        TypeError("Incorrect type: the provided value is not of type 'Sequence'."),
        "on Cloudflare this is a fatal Pyodide error that kills the whole isolate (every "
        f"request in flight fails); {_ADVICE} (got {type(headers).__name__})",
    )
