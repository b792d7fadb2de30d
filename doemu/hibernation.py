"""Server-held WebSockets: what lets an object hibernate while its sockets stay connected.

``ctx.acceptWebSocket(ws, tags)`` hands a socket to the runtime rather than to the instance: the
registry lives on the :class:`~doemu.host.ObjectHost`, which outlives every activation, so after
an eviction the socket, its tags and its attachment are still here and the next message simply
re-runs the constructor and calls ``webSocketMessage``. Sockets accepted the non-hibernatable way
(``ws.accept()``) pin the object in memory instead.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .errors import WebSocketError

if TYPE_CHECKING:
    from .host import ObjectHost

__all__ = ["MAX_TAGS", "MAX_TAG_LENGTH", "SocketRegistry", "StartOrder"]

MAX_TAGS = 10
MAX_TAG_LENGTH = 256


class StartOrder:
    """Socket events of one object start their handlers in the order their frames arrived.

    A handler normally starts the moment its frame arrives (see ``ObjectHost._spawn_socket_event``),
    but one that has to wait first (at the input gate of a ``blockConcurrencyWhile``, or for the
    constructor) must not be overtaken by a frame that arrives just as the gate opens: the later
    handler would otherwise start in the loop turn between the gate opening and the earlier
    event's wake-up. Each event takes a turn when its frame arrives and passes it on the moment
    its handler starts (or when it ends without starting); the next event waits only if an
    earlier one has not started yet, so the common case costs two counter updates.
    """

    __slots__ = ("_pending", "_waiting")

    def __init__(self) -> None:
        #: Events that arrived and have not passed their turn on (the first of them holds it).
        self._pending = 0
        self._waiting: deque[asyncio.Future[None]] = deque()

    def __len__(self) -> int:
        """Events that arrived but have not started their handler yet."""
        return self._pending

    def arrive(self) -> asyncio.Future[None] | None:
        """Take a turn: ``None`` to go ahead now, or a future that resolves at this event's turn."""
        self._pending += 1
        if self._pending == 1:
            return None
        turn = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        return turn

    def started(self) -> None:
        """The event holding the turn started its handler (or ended): the next one may go."""
        self._pending -= 1
        waiting = self._waiting
        while waiting:
            turn = waiting.popleft()
            if not turn.done():  # a cancelled waiter has already left
                turn.set_result(None)
                return

    def leave(self, turn: asyncio.Future[None]) -> None:
        """An event stopped waiting for ``turn`` (cancelled): pass the turn on if it got it."""
        if turn.done() and not turn.cancelled():
            self.started()
        else:
            turn.cancel()
            self._pending -= 1


class SocketRegistry:
    """The hibernatable sockets of one object, with their tags and the auto-response pair."""

    def __init__(self, host: ObjectHost) -> None:
        self._host = host
        self._tags: dict[Any, tuple[str, ...]] = {}
        self._pinned: set[Any] = set()
        # Accepted during a fetch whose 101 response has not been returned yet.
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

    def pin(self, ws: Any) -> None:
        self._pinned.add(ws)

    def unpin(self, ws: Any) -> None:
        self._pinned.discard(ws)

    def accept(self, ws: Any, tags: Iterable[str] | None) -> None:
        if ws in self._tags:
            raise WebSocketError("Can't accept() WebSocket that was already accepted.")
        # workerd's rules and texts: duplicates are ignored; at most 10 distinct tags of at most
        # 256 characters each.
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
        tag_list = tuple(distinct)
        bind = getattr(ws, "_bind_host", None)
        if bind is None:
            raise WebSocketError(
                "acceptWebSocket() expects the server end of a WebSocketPair, "
                f"got {type(ws).__name__}"
            )
        bind(self._host)  # validates like workerd, then routes sends through the output gate
        self._tags[ws] = tag_list
        self._uncoupled.add(ws)
        host = self._host
        ws._sink = lambda message: host.deliver_socket_message(ws, message)
        ws._close_sink = lambda code, reason, clean=True: host.deliver_socket_close(
            ws, code, reason, clean
        )
        ws._error_sink = lambda error: host.deliver_socket_error(ws, error)

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

    def discard_uncoupled(self, returned: Any) -> None:
        """A fetch finished: keep the socket its 101 response returned, drop the others.

        A handler that accepted a socket and then failed (or returned something other than that
        socket's pair) leaves a server end nobody can ever reach; it must not linger in
        ``getWebSockets()`` collecting messages forever.
        """
        if not self._uncoupled:
            return
        for ws in list(self._uncoupled):
            if ws is not returned:
                self.remove(ws)
        self._uncoupled.clear()

    def remove(self, ws: Any) -> None:
        self._tags.pop(ws, None)
        self._auto_timestamps.pop(ws, None)
        self._pinned.discard(ws)
        self._uncoupled.discard(ws)

    def set_auto_response(self, pair: Any) -> None:
        self.auto_response = pair

    def auto_response_timestamp(self, ws: Any) -> float | None:
        return self._auto_timestamps.get(ws)

    def note_auto_response(self, ws: Any, at_ms: float) -> None:
        self._auto_timestamps[ws] = at_ms
