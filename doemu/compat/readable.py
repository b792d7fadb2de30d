"""``ReadableStream``: JavaScript's byte streams, as Python Workers code reaches them via ``js``.

The view user code holds (``getReader``, ``cancel``, ``pipeTo``, ``pipeThrough``, ``tee``,
``locked``, and ``async for``) over a :class:`~doemu.compat.streams.StreamCore`, where the queue,
back-pressure and cancellation live. A stream dropped without ever being read is cancelled, so
the producer's next write fails instead of waiting forever.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ..errors import StreamError
from .jsclass import JsClass
from .jsproxy import JsBuffer
from .sources import core_from_iterator, core_from_source, core_of_bytes, tee_cores
from .streams import LOCKED, ReadableStreamDefaultReader, StreamCore

__all__ = ["ReadableStream", "core_of", "pipe", "stream_from_iterator", "stream_of"]


class ReadableStream(metaclass=JsClass):
    """A stream of byte chunks (``js.ReadableStream``); see the module docstring."""

    __slots__ = ("__weakref__", "_core")

    def __init__(self, core: StreamCore) -> None:
        """doemu-internal; user code calls ``ReadableStream.new(...)`` or gets one from a body."""
        self._core = core
        weakref.finalize(self, core.dropped)

    @classmethod
    def _new(
        cls, underlyingSource: Any = None, strategy: Any = None, /, **source: Any
    ) -> ReadableStream:
        """``new ReadableStream({start, pull, cancel})``: callbacks get a controller with
        ``enqueue(chunk)``, ``close()``, ``error(reason)`` and ``desiredSize``."""
        return cls(core_from_source(underlyingSource, strategy, source))

    @property
    def locked(self) -> bool:
        return self._core.locked

    def getReader(self, options: Any = None) -> ReadableStreamDefaultReader:
        core = self._core
        if core.locked:
            raise StreamError(LOCKED)
        core.locked = True
        return ReadableStreamDefaultReader(core)

    async def cancel(self, reason: object = None) -> None:
        if self._core.locked:
            raise StreamError(LOCKED)
        self._core.cancel(reason)

    async def pipeTo(self, destination: Any, options: Any = None, /, **kwargs: Any) -> None:
        """Write every chunk to the ``WritableStream`` ``destination``, then close it."""
        await pipe(self._core, destination, {**(options or {}), **kwargs})

    def pipeThrough(self, transform: Any, options: Any = None, /, **kwargs: Any) -> ReadableStream:
        """Pipe into ``transform.writable`` (in the background); return ``transform.readable``."""
        task = asyncio.get_running_loop().create_task(
            pipe(self._core, transform.writable, {**(options or {}), **kwargs})
        )
        _background.add(task)
        task.add_done_callback(_background.discard)
        readable: ReadableStream = transform.readable
        return readable

    def tee(self) -> list[ReadableStream]:
        """Two streams that each see every chunk (the source is read once)."""
        if self._core.locked:
            raise StreamError(LOCKED)
        return [ReadableStream(core) for core in tee_cores(self._core)]

    def __aiter__(self) -> AsyncIterator[JsBuffer]:
        return _iterate(self.getReader())

    def __repr__(self) -> str:
        return f"<ReadableStream {'readable' if self._core.readable else 'ended'}>"


#: Background pipes, kept referenced until they finish.
_background: set[asyncio.Task[Any]] = set()


async def _iterate(reader: ReadableStreamDefaultReader) -> AsyncIterator[JsBuffer]:
    """``async for chunk in stream``: an early exit cancels the stream, as in JavaScript."""
    finished = False
    try:
        while True:
            result = await reader.read()
            if result.done:
                finished = True
                return
            assert result.value is not None
            yield result.value
    finally:
        if not finished:
            reader._core.cancel(None)
        reader.releaseLock()


def core_of(stream: ReadableStream) -> StreamCore:
    """The state behind a ``ReadableStream`` (what the server and bodies work with)."""
    return stream._core


def stream_of(data: bytes) -> ReadableStream:
    """A stream that holds ``data`` and is already closed."""
    return ReadableStream(core_of_bytes(data))


def stream_from_iterator(chunks: AsyncIterator[bytes], on_cancel: Any = None) -> ReadableStream:
    """A stream that reads ``chunks`` only as fast as its consumer does."""
    return ReadableStream(core_from_iterator(chunks, on_cancel))


async def pipe(core: StreamCore, destination: Any, options: Mapping[str, Any]) -> None:
    """``source.pipeTo(destination)``: every chunk, in order, then close (unless told not to).

    ``destination`` is any writable stream (its ``getWriter()``: ``write``, ``close``,
    ``abort``, ``releaseLock``).
    """
    get_writer = getattr(destination, "getWriter", None)
    if get_writer is None:
        raise TypeError(f"pipeTo() expects a WritableStream, got {type(destination).__name__}")
    if core.locked:
        raise StreamError(LOCKED)
    core.locked = True
    writer = get_writer()
    try:
        while True:
            try:
                chunk = await core.read()
            except BaseException as exc:
                if not options.get("preventAbort"):
                    await writer.abort(exc)
                raise
            if chunk is None:
                break
            try:
                await writer.write(chunk)
            except BaseException:
                if not options.get("preventCancel"):
                    core.cancel("the destination of pipeTo() failed")
                raise
        if not options.get("preventClose"):
            await writer.close()
    finally:
        writer.releaseLock()
        core.locked = False
