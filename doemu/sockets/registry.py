"""Server-held WebSockets: what lets an object hibernate while its sockets stay connected.

``ctx.acceptWebSocket(ws, tags)`` hands a socket to the runtime rather than to the instance: the
registry lives on the object's host, which outlives every activation, so after an eviction the
socket, its tags and its attachment are still here and the next message simply re-runs the
constructor and calls ``webSocketMessage``. Frames that match the auto-response pair are answered
here without waking the object. Sockets accepted the non-hibernatable way (``ws.accept()``) pin
the object in memory instead, until they close.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from ..compat import as_js_buffer, call_relaxed
from ..compat.socket_end import SocketEnd
from ..compat.websocket import end_of
from ..errors import ObjectResetError, WebSocketError
from ..jsboundary import JsException, is_strict
from .delivery import StartOrder, start_socket_event

__all__ = [
    "MAX_TAGS",
    "MAX_TAG_LENGTH",
    "NOT_A_WEBSOCKET",
    "SocketOwner",
    "SocketRegistry",
    "fetch_scope",
]

#: workerd's text when ``acceptWebSocket`` is given something that is not a WebSocket.
NOT_A_WEBSOCKET = (
    "Failed to execute 'acceptWebSocket' on 'DurableObjectState': parameter 1 is not of type "
    "'WebSocket'."
)

MAX_TAGS = 10
MAX_TAG_LENGTH = 256


#: The sockets accepted by the fetch being handled (set by the stub that delivers it, read by
#: :meth:`SocketRegistry.accept`): a context variable, so tasks the handler starts share it.
fetch_scope: contextvars.ContextVar[set[Any] | None] = contextvars.ContextVar(
    "doemu_fetch_scope", default=None
)


class SocketOwner(Protocol):
    """What the registry needs of the object its sockets belong to (the object host)."""

    @property
    def hex_id(self) -> str: ...

    @property
    def last_reset(self) -> ObjectResetError | None:
        """The reset that ended the last activation, if any (socket events compare it)."""

    def output_barrier(self) -> asyncio.Future[None] | None:
        """Commit the object's pending writes (before a frame leaves it); what the frame must
        wait for (None: nothing)."""

    async def call(self, kind: str, fn: Callable[[Any], Any]) -> Any:
        """Run ``fn(instance)`` as an event of the object, under its gates."""

    def now(self) -> float:
        """The runtime clock's time in ms."""

    def track(self, task: asyncio.Task[Any]) -> None:
        """Keep an event task referenced until it ends (shutdown cancels it)."""

    def unpinned(self) -> None:
        """A socket that pinned the object closed: it may become idle now."""


class SocketRegistry:
    """The hibernatable sockets of one object, with their tags and the auto-response pair."""

    def __init__(self, owner: SocketOwner) -> None:
        self._owner = owner
        self._tags: dict[Any, tuple[str, ...]] = {}
        self._pinned: set[Any] = set()
        # Accepted outside any fetch (an RPC method, an alarm): dropped when a fetch ends.
        self._uncoupled: set[Any] = set()
        self.auto_response: Any = None
        self._auto_timestamps: dict[Any, float] = {}
        self.event_timeout_ms: int | None = None
        #: Arrival order of this object's socket events (see :class:`StartOrder`).
        self.order = StartOrder()

    def __len__(self) -> int:
        return len(self._tags)

    @property
    def pinning(self) -> bool:
        """True while a non-hibernatable socket keeps the object in memory."""
        return bool(self._pinned)

    # -- ctx.acceptWebSocket and the queries of ctx ------------------------------------------------
    def accept(self, ws: Any, tags: Iterable[str] | None) -> None:
        """``ctx.acceptWebSocket(ws, tags)`` with workerd's rules and texts."""
        if ws in self._tags:
            raise WebSocketError("Can't accept() WebSocket that was already accepted.")
        # Duplicates are ignored; at most 10 distinct tags of at most 256 characters each.
        distinct: list[str] = []
        for tag in tags if tags is not None else ():
            if not isinstance(tag, str):
                raise WebSocketError(f"WebSocket tags must be strings, got {type(tag).__name__}.")
            if tag in distinct:
                continue
            if len(distinct) >= MAX_TAGS:
                raise WebSocketError(
                    f"a Hibernatable WebSocket cannot have more than {MAX_TAGS} tags"
                )
            if len(tag) > MAX_TAG_LENGTH:
                raise WebSocketError(
                    f'"{tag}" is longer than the max tag length ({MAX_TAG_LENGTH} characters).'
                )
            distinct.append(tag)
        try:
            end = end_of(ws)
        except WebSocketError:
            raise WebSocketError(NOT_A_WEBSOCKET) from None
        end.bind(self._owner.output_barrier)  # validates like workerd; sends pass the output gate
        self._tags[ws] = tuple(distinct)
        scope = fetch_scope.get()
        (self._uncoupled if scope is None else scope).add(ws)
        end.sink = lambda message: self._message(ws, end, message)
        end.close_sink = lambda code, reason, clean=True: self._close(ws, code, reason, clean)
        end.error_sink = lambda error: self._error(ws, error)
        end.on_discard = lambda: self.remove(ws)

    def get(self, tag: str | None = None) -> list[Any]:
        if tag is None:
            return list(self._tags)
        return [ws for ws, tags in self._tags.items() if tag in tags]

    def tags_of(self, ws: Any) -> list[str]:
        if ws not in self._tags:
            raise WebSocketError(
                "getTags() requires a WebSocket accepted by ctx.acceptWebSocket()."
            )
        return list(self._tags[ws])

    def set_auto_response(self, pair: Any) -> None:
        self.auto_response = pair

    def auto_response_timestamp(self, ws: Any) -> float | None:
        return self._auto_timestamps.get(ws)

    # -- the end of a fetch ------------------------------------------------------------------------
    def fetch_ended(self, returned: Any, accepted: set[Any]) -> None:
        """A fetch finished, returning the client end ``returned`` (or nothing).

        ``accepted`` is the fetch's :data:`fetch_scope`: the sockets it accepted. The one its
        101 response carries stays; the others are dropped: a handler that accepted one and then
        failed (or returned another pair's end) leaves a server end nobody can ever reach, which
        must not linger in ``getWebSockets()``. Only this fetch's sockets: two upgrades to one
        object may be in flight at once. A server end the object handles itself (``accept()``)
        pins the object until it closes.
        """
        peer = end_of(returned).peer if returned is not None else None
        for ws in [*accepted, *self._uncoupled]:
            if peer is None or ws is not peer.socket:
                self.remove(ws)
        accepted.clear()
        self._uncoupled.clear()
        if peer is not None and peer.dispatching:
            self._pin(peer)

    def _pin(self, end: SocketEnd) -> None:
        self._pinned.add(end)

        def release(_event: Any) -> None:
            self._pinned.discard(end)
            self._owner.unpinned()

        end.add_listener("close", release)
        end.add_listener("error", release)

    def remove(self, ws: Any) -> None:
        self._tags.pop(ws, None)
        self._auto_timestamps.pop(ws, None)
        self._uncoupled.discard(ws)
        scope = fetch_scope.get()
        if scope is not None:
            scope.discard(ws)

    # -- frames for hibernatable sockets -----------------------------------------------------------
    def _message(self, ws: Any, end: SocketEnd, message: str | bytes) -> None:
        """A frame arrived: auto-respond, or wake the object for ``webSocketMessage``."""
        pair = self.auto_response
        if pair is not None and isinstance(message, str) and message == pair.request:
            if end.peer is not None:
                end.peer.receive(pair.response)  # answered without waking the object
            self._auto_timestamps[ws] = self._owner.now()
            return
        data = as_js_buffer(message) if isinstance(message, bytes) else message

        def run(inst: Any) -> Any:
            handler = _handler(inst, "webSocketMessage")
            return None if handler is None else call_relaxed(handler, ws, data)

        self._start("webSocketMessage", run)

    def _close(self, ws: Any, code: int, reason: str, was_clean: bool) -> None:
        self.remove(ws)  # gone even if the handler (or the constructor) fails

        def run(inst: Any) -> Any:
            handler = _handler(inst, "webSocketClose")
            return None if handler is None else call_relaxed(handler, ws, code, reason, was_clean)

        self._start("webSocketClose", run)

    def _error(self, ws: Any, error: BaseException) -> None:
        self.remove(ws)

        def run(inst: Any) -> Any:
            handler = _handler(inst, "webSocketError")
            return None if handler is None else call_relaxed(handler, ws, error)

        self._start("webSocketError", run)

    def _start(self, kind: str, fn: Callable[[Any], Any]) -> None:
        start_socket_event(self._owner, self.order, kind, fn)


def _handler(instance: Any, name: str) -> Any:
    """The object's ``name`` handler. A class without one fails the event as on Cloudflare's
    Python Workers, whose JavaScript wrapper of every class has every handler and finds none to
    call: "TypeError: Method webSocketClose does not exist", logged (observed on workerd).
    ``--lenient`` skips the event silently instead."""
    handler = getattr(instance, name, None)
    if handler is None and is_strict():
        raise JsException("TypeError", f"Method {name} does not exist")
    return handler
