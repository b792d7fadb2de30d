"""What ``on_chat_message`` returns, read as UI-message chunks.

The SDK accepts a ``Response`` whose body is the AI SDK's UI-message stream as SSE (or plain
text), and so does this port; the Pythonic alternative is an async (or plain) iterable of chunk
dicts, which needs no SSE at all. :func:`reply_chunks` turns any of them into one async stream of
chunks, stopping when the turn is aborted, and :func:`is_response` tells a ``Response`` apart.

Reading a body is portable: ``async for piece in response.body`` yields byte buffers on doemu and
``Uint8Array`` proxies on Cloudflare (both have ``to_bytes()``). SSE lines split across reads
are kept whole (:class:`~agents.chat.transcript.chunks.SseDecoder`), and so are UTF-8 characters
split
across the reads of a plain-text body.
"""

from __future__ import annotations

import asyncio
import codecs
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from ..transcript.chunks import Chunk, SseDecoder, is_event_stream
from ..transcript.messages import plain_text_chunks
from .queue import wait_for_time

__all__ = ["AbortScope", "StallWatchdog", "is_response", "reply_chunks"]


def is_response(value: Any) -> bool:
    """Whether ``value`` is a Workers ``Response`` (duck-typed: the SDK's or a compatible one)."""
    return hasattr(value, "headers") and hasattr(value, "status") and hasattr(value, "body")


class AbortScope:
    """``async with AbortScope(abort):`` — when ``abort`` is set, the await the block is blocked
    in (a model's stalled read, a provider that sends nothing) is cancelled, and the block ends
    quietly, as if the stream had ended.

    Checking ``abort`` between chunks is not enough: a stalled upstream never yields the next
    chunk, and a cancelled turn would hang until the provider gave up (the SDK has its
    ``AbortSignal`` reach ``fetch``; here the signal is an ``asyncio.Event``, so the scope turns
    it into a cancellation of the reading task). One watcher per turn, not a task per chunk.
    """

    __slots__ = ("_abort", "_exited", "_task", "_watch", "aborted")

    def __init__(self, abort: asyncio.Event) -> None:
        self._abort = abort
        self._exited = False
        self._task: asyncio.Task[Any] | None = None
        self._watch: asyncio.Future[Any] | None = None
        #: Whether the scope cancelled the block (the turn was aborted mid-await).
        self.aborted = False

    async def __aenter__(self) -> AbortScope:
        self._task = asyncio.current_task()
        self._watch = asyncio.ensure_future(self._abort.wait())
        self._watch.add_done_callback(self._fire)
        return self

    def _fire(self, watch: asyncio.Future[Any]) -> None:
        if watch.cancelled() or self._exited or self._task is None:
            return
        self.aborted = True
        self._task.cancel()

    async def __aexit__(self, kind: Any, exc: Any, tb: Any) -> bool:
        self._exited = True
        if self._watch is not None:
            self._watch.cancel()
        if not self.aborted:
            return False
        assert self._task is not None
        self._task.uncancel()
        if kind is None:
            # The cancel arrived after the block's last await: take it here, not at the
            # caller's next await.
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError:
                pass
            return False
        return kind is asyncio.CancelledError


class StallWatchdog:
    """``async with`` around reading a reply: when no chunk comes for ``timeout_ms`` (by the
    agent's clock), the turn's ``abort`` is set — which cancels the stalled read and closes the
    upstream request, rather than leaving it open until the provider gives up — and
    :attr:`stalled` says why. ``timeout_ms`` 0: off."""

    __slots__ = ("_abort", "_last", "_now", "_task", "_timeout", "stalled")

    def __init__(self, now: Callable[[], float], timeout_ms: float, abort: asyncio.Event) -> None:
        self._now = now
        self._timeout = timeout_ms
        self._abort = abort
        self._last = 0.0
        self._task: asyncio.Task[None] | None = None
        self.stalled = False

    def fed(self) -> None:
        """A chunk arrived."""
        self._last = self._now()

    async def _watch(self) -> None:
        while not self._abort.is_set():
            await wait_for_time(self._now, self._last + self._timeout)
            if self._now() >= self._last + self._timeout and not self._abort.is_set():
                self.stalled = True
                self._abort.set()

    async def __aenter__(self) -> StallWatchdog:
        if self._timeout > 0:
            self._last = self._now()
            self._task = asyncio.ensure_future(self._watch())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()


def _as_bytes(piece: Any) -> bytes:
    if isinstance(piece, bytes | bytearray | memoryview):
        return bytes(piece)
    to_bytes = getattr(piece, "to_bytes", None)
    if to_bytes is not None:
        return bytes(to_bytes())
    if isinstance(piece, str):
        return piece.encode()
    return bytes(piece)


async def _body_pieces(body: Any, abort: asyncio.Event) -> AsyncIterator[bytes]:
    iterator = body.__aiter__()
    try:
        while not abort.is_set():
            try:
                piece = await iterator.__anext__()
            except StopAsyncIteration:
                return
            data = _as_bytes(piece)
            if data:
                yield data
    finally:
        cancel = getattr(body, "cancel", None)
        if abort.is_set() and cancel is not None:
            try:
                result = cancel()
                if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                    await result
            except Exception:
                pass


async def _response_chunks(
    response: Any, request_id: str, abort: asyncio.Event
) -> AsyncIterator[Chunk]:
    body = response.body
    if body is None:
        return
    content_type = response.headers.get("content-type")
    if is_event_stream(content_type):
        decoder = SseDecoder()
        async for data in _body_pieces(body, abort):
            for chunk in decoder.feed(data):
                yield chunk
        if not abort.is_set():
            for chunk in decoder.finish():
                yield chunk
        return
    # Plain text: the SDK's synthesised text block, the request id as the part id.
    start, *_, end = plain_text_chunks(request_id, [])
    yield start
    text = codecs.getincrementaldecoder("utf-8")("replace")
    async for data in _body_pieces(body, abort):
        delta = text.decode(data)
        if delta:
            yield {"type": "text-delta", "id": request_id, "delta": delta}
    tail = text.decode(b"", final=True)
    if tail:
        yield {"type": "text-delta", "id": request_id, "delta": tail}
    yield end


async def reply_chunks(result: Any, request_id: str, abort: asyncio.Event) -> AsyncIterator[Chunk]:
    """The chunks of what ``on_chat_message`` returned, until the end or ``abort``.

    A chunk that is not a dict with a string ``type`` is skipped (the SDK drops unparseable
    lines the same way).
    """
    if is_response(result):
        source: Any = _response_chunks(result, request_id, abort)
    elif hasattr(result, "__aiter__"):
        source = result
    elif isinstance(result, Iterable) and not isinstance(result, str | bytes | dict):
        source = _from_iterable(result)
    else:
        raise TypeError(
            "on_chat_message() must return a Response, an (async) iterable of UI-message "
            f"chunks, or None; got {type(result).__name__}"
        )
    iterator = source.__aiter__()
    try:
        while not abort.is_set():
            try:
                chunk = await iterator.__anext__()
            except StopAsyncIteration:
                return
            if isinstance(chunk, dict) and isinstance(chunk.get("type"), str):
                yield chunk
    finally:
        close = getattr(iterator, "aclose", None)
        if close is not None:
            try:
                await close()
            except Exception:
                pass


async def _from_iterable(items: Iterable[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item
