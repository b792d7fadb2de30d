"""The state of a byte stream: a queue of chunks between one producer and one consumer.

A stream carries byte chunks from a producer (a ``TransformStream``'s writer, a
``ReadableStream.new(pull=…)`` source, an outbound ``fetch`` body, an uploaded request body) to
one consumer (a reader, ``async for``, or the server sending a response). The state lives in a
:class:`StreamCore`, which both ends hold; the ``ReadableStream`` user code sees
(:mod:`doemu.compat.readable`) is a thin view with JavaScript's names.

* **Back-pressure.** A producer may queue up to :data:`HIGH_WATER_MARK` bytes; past that a
  writer's ``write()`` (and ``ready``) settles only once the consumer has taken enough. The server
  reads a response body only as fast as the client takes it, so a slow client slows the writer.
* **Cancellation.** Cancelling the stream (the client went away, the consumer gave up, the
  stream was dropped unread) makes the producer's next write fail and tells a pull source.
* **Chunks** reach user code as ``JsBuffer`` (``chunk.to_bytes()``, as a ``Uint8Array`` proxy
  reads on Cloudflare) and the server as plain ``bytes``.
* :attr:`StreamCore.finished` settles when the stream is over, however it ended: what keeps an
  object in memory while a body it produces is still being sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from ..errors import StreamError
from .jsproxy import JsBuffer, as_js_buffer

__all__ = ["HIGH_WATER_MARK", "Pull", "ReadResult", "ReadableStreamDefaultReader", "StreamCore"]

_log = logging.getLogger("doemu.streams")

#: Bytes a producer may queue before its writes wait for the consumer.
HIGH_WATER_MARK = 64 * 1024

_READABLE, _CLOSED, _ERRORED = "readable", "closed", "errored"
LOCKED = "This ReadableStream is currently locked to a reader."


class ReadResult:
    """What ``await reader.read()`` gives: ``done`` and ``value`` (a chunk, or None when done)."""

    __slots__ = ("done", "value")

    def __init__(self, done: bool, value: JsBuffer | None) -> None:
        self.done = done
        self.value = value

    def to_py(self) -> dict[str, Any]:
        return {"done": self.done, "value": self.value}

    def __repr__(self) -> str:
        return f"ReadResult(done={self.done}, value={self.value!r})"


#: A pull source: called when the queue is empty and a read waits; it enqueues, closes or fails.
Pull = Callable[["StreamCore"], Any]


class StreamCore:
    """The queue and state of one stream, shared by its readable view and its producer."""

    __slots__ = (
        "_cancel_hook",
        "_cancelled",
        "_error",
        "_hwm",
        "_pull",
        "_pulling",
        "_queue",
        "_queued",
        "_read_waiter",
        "_room_waiters",
        "_state",
        "disturbed",
        "finished",
        "locked",
    )

    def __init__(
        self,
        *,
        pull: Pull | None = None,
        on_cancel: Callable[[BaseException], Any] | None = None,
        high_water_mark: int = HIGH_WATER_MARK,
    ) -> None:
        self._queue: deque[bytes] = deque()
        self._queued = 0
        self._state = _READABLE
        self._error: BaseException | None = None
        self._hwm = high_water_mark
        self._pull = pull
        self._pulling = False
        self._cancel_hook = on_cancel
        #: Cancelled by the consumer: reads see ``done`` (the Streams spec closes the readable
        #: side), while writes fail with the reason.
        self._cancelled = False
        self._read_waiter: asyncio.Future[bytes | None] | None = None
        self._room_waiters: deque[asyncio.Future[None]] = deque()
        self.finished: asyncio.Future[None] | None = None
        self.locked = False
        self.disturbed = False

    # -- the producer's side ----------------------------------------------------------------
    @property
    def readable(self) -> bool:
        return self._state == _READABLE

    @property
    def error(self) -> BaseException | None:
        return self._error

    def enqueue(self, chunk: bytes) -> None:
        """Add a chunk (ignored after close or cancel: the producer learns it from its writes)."""
        if self._state != _READABLE:
            return
        waiter = self._read_waiter
        if waiter is not None and not self._queue:
            self._read_waiter = None
            if not waiter.done():
                waiter.set_result(chunk)
                return
        self._queue.append(chunk)
        self._queued += len(chunk)

    def close(self) -> None:
        """No more chunks: reads drain the queue, then see ``done``."""
        if self._state != _READABLE:
            return
        self._state = _CLOSED
        self._wake_reader()
        self._check_finished()

    def fail(self, error: BaseException) -> None:
        """End the stream with ``error``: reads and writes raise it from now on."""
        if self._state == _ERRORED:
            return
        self._state = _ERRORED
        self._error = error
        self._queue.clear()
        self._queued = 0
        self._wake_reader()
        self._release_writers()
        self._set_finished()

    def cancel(self, reason: object = None) -> None:
        """The consumer gave up: drop what is queued and tell the producer."""
        if self._state == _ERRORED or (self._state == _CLOSED and not self._queue):
            return
        error = reason if isinstance(reason, BaseException) else StreamError(_cancel_text(reason))
        self._cancelled = True
        self.fail(error)
        if self._cancel_hook is not None:
            hook, self._cancel_hook = self._cancel_hook, None
            try:
                result = hook(error)
                if asyncio.iscoroutine(result):
                    asyncio.get_running_loop().create_task(result)
            except Exception:
                _log.exception("a stream's cancel callback failed")

    @property
    def waiting(self) -> bool:
        """A read is waiting for a chunk."""
        return self._read_waiter is not None and not self._read_waiter.done()

    def has_room(self) -> bool:
        return self._queued <= self._hwm

    def wait_room(self) -> asyncio.Future[None]:
        """Settles once the queue is back under the high-water mark (or the stream ended)."""
        future = asyncio.get_running_loop().create_future()
        if self._state == _ERRORED:
            future.set_exception(self._error or StreamError("the stream failed"))
        elif self.has_room() or self._state == _CLOSED:
            future.set_result(None)
        else:
            self._room_waiters.append(future)
        return future

    def desired_size(self) -> int | None:
        if self._state == _ERRORED:
            return None
        if self._state == _CLOSED:
            return 0
        return self._hwm - self._queued

    def drained(self) -> asyncio.Future[None]:
        """Settles once the stream is closed and everything queued was read (or it failed)."""
        return self._finished_future()

    # -- the consumer's side --------------------------------------------------------------------
    def read(self) -> asyncio.Future[bytes | None]:
        """The next chunk (``None`` when the stream is done); raises the stream's error."""
        future: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
        self.disturbed = True
        if self._queue:
            chunk = self._queue.popleft()
            self._queued -= len(chunk)
            self._release_writers()
            future.set_result(chunk)
            self._check_finished()
        elif self._state == _CLOSED or self._cancelled:
            future.set_result(None)
        elif self._state == _ERRORED:
            future.set_exception(self._error or StreamError("the stream failed"))
        else:
            if self._read_waiter is not None and not self._read_waiter.done():
                raise StreamError("only one read at a time may wait on a stream")
            self._read_waiter = future
            self._release_writers()
            self._start_pull()
        return future

    def _start_pull(self) -> None:
        if self._pull is None or self._pulling:
            return
        self._pulling = True
        asyncio.get_running_loop().create_task(self._run_pull())

    async def _run_pull(self) -> None:
        pull = self._pull
        assert pull is not None
        try:
            while self._state == _READABLE and self._read_waiter is not None and not self._queue:
                result = pull(self)
                if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                    await result
        except Exception as exc:
            self.fail(exc)
        finally:
            self._pulling = False

    # -- settling -----------------------------------------------------------------------------
    def _wake_reader(self) -> None:
        waiter = self._read_waiter
        if waiter is None or waiter.done():
            return
        if self._queue:
            return
        self._read_waiter = None
        if self._state == _ERRORED and not self._cancelled:
            waiter.set_exception(self._error or StreamError("the stream failed"))
        else:
            waiter.set_result(None)

    def _release_writers(self) -> None:
        waiters = self._room_waiters
        while waiters and (self._state != _READABLE or self.has_room()):
            waiter = waiters.popleft()
            if waiter.done():
                continue
            if self._state == _ERRORED:
                waiter.set_exception(self._error or StreamError("the stream failed"))
            else:
                waiter.set_result(None)

    def _finished_future(self) -> asyncio.Future[None]:
        if self.finished is None:
            self.finished = asyncio.get_running_loop().create_future()
            self._check_finished()
        return self.finished

    def _check_finished(self) -> None:
        if self._state == _ERRORED or (self._state == _CLOSED and not self._queue):
            self._set_finished()

    def _set_finished(self) -> None:
        if self.finished is not None and not self.finished.done():
            self.finished.set_result(None)

    def dropped(self) -> None:
        """The readable view was garbage-collected: nobody can ever read what is queued."""
        if self._state == _READABLE and not self.locked:
            self.cancel(StreamError("the ReadableStream was dropped without being read"))


def _cancel_text(reason: object) -> str:
    return "the stream was cancelled" + (f": {reason}" if reason is not None else "")


class ReadableStreamDefaultReader:
    """``stream.getReader()``: ``read()``, ``cancel()``, ``releaseLock()``, ``closed``."""

    __slots__ = ("_core", "_released")

    def __init__(self, core: StreamCore) -> None:
        self._core = core
        self._released = False

    async def read(self) -> ReadResult:
        if self._released:
            raise StreamError("This ReadableStreamDefaultReader has been released.")
        chunk = await self._core.read()
        return ReadResult(True, None) if chunk is None else ReadResult(False, as_js_buffer(chunk))

    async def cancel(self, reason: object = None) -> None:
        self._core.cancel(reason)

    def releaseLock(self) -> None:
        if not self._released:
            self._released = True
            self._core.locked = False

    @property
    def closed(self) -> asyncio.Future[None]:
        return self._core.drained()
