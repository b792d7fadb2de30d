"""One end of a ``WebSocketPair``: its state, workerd's rules, and the runtime's handle on it.

User code never sees a :class:`SocketEnd`: it holds a :class:`~doemu.compat.websocket.WebSocket`,
which has Cloudflare's names only and delegates here. Everything else in doemu (the server's
bridge to the network, the object's socket registry, hibernation) works with ends, through the
plain methods and attributes below:

``peer``
    The other end of the pair: whatever this end sends arrives there (``receive``).
``sink(message)``, ``close_sink(code, reason, was_clean)``, ``error_sink(error)``
    Where what arrives at this end goes. Without a sink an ``accept()``-ed end dispatches DOM
    events to its listeners; otherwise messages wait in ``inbox`` for whoever installs a sink
    (the server's bridge drains what the object sent before the handshake completed).
``before_send()``
    Called before each send or close leaves this end: the object's output gate. It returns what
    the frame must wait for (None: nothing); frames that wait are kept in ``held`` and leave in
    order (:class:`~doemu.compat.held.HeldOutput`).
``forward*``
    Network → worker, called on the *client* end: they reach the server end as if the remote
    peer had sent them. A disconnect without a Close frame is ``forward_close(1006, ..., False)``.
``couple()``, ``bind(before_send)``, ``discard()``
    The server takes the client end out of a 101 response (validated like workerd);
    ``ctx.acceptWebSocket`` makes the server end hibernatable; a server end whose client never
    reached the network is forgotten by whoever accepted it (``on_discard``).
``attachment``
    The encoded attachment (``doemu.clone``), what hibernation keeps.
``auto_reply_close``
    An accepted end that receives a close it has not sent answers with the same close (workerd's
    ``web_socket_auto_reply_to_close``, the default from compatibility date 2026-04-07);
    ``accept({"allowHalfOpen": True})`` turns it off.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import WebSocketError
from ..jsboundary import is_strict
from . import _state
from .held import HeldOutput
from .jsclone import decode_js, encode_js
from .jsvalues import jsnull
from .ws_events import CloseEvent, ErrorEvent, Event, Message, MessageEvent

__all__ = ["MAX_ATTACHMENT_SIZE", "MAX_CLOSE_REASON_BYTES", "SocketEnd"]

_log = logging.getLogger("doemu.websocket")

#: workerd's ``WebSocket::MAX_ATTACHMENT_SIZE`` (bytes of the serialized attachment).
MAX_ATTACHMENT_SIZE = 16 * 1024
#: Close frames carry at most 125 payload bytes: a 2-byte code and up to 123 bytes of reason.
MAX_CLOSE_REASON_BYTES = 123

READY_STATE_OPEN = 1
READY_STATE_CLOSING = 2
READY_STATE_CLOSED = 3

_MUST_ACCEPT = (
    "You must call one of accept() or state.acceptWebSocket() on this WebSocket before sending "
    "messages."
)
_INVALID_CLOSE_CODES = frozenset({1004, 1005, 1006, 1015})
_BINARY_TYPES = frozenset({"blob", "arraybuffer"})

# Listener coroutines run as tasks; keep them referenced until they finish.
_listener_tasks: set[asyncio.Task[Any]] = set()


class SocketEnd:
    """The state of one end of a pair; see the module docstring."""

    __slots__ = (
        "accepted",
        "attachment",
        "auto_reply_close",
        "before_send",
        "binary_type",
        "close_sink",
        "closed_incoming",
        "closed_outgoing",
        "error",
        "error_sink",
        "extensions",
        "held",
        "hibernatable",
        "inbox",
        "listeners",
        "on_discard",
        "outgoing_aborted",
        "peer",
        "protocol",
        "released",
        "sink",
        "socket",
        "url",
    )

    def __init__(
        self, *, url: str | None = None, protocol: str | None = "", extensions: str | None = ""
    ) -> None:
        self.url = url
        self.protocol = protocol
        self.extensions = extensions
        self.binary_type = "blob"
        self.peer: SocketEnd | None = None
        #: The user-facing WebSocket of this end (set by it).
        self.socket: Any = None
        self.accepted = False
        self.hibernatable = False
        self.released = False
        self.closed_outgoing = False
        self.closed_incoming = False
        self.outgoing_aborted = False
        self.error: BaseException | None = None
        self.attachment: bytes | None = None
        self.listeners: dict[str, list[Callable[[Any], Any]]] = {}
        self.inbox: deque[Message | Event] = deque()
        self.sink: Callable[[Message], None] | None = None
        self.close_sink: Callable[[int, str, bool], None] | None = None
        self.error_sink: Callable[[BaseException], None] | None = None
        self.before_send: Callable[[], asyncio.Future[None] | None] | None = None
        #: Frames waiting behind the output gate (made on the first one that has to wait).
        self.held: HeldOutput | None = None
        self.on_discard: Callable[[], None] | None = None
        self.auto_reply_close = True

    @property
    def ready_state(self) -> int:
        if (self.closed_incoming and self.closed_outgoing) or self.error is not None:
            return READY_STATE_CLOSED
        if self.closed_incoming or self.closed_outgoing:
            return READY_STATE_CLOSING
        return READY_STATE_OPEN

    def set_binary_type(self, value: str) -> None:
        if value in _BINARY_TYPES:  # other values are ignored, as in browsers
            self.binary_type = value

    # -- what user code does (through the WebSocket) -----------------------------------------------
    def accept(self, options: Mapping[str, Any] | None = None) -> None:
        """Handle this end in the worker itself (events go to ``addEventListener`` listeners)."""
        if self.released:
            raise WebSocketError("Can't accept() WebSocket that was already used in a response.")
        if self.hibernatable:
            raise WebSocketError("Can't accept() WebSocket after enabling hibernation.")
        if options is not None and options.get("allowHalfOpen"):
            self.auto_reply_close = False
        if self.accepted:
            return
        self.accepted = True
        if self.before_send is None:  # inside an object, its frames pass the output gate too
            self.before_send = _state.before_output
        try:
            asyncio.get_running_loop().call_soon(self.flush_inbox)
        except RuntimeError:
            self.flush_inbox()

    def send(self, message: str | bytes | bytearray | memoryview) -> None:
        if isinstance(message, bytearray | memoryview):
            message = bytes(message)
        elif not isinstance(message, str | bytes):
            raise WebSocketError(
                f"WebSocket send() expects str or bytes, got {type(message).__name__}"
            )
        if self.closed_outgoing:
            raise WebSocketError("Can't call WebSocket send() after close().")
        if self.outgoing_aborted or self.released:
            return  # the spec: sends after the connection is gone are silently dropped
        if not self.accepted:
            raise WebSocketError(_MUST_ACCEPT)
        peer = self.peer
        if peer is None:
            return
        barrier = self.before_send() if self.before_send is not None else None
        if barrier is None and self.held is None:
            peer.receive(message)
        else:
            self._hold(barrier, functools.partial(peer.receive, message))

    def close(self, code: int | None = None, reason: str | None = None) -> None:
        if self.closed_outgoing or self.outgoing_aborted or self.released:
            return  # a second close() is ignored, as in workerd
        if not self.accepted:
            raise WebSocketError(_MUST_ACCEPT)
        if self.error is not None:
            raise self.error
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
        barrier = self.before_send() if self.before_send is not None else None
        self.closed_outgoing = True
        peer = self.peer
        if peer is not None:
            deliver = functools.partial(
                peer.receive_close, 1005 if code is None else code, str(reason or ""), True
            )
            if barrier is None and self.held is None:
                deliver()
            else:
                self._hold(barrier, deliver)

    def _hold(self, barrier: asyncio.Future[None] | None, deliver: Callable[[], None]) -> None:
        """Send behind the output gate, after whatever this end already holds."""
        if self.held is None:
            self.held = HeldOutput(self._gate_failed)
        self.held.send(barrier, deliver)

    def _gate_failed(self, error: BaseException) -> None:
        """The writes a held frame waited for failed: it never leaves; the peer sees an error."""
        _log.error("WebSocket output dropped: the storage writes before it failed: %s", error)
        self.outgoing_aborted = True
        if self.peer is not None:
            self.peer.receive_error(WebSocketError(f"the sending Durable Object failed: {error}"))

    def serialize_attachment(self, value: Any) -> None:
        """Keep a structured-clone copy of ``value`` (at most 16 KiB serialized): a JavaScript
        value, as on Cloudflare (see :mod:`doemu.compat.jsclone`)."""
        data = encode_js(value)
        if len(data) > MAX_ATTACHMENT_SIZE:
            # workerd's text, including its missing space after "bytes.".
            raise WebSocketError(
                f"A WebSocket 'attachment' cannot be larger than {MAX_ATTACHMENT_SIZE} bytes."
                f"'attachment' was {len(data)} bytes."
            )
        self.attachment = data

    def deserialize_attachment(self) -> Any:
        """A fresh copy of the attachment as JavaScript values, or ``jsnull`` when none was set
        (``None`` under ``--lenient``)."""
        if self.attachment is None:
            return jsnull if is_strict() else None
        return decode_js(self.attachment)

    def add_listener(self, type: str, listener: Callable[[Any], Any]) -> None:
        listeners = self.listeners.setdefault(type, [])
        if listener not in listeners:
            listeners.append(listener)
        if self.accepted and not self.hibernatable:
            self.flush_inbox()

    def remove_listener(self, type: str, listener: Callable[[Any], Any]) -> None:
        listeners = self.listeners.get(type)
        if listeners and listener in listeners:
            listeners.remove(listener)

    # -- what arrives at this end from its peer ----------------------------------------------------
    @property
    def dispatching(self) -> bool:
        """Whether events go to listeners (an ``accept()``-ed, non-hibernatable end)."""
        return self.accepted and not self.hibernatable

    def receive(self, message: Message) -> None:
        """A message sent to this end by its peer."""
        if self.closed_incoming:
            return
        if self.sink is not None:
            self.sink(message)
        elif self.dispatching and not self.inbox and self.listeners.get("message"):
            self._dispatch(MessageEvent(message))
        else:
            self.inbox.append(message)

    def receive_close(self, code: int, reason: str, was_clean: bool = True) -> None:
        """The peer closed (or, for ``was_clean=False``, vanished)."""
        if self.closed_incoming:
            return
        self.closed_incoming = True
        if self.close_sink is not None:
            self.close_sink(code, reason, was_clean)
        elif self.dispatching:
            self._queue_or_dispatch(CloseEvent(code, reason, was_clean))
        elif not self.hibernatable:
            self.inbox.append(CloseEvent(code, reason, was_clean))
        if (
            self.auto_reply_close
            and self.accepted
            and was_clean
            and not self.closed_outgoing
            and self.error is None
        ):
            self.closed_outgoing = True
            if self.peer is not None:
                self.peer.receive_close(code, reason, True)

    def receive_error(self, error: BaseException) -> None:
        """The connection failed: the end is closed and an ``error`` event is raised once."""
        if self.error is not None:
            return
        self.error = error
        self.outgoing_aborted = True
        if self.error_sink is not None:
            self.error_sink(error)
        elif self.dispatching:
            self._queue_or_dispatch(ErrorEvent(error))
        elif not self.hibernatable:
            self.inbox.append(ErrorEvent(error))

    def _queue_or_dispatch(self, event: Event) -> None:
        if not self.inbox and self.listeners.get(event.type):
            self._dispatch(event)
        else:
            self.inbox.append(event)

    def flush_inbox(self) -> None:
        """Deliver queued messages/events in order while someone listens for the next one."""
        if not self.dispatching:
            return
        while self.inbox:
            item = self.inbox[0]
            event = item if isinstance(item, Event) else MessageEvent(item)
            if not self.listeners.get(event.type):
                return
            self.inbox.popleft()
            self._dispatch(event)

    def _dispatch(self, event: Event) -> None:
        for listener in list(self.listeners.get(event.type, ())):
            try:
                result = listener(event)
            except Exception:
                _log.exception("uncaught error in a WebSocket %r listener", event.type)
                continue
            if inspect.isawaitable(result):
                _schedule(result, event.type)

    # -- the network behind a client end, and what the server and runtime do to an end -------------
    def forward(self, message: Message) -> None:
        """Network → worker: ``message`` arrived on the connection behind this (client) end."""
        if self.peer is not None:
            self.peer.receive(message)

    def forward_close(self, code: int, reason: str = "", was_clean: bool = True) -> None:
        """Network → worker: the remote peer closed (``was_clean=False``: it just vanished)."""
        self.closed_outgoing = True
        if self.peer is not None:
            self.peer.receive_close(code, reason, was_clean)

    def forward_error(self, error: BaseException) -> None:
        """Network → worker: the connection behind this (client) end failed."""
        self.outgoing_aborted = True
        if self.peer is not None:
            self.peer.receive_error(error)

    def couple(self) -> None:
        """The server takes this end out of a 101 Response to bridge it to the network."""
        if self.released:
            raise WebSocketError("Can't return WebSocket that was already used in a response.")
        if self.hibernatable:
            raise WebSocketError(
                "Can't return WebSocket in a Response after calling acceptWebSocket()."
            )
        if self.accepted:
            raise WebSocketError("Can't return WebSocket in a Response after calling accept().")
        self.released = True

    def accept_hibernatable(self) -> None:
        """What ``ctx.acceptWebSocket(ws)`` does to the socket itself (tags are the host's)."""
        if self.accepted:
            raise WebSocketError(
                "Cannot call `acceptWebSocket()` if the WebSocket was already accepted via "
                "`accept()`"
            )
        peer = self.peer
        if peer is None or peer.accepted or peer.released:
            raise WebSocketError(
                "Cannot call `acceptWebSocket()` on this WebSocket because its pair has already "
                "been accepted or used in a Response."
            )
        self.accepted = True
        self.hibernatable = True

    def bind(self, before_send: Callable[[], asyncio.Future[None] | None] | None) -> None:
        """``ctx.acceptWebSocket``: become hibernatable; ``before_send`` runs before each send."""
        self.accept_hibernatable()
        self.before_send = before_send

    def discard(self) -> None:
        """This (server) end will never reach the network: forget it wherever it was accepted."""
        if self.on_discard is not None:
            self.on_discard()


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
