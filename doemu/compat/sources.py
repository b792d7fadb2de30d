"""Where a stream's chunks come from: a JS-style source, an async iterator, bytes, a tee.

* ``ReadableStream.new(start=…, pull=…, cancel=…)`` (or a source mapping) is JavaScript's
  underlying source: the callbacks receive a controller (``enqueue``, ``close``, ``error``,
  ``desiredSize``) and may be ``async``.
* :func:`core_from_iterator` feeds a stream from an async iterator of bytes, one chunk per read
  (an outbound ``fetch`` body, an uploaded request body): nothing is read before it is asked for.
* :func:`tee_cores` splits a stream in two.

Each returns the :class:`~doemu.compat.streams.StreamCore`; :mod:`doemu.compat.readable` wraps it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from ..errors import StreamError
from .chunks import to_chunk
from .streams import LOCKED, StreamCore

__all__ = [
    "ReadableStreamDefaultController",
    "core_from_iterator",
    "core_from_source",
    "core_of_bytes",
    "tee_cores",
]


class ReadableStreamDefaultController:
    """What a JS-style source's callbacks get: ``enqueue``, ``close``, ``error``,
    ``desiredSize``."""

    __slots__ = ("_core",)

    def __init__(self, core: StreamCore) -> None:
        self._core = core

    def enqueue(self, chunk: Any = None) -> None:
        if not self._core.readable:
            raise StreamError("This ReadableStream is closed: enqueue() is not allowed.")
        self._core.enqueue(to_chunk(chunk, "ReadableStream controller.enqueue()"))

    def close(self) -> None:
        if not self._core.readable:
            raise StreamError("This ReadableStream is already closed.")
        self._core.close()

    def error(self, reason: object = None) -> None:
        error = reason if isinstance(reason, BaseException) else StreamError(str(reason))
        self._core.fail(error)

    @property
    def desiredSize(self) -> int | None:
        return self._core.desired_size()


def _callback(source: Mapping[str, Any], name: str) -> Callable[..., Any] | None:
    fn = source.get(name)
    if fn is not None and not callable(fn):
        raise TypeError(f"ReadableStream source's {name} must be a function, got {fn!r}")
    return fn


def core_from_source(underlying: Any, strategy: Any, extra: Mapping[str, Any]) -> StreamCore:
    """``ReadableStream.new(source, strategy, **source_callbacks)``."""
    source: dict[str, Any] = {}
    if underlying is not None:
        if isinstance(underlying, Mapping):
            source.update(underlying)
        else:  # an object with start/pull/cancel attributes
            for name in ("start", "pull", "cancel", "type"):
                if hasattr(underlying, name):
                    source[name] = getattr(underlying, name)
    source.update(extra)
    unknown = set(source) - {"start", "pull", "cancel", "type", "autoAllocateChunkSize"}
    if unknown:
        raise TypeError(f"ReadableStream.new() got unknown source options {sorted(unknown)}")
    start, pull, cancel = (_callback(source, n) for n in ("start", "pull", "cancel"))
    controller_box: list[ReadableStreamDefaultController] = []
    started: list[Awaitable[Any]] = []

    async def do_pull(core: StreamCore) -> None:
        if started:
            await started.pop()
        if pull is not None:
            result = pull(controller_box[0])
            if inspect.isawaitable(result):
                await result

    def on_cancel(error: BaseException) -> Any:
        return None if cancel is None else cancel(str(error))

    hwm = _high_water_mark(strategy)
    core = StreamCore(
        pull=do_pull, on_cancel=on_cancel, **({"high_water_mark": hwm} if hwm else {})
    )
    controller = ReadableStreamDefaultController(core)
    controller_box.append(controller)
    if start is not None:
        result = start(controller)
        if inspect.isawaitable(result):
            started.append(asyncio.ensure_future(result))
    return core


def _high_water_mark(strategy: Any) -> int | None:
    if isinstance(strategy, Mapping) and isinstance(strategy.get("highWaterMark"), int | float):
        return int(strategy["highWaterMark"])
    return None


def core_from_iterator(
    chunks: AsyncIterator[bytes], on_cancel: Callable[[], Awaitable[None]] | None = None
) -> StreamCore:
    """A stream that reads ``chunks`` only as fast as its consumer does."""
    iterator = aiter(chunks)

    async def pull(core: StreamCore) -> None:
        try:
            chunk = await anext(iterator)
        except StopAsyncIteration:
            core.close()
            if on_cancel is not None:
                await on_cancel()
            return
        if chunk:
            core.enqueue(bytes(chunk))

    def cancelled(_error: BaseException) -> Any:
        return None if on_cancel is None else on_cancel()

    return StreamCore(pull=pull, on_cancel=cancelled)


def tee_cores(source: StreamCore) -> tuple[StreamCore, StreamCore]:
    """Two branches that each get every chunk of ``source``; cancelling both cancels it."""
    if source.locked:
        raise StreamError(LOCKED)
    source.locked = True
    branches: list[StreamCore] = []
    cancelled: set[int] = set()
    lock = asyncio.Lock()  # one read of the source at a time, whichever branch asks

    async def pull(core: StreamCore) -> None:
        async with lock:
            if not core.waiting:
                return  # the other branch's read already delivered to this one
            chunk = await source.read()
            for branch in branches:
                if chunk is None:
                    branch.close()
                else:
                    branch.enqueue(chunk)

    def cancel_branch(index: int) -> Callable[[BaseException], None]:
        def cancel(error: BaseException) -> None:
            cancelled.add(index)
            if len(cancelled) == len(branches):
                source.cancel(error)

        return cancel

    for index in range(2):
        branches.append(StreamCore(pull=pull, on_cancel=cancel_branch(index)))
    return branches[0], branches[1]


def core_of_bytes(data: bytes) -> StreamCore:
    """A stream that holds ``data`` (one chunk) and is already closed."""
    core = StreamCore()
    if data:
        core.enqueue(data)
    core.close()
    return core
