"""The ``WebSocket`` that ``WebSocketPair.new()`` creates, with workerd's rules and error texts.

A pair is two linked ends. User code keeps one end (the *server* end) and returns the other (the
*client* end) in ``Response(None, status=101, web_socket=client)``; whatever one end sends arrives
at the other. In doemu the client end is bridged by the server to a real ASGI WebSocket.

Internal hooks (for the runtime and the server; never part of the Cloudflare surface)
--------------------------------------------------------------------------------------
``_sink: Callable[[str | bytes], None] | None``
    Receives each message sent *to* this end by its peer. Without a sink, an accepted
    (``accept()``) end dispatches a ``message`` event to its listeners; otherwise the message is
    queued in ``_inbox`` (a deque, drained by whoever installs a sink later).
``_close_sink: Callable[[int, str, bool], None] | None``
    Receives ``(code, reason, was_clean)`` of the close the peer sent (code ``1005`` when
    ``close()`` had no code; ``was_clean=False`` when the remote side vanished).
``_error_sink: Callable[[BaseException], None] | None``
    Receives the error that broke the connection (once). Without it, an accepted end raises an
    ``error`` event.
``_before_send: Callable[[], None] | None``
    Called before every ``send``/``close`` leaves this end (the output gate: commit writes first).
``_forward(message)``, ``_forward_close(code, reason, was_clean)``, ``_forward_error(error)``
    Network → worker: call these on the *client* end; they reach the server end as if the remote
    peer had sent them (no state checks on the client end, which is "used in a response").
    A disconnect without a close frame is ``_forward_close(1006, "...", False)``.
``_couple()``
    The server takes the client end from a 101 Response (validates like workerd, then marks it
    used). ``_accept_hibernatable()`` / ``_bind_host(host)`` do what ``ctx.acceptWebSocket``
    needs: validation with workerd's texts, then hibernatable state (``_bind_host`` also routes
    ``_before_send`` to ``host.output_gate``). Call them *before* registering the socket.
``_attachment: bytes | None``
    The encoded attachment (``doemu.clone.encode``), what hibernation persists and restores.
``_auto_reply_close: bool``
    When an accepted end receives a close it has not sent itself, it answers with the same close
    (workerd's ``web_socket_auto_reply_to_close``, the default from compatibility date
    2026-04-07; set it to ``False`` on the class or an instance for older dates).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import WebSocketError
from .pyodide.ffi import _as_js_buffer

__all__ = [
    "MAX_ATTACHMENT_SIZE",
    "CloseEvent",
    "ErrorEvent",
    "Event",
    "MessageEvent",
    "WebSocket",
    "WebSocketPair",
]

_log = logging.getLogger("doemu.websocket")

#: workerd's ``WebSocket::MAX_ATTACHMENT_SIZE`` (bytes of the serialized attachment).
MAX_ATTACHMENT_SIZE = 16 * 1024
#: Close frames carry at most 125 payload bytes: a 2-byte code and up to 123 bytes of reason.
MAX_CLOSE_REASON_BYTES = 123

Message = str | bytes

_MUST_ACCEPT = (
    "You must call one of accept() or state.acceptWebSocket() on this WebSocket before sending "
    "messages."
)
_INVALID_CLOSE_CODES = frozenset({1004, 1005, 1006, 1015})
_BINARY_TYPES = frozenset({"blob", "arraybuffer"})

# Listener coroutines run as tasks; keep them referenced until they finish.
_listener_tasks: set[asyncio.Task[Any]] = set()


class Event:
    """A DOM-style event as WebSocket listeners receive it."""

    __slots__ = ("type",)

    def __init__(self, type: str) -> None:
        self.type = type

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.type!r})"


class MessageEvent(Event):
    __slots__ = ("data",)

    def __init__(self, data: Message) -> None:
        super().__init__("message")
        self.data: Any = _as_js_buffer(data) if isinstance(data, bytes) else data


class CloseEvent(Event):
    __slots__ = ("code", "reason", "wasClean")

    def __init__(self, code: int, reason: str, wasClean: bool) -> None:
        super().__init__("close")
        self.code = code
        self.reason = reason
        self.wasClean = wasClean


class ErrorEvent(Event):
    __slots__ = ("error", "message")

    def __init__(self, error: BaseException) -> None:
        super().__init__("error")
        self.error = error
        self.message = str(error)


class WebSocket:
    """One end of a ``WebSocketPair`` (Cloudflare's ``WebSocket``, camelCase as in JS)."""

    READY_STATE_CONNECTING = 0
    READY_STATE_OPEN = 1
    READY_STATE_CLOSING = 2
    READY_STATE_CLOSED = 3
    CONNECTING = 0
    OPEN = 1
    CLOSING = 2
    CLOSED = 3

    _auto_reply_close = True

    def __init__(
        self, *, url: str | None = None, protocol: str | None = "", extensions: str | None = ""
    ) -> None:
        """doemu-internal: user code gets sockets from ``WebSocketPair.new()``."""
        self._url = url
        self._protocol = protocol
        self._extensions = extensions
        self._binary_type = "blob"
        self._peer: WebSocket | None = None
        self._accepted = False
        self._hibernatable = False
        self._released = False
        self._closed_outgoing = False
        self._closed_incoming = False
        self._outgoing_aborted = False
        self._error: BaseException | None = None
        self._attachment: bytes | None = None
        self._listeners: dict[str, list[Callable[[Any], Any]]] = {}
        self._inbox: deque[Message | Event] = deque()
        self._sink: Callable[[Message], None] | None = None
        self._close_sink: Callable[[int, str, bool], None] | None = None
        self._error_sink: Callable[[BaseException], None] | None = None
        self._before_send: Callable[[], None] | None = None
        self._host: Any = None

    @classmethod
    def new(cls, *_args: Any, **_kwargs: Any) -> WebSocket:
        """``new WebSocket(url)`` opens an outbound connection, which doemu does not support."""
        raise NotImplementedError(
            "doemu does not support outbound WebSockets (js.WebSocket.new(url)); "
            "use WebSocketPair.new() for server-side sockets"
        )

    # -- properties ------------------------------------------------------------------------------
    @property
    def readyState(self) -> int:
        if (self._closed_incoming and self._closed_outgoing) or self._error is not None:
            return self.READY_STATE_CLOSED
        if self._closed_incoming or self._closed_outgoing:
            return self.READY_STATE_CLOSING
        return self.READY_STATE_OPEN

    @property
    def url(self) -> str | None:
        return self._url

    @property
    def protocol(self) -> str | None:
        return self._protocol

    @property
    def extensions(self) -> str | None:
        return self._extensions

    @property
    def binaryType(self) -> str:
        return self._binary_type

    @binaryType.setter
    def binaryType(self, value: str) -> None:
        if value in _BINARY_TYPES:  # other values are ignored, as in browsers
            self._binary_type = value

    # -- the JS methods --------------------------------------------------------------------------
    def accept(self, options: Mapping[str, Any] | None = None) -> None:
        """Handle this end in the worker itself (events go to ``addEventListener`` listeners)."""
        if self._released:
            raise WebSocketError("Can't accept() WebSocket that was already used in a response.")
        if self._hibernatable:
            raise WebSocketError("Can't accept() WebSocket after enabling hibernation.")
        if options is not None and options.get("allowHalfOpen"):
            self._auto_reply_close = False
        if self._accepted:
            return
        self._accepted = True
        try:
            asyncio.get_running_loop().call_soon(self._flush_inbox)
        except RuntimeError:
            self._flush_inbox()

    def send(self, message: str | bytes | bytearray | memoryview) -> None:
        if isinstance(message, bytearray | memoryview):
            message = bytes(message)
        elif not isinstance(message, str | bytes):
            raise TypeError(f"WebSocket send() expects str or bytes, got {type(message).__name__}")
        if self._closed_outgoing:
            raise WebSocketError("Can't call WebSocket send() after close().")
        if self._outgoing_aborted or self._released:
            return  # the spec: sends after the connection is gone are silently dropped
        if not self._accepted:
            raise WebSocketError(_MUST_ACCEPT)
        if self._before_send is not None:
            self._before_send()
        if self._peer is not None:
            self._peer._receive(message)

    def close(self, code: int | None = None, reason: str | None = None) -> None:
        if self._closed_outgoing or self._outgoing_aborted or self._released:
            return  # a second close() is ignored, as in workerd
        if not self._accepted:
            raise WebSocketError(_MUST_ACCEPT)
        if self._error is not None:
            raise self._error
        if code is not None:
            if isinstance(code, bool) or not isinstance(code, int):
                raise TypeError(f"WebSocket close code must be an integer, got {code!r}")
            if not 1000 <= code < 5000 or code in _INVALID_CLOSE_CODES:
                raise WebSocketError(f"Invalid WebSocket close code: {code}.")
        if reason is not None:
            if code is None:
                raise WebSocketError(
                    "If you specify a WebSocket close reason, you must also specify a code."
                )
            if len(str(reason).encode()) > MAX_CLOSE_REASON_BYTES:
                raise WebSocketError(
                    f"The WebSocket close reason must not be longer than "
                    f"{MAX_CLOSE_REASON_BYTES} bytes (UTF-8)."
                )
        if self._before_send is not None:
            self._before_send()
        self._closed_outgoing = True
        if self._peer is not None:
            self._peer._receive_close(1005 if code is None else code, str(reason or ""), True)

    def serializeAttachment(self, value: Any) -> None:
        """Keep a structured-clone copy of ``value`` (at most 16 KiB serialized)."""
        from .. import clone

        data = clone.encode(value)
        if len(data) > MAX_ATTACHMENT_SIZE:
            # workerd's text, including its missing space after "bytes.".
            raise WebSocketError(
                f"A WebSocket 'attachment' cannot be larger than {MAX_ATTACHMENT_SIZE} bytes."
                f"'attachment' was {len(data)} bytes."
            )
        self._attachment = data

    def deserializeAttachment(self) -> Any:
        """A fresh copy of the attachment, or ``None`` when none was set."""
        if self._attachment is None:
            return None
        from .. import clone

        return clone.decode(self._attachment)

    def addEventListener(
        self, type: str, listener: Callable[[Any], Any], options: Any = None
    ) -> None:
        listeners = self._listeners.setdefault(type, [])
        if listener not in listeners:
            listeners.append(listener)
        if self._accepted and not self._hibernatable:
            self._flush_inbox()

    def removeEventListener(
        self, type: str, listener: Callable[[Any], Any], options: Any = None
    ) -> None:
        listeners = self._listeners.get(type)
        if listeners and listener in listeners:
            listeners.remove(listener)

    def __repr__(self) -> str:
        return f"<WebSocket readyState={self.readyState} at {id(self):#x}>"

    # -- internal: what arrives at this end ------------------------------------------------------
    @property
    def _dispatching(self) -> bool:
        """Whether events go to listeners (an ``accept()``-ed, non-hibernatable end)."""
        return self._accepted and not self._hibernatable

    def _receive(self, message: Message) -> None:
        """A message sent to this end by its peer."""
        if self._closed_incoming:
            return
        if self._sink is not None:
            self._sink(message)
        elif self._dispatching and not self._inbox and self._listeners.get("message"):
            self._dispatch(MessageEvent(message))
        else:
            self._inbox.append(message)

    def _receive_close(self, code: int, reason: str, was_clean: bool = True) -> None:
        """The peer closed (or, for ``was_clean=False``, vanished)."""
        if self._closed_incoming:
            return
        self._closed_incoming = True
        if self._close_sink is not None:
            self._close_sink(code, reason, was_clean)
        elif self._dispatching:
            self._queue_or_dispatch(CloseEvent(code, reason, was_clean))
        elif not self._hibernatable:
            self._inbox.append(CloseEvent(code, reason, was_clean))
        if (
            self._auto_reply_close
            and self._accepted
            and was_clean
            and not self._closed_outgoing
            and self._error is None
        ):
            self._closed_outgoing = True
            if self._peer is not None:
                self._peer._receive_close(code, reason, True)

    def _receive_error(self, error: BaseException) -> None:
        """The connection failed: the end is closed and an ``error`` event is raised once."""
        if self._error is not None:
            return
        self._error = error
        self._outgoing_aborted = True
        if self._error_sink is not None:
            self._error_sink(error)
        elif self._dispatching:
            self._queue_or_dispatch(ErrorEvent(error))
        elif not self._hibernatable:
            self._inbox.append(ErrorEvent(error))

    def _queue_or_dispatch(self, event: Event) -> None:
        if not self._inbox and self._listeners.get(event.type):
            self._dispatch(event)
        else:
            self._inbox.append(event)

    def _flush_inbox(self) -> None:
        """Deliver queued messages/events in order while someone listens for the next one."""
        if not self._dispatching:
            return
        while self._inbox:
            item = self._inbox[0]
            event = item if isinstance(item, Event) else MessageEvent(item)
            if not self._listeners.get(event.type):
                return
            self._inbox.popleft()
            self._dispatch(event)

    def _dispatch(self, event: Event) -> None:
        for listener in list(self._listeners.get(event.type, ())):
            try:
                result = listener(event)
            except Exception:
                _log.exception("uncaught error in a WebSocket %r listener", event.type)
                continue
            if inspect.isawaitable(result):
                _schedule(result, event.type)

    # -- internal: the runtime's and the server's hooks ------------------------------------------
    def _forward(self, message: Message) -> None:
        """Network → worker: ``message`` arrived on the connection behind this (client) end."""
        if self._peer is not None:
            self._peer._receive(message)

    def _forward_close(self, code: int, reason: str = "", was_clean: bool = True) -> None:
        """Network → worker: the remote peer closed (``was_clean=False``: it just vanished)."""
        self._closed_outgoing = True
        if self._peer is not None:
            self._peer._receive_close(code, reason, was_clean)

    def _forward_error(self, error: BaseException) -> None:
        """Network → worker: the connection behind this (client) end failed."""
        self._outgoing_aborted = True
        if self._peer is not None:
            self._peer._receive_error(error)

    def _couple(self) -> None:
        """The server takes this end out of a 101 Response to bridge it to the network."""
        if self._released:
            raise WebSocketError("Can't return WebSocket that was already used in a response.")
        if self._hibernatable:
            raise WebSocketError(
                "Can't return WebSocket in a Response after calling acceptWebSocket()."
            )
        if self._accepted:
            raise WebSocketError("Can't return WebSocket in a Response after calling accept().")
        self._released = True

    def _accept_hibernatable(self) -> None:
        """What ``ctx.acceptWebSocket(ws)`` does to the socket itself (tags are the host's)."""
        if self._accepted:
            raise WebSocketError(
                "Cannot call `acceptWebSocket()` if the WebSocket was already accepted via "
                "`accept()`"
            )
        peer = self._peer
        if peer is None or peer._accepted or peer._released:
            raise WebSocketError(
                "Cannot call `acceptWebSocket()` on this WebSocket because its pair has already "
                "been accepted or used in a Response."
            )
        self._accepted = True
        self._hibernatable = True

    def _bind_host(self, host: Any) -> None:
        """``ctx.acceptWebSocket``: become hibernatable and send through ``host.output_gate``."""
        self._accept_hibernatable()
        self._host = host
        gate = getattr(host, "output_gate", None)
        if gate is not None:
            self._before_send = gate


def _schedule(awaitable: Any, event_type: str) -> None:
    async def run() -> None:
        try:
            await awaitable
        except Exception:
            _log.exception("uncaught error in a WebSocket %r listener", event_type)

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        if inspect.iscoroutine(awaitable):
            awaitable.close()
        _log.warning("async WebSocket %r listener called outside an event loop", event_type)
        return
    task = loop.create_task(run())
    _listener_tasks.add(task)
    task.add_done_callback(_listener_tasks.discard)


class WebSocketPair:
    """``new WebSocketPair()``: two linked ends, ``(client, server)`` by convention.

    Unpacks directly (``client, server = WebSocketPair.new()``) and through
    ``object_values()`` (``Object.values(pair)``), and indexes as ``pair[0]`` / ``pair[1]``.
    """

    __slots__ = ("_sockets",)

    def __init__(self, first: WebSocket, second: WebSocket) -> None:
        """doemu-internal; user code calls ``WebSocketPair.new()``."""
        first._peer = second
        second._peer = first
        self._sockets = (first, second)

    @classmethod
    def new(cls) -> WebSocketPair:
        return cls(WebSocket(), WebSocket())

    def object_values(self) -> tuple[WebSocket, WebSocket]:
        return self._sockets

    def __iter__(self) -> Any:
        return iter(self._sockets)

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int | str) -> WebSocket:
        return self._sockets[int(index)]

    def __repr__(self) -> str:
        return f"WebSocketPair({self._sockets[0]!r}, {self._sockets[1]!r})"
