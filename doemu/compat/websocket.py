"""The ``WebSocket`` and ``WebSocketPair`` user code sees, with Cloudflare's names only.

A pair is two linked ends. User code keeps one end (the *server* end) and returns the other (the
*client* end) in ``Response(None, status=101, web_socket=client)``; whatever one end sends arrives
at the other, and the server bridges the client end to a real connection. Each
:class:`WebSocket` is a thin view onto a :class:`~doemu.compat.socket_end.SocketEnd`, which holds
the state and workerd's rules and is what the rest of doemu works with (:func:`end_of`): so
``dir(ws)`` shows what Cloudflare's ``WebSocket`` has and nothing that would break on deploy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..errors import WebSocketError
from .boundary import websocket_send_value
from .socket_end import (
    MAX_ATTACHMENT_SIZE,
    READY_STATE_CLOSED,
    READY_STATE_CLOSING,
    READY_STATE_OPEN,
    SocketEnd,
)
from .ws_events import CloseEvent, ErrorEvent, Event, MessageEvent

__all__ = [
    "MAX_ATTACHMENT_SIZE",
    "CloseEvent",
    "ErrorEvent",
    "Event",
    "MessageEvent",
    "WebSocket",
    "WebSocketPair",
    "end_of",
]


class WebSocket:
    """One end of a ``WebSocketPair`` (Cloudflare's ``WebSocket``, camelCase as in JS)."""

    __slots__ = ("_end",)

    READY_STATE_CONNECTING = 0
    READY_STATE_OPEN = READY_STATE_OPEN
    READY_STATE_CLOSING = READY_STATE_CLOSING
    READY_STATE_CLOSED = READY_STATE_CLOSED
    CONNECTING = 0
    OPEN = READY_STATE_OPEN
    CLOSING = READY_STATE_CLOSING
    CLOSED = READY_STATE_CLOSED

    def __init__(self, end: SocketEnd) -> None:
        """doemu-internal: user code gets sockets from ``WebSocketPair.new()``."""
        self._end = end
        end.socket = self

    @property
    def readyState(self) -> int:
        return self._end.ready_state

    @property
    def url(self) -> str | None:
        return self._end.url

    @property
    def protocol(self) -> str | None:
        return self._end.protocol

    @property
    def extensions(self) -> str | None:
        return self._end.extensions

    @property
    def binaryType(self) -> str:
        return self._end.binary_type

    @binaryType.setter
    def binaryType(self, value: str) -> None:
        self._end.set_binary_type(value)

    def accept(self, options: Mapping[str, Any] | None = None) -> None:
        """Handle this end in the worker itself (events go to ``addEventListener`` listeners)."""
        self._end.accept(options)

    def send(self, message: str | bytes | bytearray | memoryview) -> None:
        """A text frame for a ``str``, a binary one for a JS buffer (``to_js(bytes)``, a
        ``TextEncoder`` result); see :func:`~doemu.compat.boundary.websocket_send_value`."""
        self._end.send(websocket_send_value(message))

    def close(self, code: int | None = None, reason: str | None = None) -> None:
        self._end.close(code, reason)

    def serializeAttachment(self, value: Any) -> None:
        """Keep a structured-clone copy of ``value`` (at most 16 KiB serialized)."""
        self._end.serialize_attachment(value)

    def deserializeAttachment(self) -> Any:
        """A fresh copy of the attachment, or ``None`` when none was set."""
        return self._end.deserialize_attachment()

    def addEventListener(
        self, type: str, listener: Callable[[Any], Any], options: Any = None
    ) -> None:
        self._end.add_listener(type, listener)

    def removeEventListener(
        self, type: str, listener: Callable[[Any], Any], options: Any = None
    ) -> None:
        self._end.remove_listener(type, listener)

    def __repr__(self) -> str:
        return f"<WebSocket readyState={self.readyState} at {id(self):#x}>"


def end_of(ws: Any) -> SocketEnd:
    """The end behind a user-facing ``WebSocket`` (what the runtime and the server work with)."""
    if not isinstance(ws, WebSocket):
        raise WebSocketError(
            f"expected a WebSocket from WebSocketPair.new(), got {type(ws).__name__}"
        )
    return ws._end


class WebSocketPair:
    """``new WebSocketPair()``: two linked ends, ``(client, server)`` by convention.

    Unpacks directly (``client, server = WebSocketPair.new()``) and through
    ``object_values()`` (``Object.values(pair)``), and indexes as ``pair[0]`` / ``pair[1]``.
    """

    __slots__ = ("_sockets",)

    def __init__(self, first: WebSocket, second: WebSocket) -> None:
        """doemu-internal; user code calls ``WebSocketPair.new()``."""
        first._end.peer = second._end
        second._end.peer = first._end
        self._sockets = (first, second)

    @classmethod
    def new(cls) -> WebSocketPair:
        return cls(WebSocket(SocketEnd()), WebSocket(SocketEnd()))

    def object_values(self) -> tuple[WebSocket, WebSocket]:
        return self._sockets

    def __iter__(self) -> Iterator[WebSocket]:
        return iter(self._sockets)

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int | str) -> WebSocket:
        return self._sockets[int(index)]

    def __repr__(self) -> str:
        return f"WebSocketPair({self._sockets[0]!r}, {self._sockets[1]!r})"
