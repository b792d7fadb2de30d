"""``WritableStream`` and ``TransformStream``: the producing side of a byte stream.

The usual way Python Workers stream a response::

    ts = TransformStream.new()
    writer = ts.writable.getWriter()
    self.ctx.waitUntil(pump(writer))          # writes, then await writer.close()
    return Response(ts.readable, headers={"content-type": "text/event-stream"})

A ``TransformStream`` here is Workers' identity transform of byte chunks: what the writer writes
is what the readable side reads. ``writer.write(chunk)`` queues the chunk *when called* (as the
JavaScript promise does, so an un-awaited write still writes) and returns an awaitable that
settles once the stream has room again: awaiting it is how back-pressure reaches the producer.
Each write first passes the object's output gate, so a chunk never leaves before the storage
writes made before it are durable: a chunk that must wait (for an fsync, or for the commit of a
``transaction()`` still open) is held and delivered in order, and ``write()`` still does not
block on it.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import StreamError
from . import _state
from .chunks import to_chunk
from .held import HeldOutput
from .jsclass import JsClass
from .readable import ReadableStream
from .streams import StreamCore

__all__ = ["TransformStream", "WritableStream", "WritableStreamDefaultWriter"]

_CLOSED = "This WritableStream has been closed."
_LOCKED = "This WritableStream is currently locked to a writer."


def _rejected(error: BaseException) -> asyncio.Future[None]:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.set_exception(error)
    return future


def _resolved() -> asyncio.Future[None]:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.set_result(None)
    return future


class _Sink:
    """Where a writable stream's chunks go: a stream core (identity transform) or callbacks.

    Chunks that must wait for the output gate wait in ``held`` (made on first need); a close
    waits behind them.
    """

    __slots__ = ("closed", "core", "held", "on_abort", "on_close", "on_write")

    def __init__(
        self,
        core: StreamCore | None = None,
        on_write: Callable[[bytes], Any] | None = None,
        on_close: Callable[[], Any] | None = None,
        on_abort: Callable[[object], Any] | None = None,
    ) -> None:
        self.core = core
        self.on_write = on_write
        self.on_close = on_close
        self.on_abort = on_abort
        self.closed = False
        self.held: HeldOutput | None = None

    def send(self, barrier: asyncio.Future[None] | None, deliver: Callable[[], None]) -> None:
        """Deliver now, or behind the output gate and what already waits there."""
        if barrier is None and self.held is None:
            deliver()
            return
        if self.held is None:
            self.held = HeldOutput(self._gate_failed)
        self.held.send(barrier, deliver)

    def _gate_failed(self, error: BaseException) -> None:
        """The storage writes the held chunks waited for failed: the reader sees the error."""
        if self.core is not None:
            self.core.fail(StreamError(f"the Durable Object writing this stream failed: {error}"))


class WritableStreamDefaultWriter:
    """``writable.getWriter()``: ``write``, ``close``, ``abort``, ``ready``, ``desiredSize``."""

    __slots__ = ("_released", "_sink", "_stream")

    def __init__(self, stream: WritableStream) -> None:
        self._stream = stream
        self._sink = stream._sink
        self._released = False

    def _check(self) -> BaseException | None:
        if self._released:
            return StreamError("This WritableStreamDefaultWriter has been released.")
        sink = self._sink
        if sink.closed:
            return StreamError(_CLOSED)
        core = sink.core
        if core is not None and not core.readable:
            error = core.error
            return error if error is not None else StreamError(_CLOSED)
        return None

    def write(self, chunk: Any = None) -> asyncio.Future[None]:
        """Queue ``chunk`` (bytes-like) now; the result settles when the stream has room."""
        problem = self._check()
        if problem is not None:
            return _rejected(problem)
        data = to_chunk(chunk, "WritableStream write()")
        barrier = _state.before_output()  # the output gate: earlier writes are durable first
        sink = self._sink
        core = sink.core
        if core is not None:
            sink.send(barrier, functools.partial(core.enqueue, data))
            return core.wait_room()
        assert sink.on_write is not None
        if barrier is None and sink.held is None:
            return asyncio.ensure_future(_call(sink.on_write, data))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        sink.send(barrier, lambda: _chain(done, _call(sink.on_write, data)))
        return done

    def close(self) -> asyncio.Future[None]:
        """No more chunks; settles once everything written was read (or the stream failed)."""
        problem = self._check()
        if problem is not None:
            return _rejected(problem)
        sink = self._sink
        sink.closed = True
        if sink.core is not None:
            sink.send(None, sink.core.close)  # after the chunks held behind the output gate
            return sink.core.drained()
        if sink.held is not None and sink.held.holding:  # after the chunks still held
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            sink.send(None, lambda: _chain(done, _call(sink.on_close)))
            return done
        return asyncio.ensure_future(_call(sink.on_close)) if sink.on_close else _resolved()

    def abort(self, reason: object = None) -> asyncio.Future[None]:
        """Fail the stream: the reader sees ``reason`` as an error."""
        sink = self._sink
        if sink.closed and sink.core is None:
            return _resolved()
        sink.closed = True
        error = reason if isinstance(reason, BaseException) else StreamError(str(reason))
        if sink.core is not None:
            sink.core.fail(error)
            return _resolved()
        return asyncio.ensure_future(_call(sink.on_abort, reason)) if sink.on_abort else _resolved()

    def releaseLock(self) -> None:
        if not self._released:
            self._released = True
            self._stream._locked = False

    @property
    def ready(self) -> asyncio.Future[None]:
        core = self._sink.core
        return core.wait_room() if core is not None else _resolved()

    @property
    def desiredSize(self) -> int | None:
        core = self._sink.core
        if core is None:
            return 0 if self._sink.closed else 1
        return core.desired_size()

    @property
    def closed(self) -> asyncio.Future[None]:
        core = self._sink.core
        return core.drained() if core is not None else _resolved()


def _chain(done: asyncio.Future[None], work: Any) -> None:
    """Run coroutine ``work`` as a task; ``done`` settles as it does."""

    def settle(task: asyncio.Future[None]) -> None:
        if done.done():
            return
        error = task.exception() if not task.cancelled() else asyncio.CancelledError()
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(None)

    asyncio.ensure_future(work).add_done_callback(settle)


async def _call(fn: Callable[..., Any] | None, *args: Any) -> None:
    if fn is None:
        return
    result = fn(*args)
    if inspect.isawaitable(result):
        await result


class WritableStream(metaclass=JsClass):
    """``js.WritableStream``: ``getWriter()``, ``locked``, ``close()``, ``abort()``."""

    __slots__ = ("_locked", "_sink")

    def __init__(self, sink: _Sink) -> None:
        """doemu-internal; user code calls ``WritableStream.new(...)`` or takes ``ts.writable``."""
        self._sink = sink
        self._locked = False

    @classmethod
    def _new(
        cls, underlyingSink: Any = None, strategy: Any = None, /, **sink: Any
    ) -> WritableStream:
        """``new WritableStream({write, close, abort})``: the callbacks may be ``async``."""
        options: dict[str, Any] = (
            dict(underlyingSink or {}) if isinstance(underlyingSink, Mapping) else {}
        )
        options.update(sink)
        unknown = set(options) - {"start", "write", "close", "abort", "type"}
        if unknown:
            raise TypeError(f"WritableStream.new() got unknown sink options {sorted(unknown)}")
        write = options.get("write")
        return cls(
            _Sink(
                on_write=write or (lambda _chunk: None),
                on_close=options.get("close"),
                on_abort=options.get("abort"),
            )
        )

    @property
    def locked(self) -> bool:
        return self._locked

    def getWriter(self) -> WritableStreamDefaultWriter:
        if self._locked:
            raise StreamError(_LOCKED)
        self._locked = True
        return WritableStreamDefaultWriter(self)

    async def close(self) -> None:
        if self._locked:
            raise StreamError(_LOCKED)
        await WritableStreamDefaultWriter(self).close()

    async def abort(self, reason: object = None) -> None:
        if self._locked:
            raise StreamError(_LOCKED)
        await WritableStreamDefaultWriter(self).abort(reason)


class TransformStream(metaclass=JsClass):
    """``js.TransformStream``: Workers' identity transform (``readable`` and ``writable``)."""

    __slots__ = ("readable", "writable")

    def __init__(self) -> None:
        core = StreamCore()
        self.readable = ReadableStream(core)
        self.writable = WritableStream(_Sink(core))

    @classmethod
    def _new(cls, transformer: Any = None, *strategies: Any, **kwargs: Any) -> TransformStream:
        if transformer is not None or kwargs:
            raise NotImplementedError(
                "doemu's TransformStream is Workers' identity transform: TransformStream.new() "
                "takes no transformer; transform chunks in your own code before writing them"
            )
        return cls()
