"""The bridge between a pair's client end and a real WebSocket connection (the ASGI side).

When an object's ``fetch`` returns ``Response(None, status=101, web_socket=client)``, the server
completes the handshake and hands the connection to :func:`bridge`, which pumps frames both ways
until either side closes: what the object sends to its server end arrives at the client end and
is written to the network; what the network delivers is forwarded to the server end (and from
there to the object's listeners or its ``webSocketMessage`` handler). No task per frame in either
direction (see :class:`_Outbound` and :class:`_Inbound`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping
from typing import Any

from ..compat.socket_end import SocketEnd
from ..compat.ws_events import CloseEvent
from .delivery import SocketEvent, collect_socket_events, resume

__all__ = ["ABNORMAL_CLOSE_REASON", "MAX_UNSENT_BYTES", "WriteBatch", "bridge"]

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_log = logging.getLogger("doemu.sockets")

#: workerd's close reason for a client that vanished without a Close frame.
ABNORMAL_CLOSE_REASON = "WebSocket disconnected without sending Close frame."

#: How far a client may fall behind: the bytes of frames the object sent that wait in doemu
#: because the connection's send buffers (the kernel's and the transport's, about 64 KiB above
#: the kernel's) are full. ``ws.send()`` has no back-pressure, so a client that stops reading
#: would otherwise grow the server's memory by everything the object sends it; past this the
#: connection is dropped (TCP reset; the object's ``webSocketClose`` sees 1006, as for a client
#: that vanished) and its unsent frames are freed. 8 MiB is seconds of a busy stream for a
#: client that is merely slow, and a stalled one costs at most that.
MAX_UNSENT_BYTES = 8 * 1024 * 1024


async def bridge(
    client: SocketEnd,
    receive: Receive,
    send: Send,
    batch: WriteBatch,
    send_frame: Callable[[str | bytes], bool] | None = None,
    abort: Callable[[], None] | None = None,
) -> None:
    """Pump frames between the network and the client end of the pair until either side closes.

    No task per frame in either direction: a frame the object sends is written with every other
    frame of the same loop turn (:class:`_Outbound`), and a frame that arrives starts its handler
    in the task that read it (:class:`_Inbound`). This task only waits for the connection to
    end, so it never runs user code and uvicorn's shutdown never waits for a handler.
    """
    outbound = _Outbound(send, batch, send_frame, abort)
    for item in list(client.inbox):  # what the object sent before the handshake completed
        if isinstance(item, str | bytes):
            outbound.message(item)
        elif isinstance(item, CloseEvent):
            outbound.close(item.code, item.reason)
    client.inbox.clear()
    client.sink = outbound.message
    client.close_sink = outbound.close
    inbound = _Inbound(client, receive)
    try:
        await inbound.ended
    finally:
        inbound.stop()
        outbound.stop()


class _Outbound:
    """Frames from the object to the network, in order, with no task unless the network is slow.

    A frame is not written from inside the object's ``ws.send()`` but at the start of the next
    loop turn, together with every other frame sent during this turn (:class:`WriteBatch`).
    Writing each frame at once is cheaper in Python but dearer in the kernel: with 50 busy
    connections, writes spread between the reads and handlers of a turn cost about a quarter
    more server CPU per echo than the same writes back to back, which is also what the task
    per frame this replaced happened to do. A lone frame waits only for the rest of its turn
    (writing the first frame of a turn at once would make one connection's round trip ~15 %
    faster, but costs the busy case ~2 %). uvicorn's ``send`` is a coroutine that only suspends
    under flow control (the transport's buffer is full), so it is driven by hand: it normally
    finishes on the spot. If it suspends, a task finishes it and later frames (a close
    included) queue behind it, so order is kept. With doemu's uvicorn protocol, a data frame
    skips ``send`` altogether (``send_frame``, see :mod:`doemu.sockets.protocol`) whenever that
    protocol says it can be written as it is. The backlog is bounded: past
    :data:`MAX_UNSENT_BYTES` the client is not reading, and the connection is dropped.
    """

    __slots__ = ("_abort", "_backlog", "_batch", "_closed", "_dead", "_send", "_send_frame",
                 "_task", "_unsent")  # fmt: skip

    def __init__(
        self,
        send: Send,
        batch: WriteBatch,
        send_frame: Callable[[str | bytes], bool] | None = None,
        abort: Callable[[], None] | None = None,
    ) -> None:
        self._send = send
        self._send_frame = send_frame
        self._abort = abort
        self._batch = batch
        #: Frames waiting behind a suspended send; ``None`` while nothing is suspended.
        self._backlog: deque[Message] | None = None
        #: The payload bytes in the backlog.
        self._unsent = 0
        self._task: asyncio.Task[None] | None = None
        #: A close frame is on its way: later frames are dropped (the object cannot send any).
        self._closed = False
        #: The connection is over or a send failed: nothing more is written.
        self._dead = False

    def message(self, data: str | bytes) -> None:
        """The object sent ``data`` (the client end's ``sink``)."""
        if isinstance(data, bytes):
            self._put({"type": "websocket.send", "bytes": data})
        else:
            self._put({"type": "websocket.send", "text": data})

    def close(self, code: int, reason: str, *_: Any) -> None:
        """The object closed (the client end's ``close_sink``); 1005 is "no code": 1000."""
        self._put(
            {"type": "websocket.close", "code": 1000 if code == 1005 else code, "reason": reason}
        )
        self._closed = True

    def stop(self) -> None:
        """The connection is over: drop whatever has not been written."""
        self._dead = True
        self._backlog = None
        self._unsent = 0
        if self._task is not None:
            self._task.cancel()

    def _put(self, message: Message) -> None:
        if self._closed or self._dead:
            return
        if self._backlog is not None:
            self._queue(message)
        else:
            self._batch.add(self, message)

    def _queue(self, message: Message) -> None:
        """Behind a suspended send: into the backlog, or the client is dropped if it is full."""
        assert self._backlog is not None
        data = message.get("text")
        if data is None:
            data = message.get("bytes") or b""
        self._unsent += len(data)
        self._backlog.append(message)
        if self._unsent > MAX_UNSENT_BYTES:
            _log.warning(
                "dropping a WebSocket client that stopped reading: more than %d bytes of "
                "frames are waiting for it",
                MAX_UNSENT_BYTES,
            )
            abort = self._abort
            self.stop()
            if abort is not None:
                abort()

    def write(self, message: Message) -> None:
        """Hand ``message`` to uvicorn now (the batch's flush), or queue it behind a slow send."""
        if self._dead:
            return
        if self._backlog is not None:
            self._queue(message)
            return
        send_frame = self._send_frame
        if send_frame is not None and message["type"] == "websocket.send":
            data = message.get("text")
            try:
                if send_frame(message["bytes"] if data is None else data):
                    return
            except Exception:  # e.g. text that is not UTF-8: uvicorn's send says why
                pass
        try:
            sending = self._send(message)
            if not isinstance(sending, Coroutine):
                self._suspended(sending)
                return
            yielded = sending.send(None)
        except StopIteration:
            return
        except Exception as exc:
            self._failed(exc)
            return
        self._suspended(resume(sending, yielded))

    def _suspended(self, rest: Awaitable[None]) -> None:
        """A send must wait: a task finishes it, and later frames wait in the backlog."""
        self._backlog = deque()
        self._task = asyncio.get_running_loop().create_task(self._drain(rest))

    async def _drain(self, rest: Awaitable[None]) -> None:
        try:
            await rest
            backlog = self._backlog
            while backlog:
                message = backlog.popleft()
                data = message.get("text")
                if data is None:
                    data = message.get("bytes") or b""
                self._unsent -= len(data)
                await self._send(message)
        except Exception as exc:
            self._failed(exc)
        finally:
            self._backlog = None
            self._task = None
            self._unsent = 0

    def _failed(self, exc: Exception) -> None:
        # The client is gone (uvicorn raises ClientDisconnected) or the connection is closing;
        # the object learns of it from the disconnect, never from its own send().
        _log.debug("dropping WebSocket frames after a failed send: %r", exc)
        self._dead = True


class WriteBatch:
    """The frames every connection sent during this loop turn, written at the start of the next.

    One callback per turn for all connections, not a task or a callback per frame.
    """

    __slots__ = ("_frames", "_loop")

    def __init__(self) -> None:
        self._frames: list[tuple[_Outbound, Message]] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    def add(self, outbound: _Outbound, message: Message) -> None:
        frames = self._frames
        if not frames or self._loop is None or not self._loop.is_running():
            # The first frame of this turn (or frames left by a loop that stopped before its
            # flush, as between tests): schedule the flush on the running loop.
            frames.clear()
            self._loop = asyncio.get_running_loop()
            self._loop.call_soon(self._flush)
        frames.append((outbound, message))

    def _flush(self) -> None:
        frames = self._frames
        self._frames = []
        for outbound, message in frames:
            outbound.write(message)


class _Inbound:
    """Frames from the network to the object, each handler started by the task that read it.

    A handler that finishes without suspending (the usual case) costs no task at all. One that
    suspends (a long LLM stream, an RPC call, the input gate) keeps the task it started in (see
    :class:`~doemu.sockets.delivery.SocketEvent`), and reading moves to a new task, so the next
    message is delivered while the handler waits: events interleave across awaits, as on
    Cloudflare, and start in the order their frames arrived.
    """

    __slots__ = ("_client", "_closed", "_reader", "_receive", "ended")

    def __init__(self, client: SocketEnd, receive: Receive) -> None:
        self._client = client
        self._receive = receive
        self._closed = False
        #: Resolved when the connection is over (the bridge's task then returns).
        self.ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._reader: asyncio.Task[None] | None = None
        self._read()

    def stop(self) -> None:
        """Stop reading if the connection is still open (the bridge's task was cancelled)."""
        if not self._closed and self._reader is not None:
            self._reader.cancel()

    def _read(self) -> None:
        """Read the connection in a new task."""
        self._reader = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        client = self._client
        receive = self._receive
        reader = self._reader  # this task: _read() set it before the task first ran
        assert reader is not None
        suspended: SocketEvent | None = None
        try:
            while suspended is None and not self._closed:
                message = await receive()
                if message["type"] == "websocket.receive":
                    text = message.get("text")
                    data = text if text is not None else message.get("bytes") or b""
                    events = collect_socket_events(client.forward, data)
                else:
                    events = self._other(message)
                for index, event in enumerate(events):
                    finished = event.start()
                    if finished and not reader.cancelling():
                        continue
                    # The handler keeps this task (or, returning, left it a cancellation of
                    # its own making, due at its next await); reading goes on in another one.
                    # Events of the same frame after it (rare) start as tasks, in order.
                    for later in events[index + 1 :]:
                        later.spawn()
                    if not self._closed:
                        self._read()
                    if finished:
                        return
                    suspended = event
                    break
        except Exception as exc:
            self._end()
            client.forward_error(exc)
            return
        if suspended is not None:
            await suspended.finish()

    def _other(self, message: Message) -> list[SocketEvent]:
        """Any ASGI message but a frame: the disconnect ends the connection."""
        if message["type"] != "websocket.disconnect":
            return []
        self._end()
        client = self._client
        code = int(message.get("code", 1005))
        # uvicorn reports a lost connection as 1006, or (sans-I/O implementation) as 1005
        # without a "reason" key; a received Close frame always carries "reason".
        if code == 1006 or (code == 1005 and "reason" not in message):
            return collect_socket_events(client.forward_close, 1006, ABNORMAL_CLOSE_REASON, False)
        reason = str(message.get("reason") or "")
        return collect_socket_events(client.forward_close, code, reason, True)

    def _end(self) -> None:
        self._closed = True
        if not self.ended.done():
            self.ended.set_result(None)
