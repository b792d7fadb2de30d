"""The ``js`` module of Python Workers: the JavaScript globals user code imports by name.

On Cloudflare, ``from js import X`` gives a proxy of the JS global ``X``, and ``X.new(...)`` calls
its constructor. doemu implements, in Python, the globals Durable Object code commonly uses (see
:mod:`doemu.compat.jsglobals`, :mod:`doemu.compat.readable`, :mod:`doemu.compat.writable`,
:mod:`doemu.compat.text`); this module holds exactly those names and nothing else, so an import
that works here works on Cloudflare.
"""

from doemu.compat.jsglobals import (
    JSON,
    Date,
    Headers,
    Object,
    Request,
    Response,
    WebSocket,
    WebSocketPair,
    WebSocketRequestResponsePair,
    console,
)
from doemu.compat.readable import ReadableStream
from doemu.compat.text import TextDecoder, TextEncoder
from doemu.compat.writable import TransformStream, WritableStream

__all__ = [
    "JSON",
    "Date",
    "Headers",
    "Object",
    "ReadableStream",
    "Request",
    "Response",
    "TextDecoder",
    "TextEncoder",
    "TransformStream",
    "WebSocket",
    "WebSocketPair",
    "WebSocketRequestResponsePair",
    "WritableStream",
    "console",
]
