"""Producing UI-message streams without writing SSE by hand.

``on_chat_message`` returns a ``Response`` whose body is a UI-message stream (research §4). The
AI SDK builds one with ``streamText(...).toUIMessageStreamResponse()``; in Python the pieces are:

* :func:`text_stream` — a reply from text deltas (a sync or async iterable of strings, e.g. the
  deltas of a provider's streaming API), with exactly the chunks ``toUIMessageStream`` emits;
* :func:`tool_call` — the chunks of one tool call (input streamed, then available, then
  optionally the output of a server-side tool or an approval request);
* :func:`ui_message_stream` — wraps any content chunks in ``start``/``start-step`` …
  ``finish-step``/``finish``;
* :func:`ui_message_response` — the ``Response``: SSE body streamed as the chunks come,
  :data:`~agents.chat.transcript.chunks.UI_MESSAGE_STREAM_HEADERS`, ``data: [DONE]`` at the end.

So a complete ``on_chat_message`` can be ``return ui_message_response(text_stream(deltas))``.

The body is a pull-based ``ReadableStream`` (``ReadableStream.new({pull, cancel})``) rather than
a ``TransformStream`` fed by a background task: the producer only runs when the reader asks for
the next chunk (back-pressure for free), nothing outlives the response (no task to keep alive
with ``waitUntil`` — which needs a ``ctx`` this function does not have), and a reader that gives
up cancels the stream, which closes the producer (its ``finally`` blocks run). On Cloudflare the
source is a JS object built with ``to_js(..., dict_converter=Object.fromEntries)`` holding
``create_proxy`` callbacks and each event is a ``Uint8Array`` from ``TextEncoder``; on doemu
those same calls are its stand-ins, so the code is identical on both.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterable, Mapping
from contextlib import aclosing, suppress
from typing import Any

from js import Object, ReadableStream, TextEncoder
from pyodide.ffi import create_proxy, to_js
from workers import Response

from ...core.protocol import dumps
from ..transcript.chunks import (
    FINISH,
    FINISH_STEP,
    START,
    START_STEP,
    TEXT_DELTA,
    TEXT_END,
    TEXT_START,
    TOOL_APPROVAL_REQUEST,
    TOOL_INPUT_AVAILABLE,
    TOOL_INPUT_DELTA,
    TOOL_INPUT_START,
    TOOL_OUTPUT_AVAILABLE,
    UI_MESSAGE_STREAM_HEADERS,
    Chunk,
    sse_text,
)

__all__ = [
    "NO_OUTPUT",
    "new_tool_call_id",
    "sse_stream",
    "text_stream",
    "tool_call",
    "ui_message_response",
    "ui_message_stream",
]


class _NoOutput:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_OUTPUT"


#: "This tool call has no output": a client-side tool, whose result the browser sends later.
#: (``None`` is a real output: the SDK sends ``output: null`` for a tool that returned nothing.)
NO_OUTPUT: Any = _NoOutput()

_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def new_tool_call_id() -> str:
    """A fresh ``call_<24 alphanumerics>`` tool-call id (the shape providers use)."""
    return "call_" + "".join(secrets.choice(_ALPHABET) for _ in range(24))


async def _each(items: Iterable[Any] | AsyncIterable[Any]) -> AsyncGenerator[Any, None]:
    """Iterate a sync or async iterable; closing this generator closes ``items`` at once (a
    cancelled response body must run the producer's ``finally`` now, not at garbage collection)."""
    iterator: Any = aiter(items) if isinstance(items, AsyncIterable) else iter(items)
    try:
        if isinstance(items, AsyncIterable):
            async for item in iterator:
                yield item
        else:
            for item in iterator:
                yield item
    finally:
        if hasattr(iterator, "aclose"):
            await iterator.aclose()
        elif hasattr(iterator, "close"):
            iterator.close()


async def ui_message_stream(
    content: Iterable[Chunk] | AsyncIterable[Chunk],
    *,
    message_id: str | None = None,
    finish_reason: str = "stop",
) -> AsyncIterator[Chunk]:
    """``content`` as one single-step reply: ``start`` (with ``messageId`` when given),
    ``start-step``, the content chunks, ``finish-step``, ``finish {finishReason}`` (§4.1).

    ``start`` goes out at once; ``start-step`` just before the first content chunk (or at the
    end when there is none), as ``streamText`` sends it once the model's stream has begun: a
    model call refused before its first chunk (an HTTP 429 or 500) leaves only ``start``, and
    the turn saves no empty step."""
    yield {"type": START} if message_id is None else {"type": START, "messageId": message_id}
    stepped = False
    async with aclosing(_each(content)) as items:
        async for chunk in items:
            if not stepped:
                stepped = True
                yield {"type": START_STEP}
            yield chunk
    if not stepped:
        yield {"type": START_STEP}
    yield {"type": FINISH_STEP}
    yield {"type": FINISH, "finishReason": finish_reason}


async def _text_block(
    texts: Iterable[str] | AsyncIterable[str], text_id: str
) -> AsyncIterator[Chunk]:
    started = False
    async with aclosing(_each(texts)) as deltas:
        async for delta in deltas:
            if delta:  # streamText drops empty text deltas
                if not started:  # the provider's text block opens with its first text
                    started = True
                    yield {"type": TEXT_START, "id": text_id}
                yield {"type": TEXT_DELTA, "id": text_id, "delta": delta}
    if started:
        yield {"type": TEXT_END, "id": text_id}


def text_stream(
    texts: Iterable[str] | AsyncIterable[str],
    *,
    message_id: str | None = None,
    text_id: str = "txt-0",
) -> AsyncIterator[Chunk]:
    """A text reply, chunk for chunk what ``streamText().toUIMessageStream()`` emits (§4.1):

    ``{"type":"start"}`` (``messageId`` only when given), ``{"type":"start-step"}``,
    ``{"type":"text-start","id":"txt-0"}``, a ``text-delta`` per non-empty string of ``texts``,
    ``{"type":"text-end","id":"txt-0"}``, ``{"type":"finish-step"}``,
    ``{"type":"finish","finishReason":"stop"}``.

    ``txt-0`` is the text id the AI SDK's OpenAI-compatible and OpenAI chat providers give a
    step's text. ``start-step`` and ``text-start`` wait for the first delta, as they do in
    ``streamText``: if ``texts`` raises before it (the provider refused the request), the
    client has seen only ``start``; a reply with no text has no text part.
    """
    return ui_message_stream(_text_block(texts, text_id), message_id=message_id)


def tool_call(
    tool_name: str,
    input: Any,
    *,
    tool_call_id: str | None = None,
    output: Any = NO_OUTPUT,
    input_deltas: Iterable[str] | None = None,
    stream_input: bool = True,
    approval_id: str | None = None,
) -> list[Chunk]:
    """The chunks of one tool call, as ``toUIMessageStream`` emits them (§4.1).

    ``tool-input-start``, the input's JSON text as ``tool-input-delta`` chunks (one delta holding
    all of it unless ``input_deltas`` splits it), ``tool-input-available`` with the parsed
    ``input``; then ``tool-output-available`` when ``output`` is given (a server-side tool that
    ran), or ``tool-approval-request`` when ``approval_id`` is given (a tool that needs the user's
    approval first). With neither, the call waits for a client-side tool's result — end the
    reply with ``finish_reason="tool-calls"``. ``stream_input=False`` leaves out the start and the
    deltas, as for a model that sends the whole call at once.
    """
    if output is not NO_OUTPUT and approval_id is not None:
        raise ValueError(
            "a tool call awaiting approval has not run yet: give output or approval_id, not both"
        )
    call_id = tool_call_id if tool_call_id is not None else new_tool_call_id()
    deltas = [dumps(input)] if input_deltas is None else [d for d in input_deltas if d]
    chunks: list[Chunk] = []
    if stream_input:
        chunks.append({"type": TOOL_INPUT_START, "toolCallId": call_id, "toolName": tool_name})
        chunks += [
            {"type": TOOL_INPUT_DELTA, "toolCallId": call_id, "inputTextDelta": d} for d in deltas
        ]
    chunks.append(
        {"type": TOOL_INPUT_AVAILABLE, "toolCallId": call_id, "toolName": tool_name, "input": input}
    )
    if approval_id is not None:
        chunks.append(
            {"type": TOOL_APPROVAL_REQUEST, "approvalId": approval_id, "toolCallId": call_id}
        )
    elif output is not NO_OUTPUT:
        chunks.append({"type": TOOL_OUTPUT_AVAILABLE, "toolCallId": call_id, "output": output})
    return chunks


async def sse_stream(chunks: Iterable[Chunk] | AsyncIterable[Chunk]) -> AsyncIterator[str]:
    """Each chunk as its SSE event text, then ``data: [DONE]`` (``JsonToSseTransformStream``)."""
    async with aclosing(_each(chunks)) as items:
        async for chunk in items:
            yield sse_text(chunk)
    yield "data: [DONE]\n\n"


def ui_message_response(
    chunks: Iterable[Chunk] | AsyncIterable[Chunk],
    *,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """A streamed UI-message-stream ``Response`` (``createUIMessageStreamResponse``, §4.2).

    One SSE event is enqueued per chunk, as the chunk is produced; ``headers`` are added to (or
    override) :data:`~agents.chat.transcript.chunks.UI_MESSAGE_STREAM_HEADERS`. If producing a
    chunk raises,
    the body errors with that exception (the chat agent's reader sees it, as it would see a
    failed model stream); if the reader cancels, the producer is closed.
    """
    source = _SseSource(sse_stream(chunks))
    stream = ReadableStream.new(
        to_js(
            {"pull": create_proxy(source.pull), "cancel": create_proxy(source.cancel)},
            dict_converter=Object.fromEntries,
        )
    )
    merged = {**UI_MESSAGE_STREAM_HEADERS, **(headers or {})}
    return Response(stream, status=status, headers=merged)


class _SseSource:
    """The pull source behind :func:`ui_message_response`'s body.

    A cancel stops a read in progress: the producer's pending ``anext`` runs as a task, which
    the cancel cancels, so a producer waiting on a quiet provider runs its ``finally`` (closing
    the upstream request) now — the stall watchdog's abort must not leave it open.
    """

    __slots__ = ("_cancelled", "_encoder", "_events", "_pending")

    def __init__(self, events: AsyncIterator[str]) -> None:
        self._events = events
        self._encoder = TextEncoder.new()
        self._pending: asyncio.Future[str] | None = None
        self._cancelled = False

    async def pull(self, controller: Any) -> None:
        if self._cancelled:
            return
        pending = self._pending = asyncio.ensure_future(anext(self._events))
        try:
            event = await pending
        except StopAsyncIteration:
            controller.close()
            return
        except asyncio.CancelledError:
            if self._cancelled and pending.cancelled():
                return  # the reader cancelled this read: the producer is closed
            raise
        finally:
            self._pending = None
        if self._cancelled:  # cancelled while this chunk was being produced
            await self._close()
            return
        controller.enqueue(self._encoder.encode(event))

    async def cancel(self, reason: Any = None) -> None:
        self._cancelled = True
        pending = self._pending
        if pending is not None and not pending.done():
            pending.cancel()  # the producer's finally blocks run now
            with suppress(asyncio.CancelledError, Exception):
                await pending
        await self._close()

    async def _close(self) -> None:
        aclose = getattr(self._events, "aclose", None)
        if aclose is not None:
            with suppress(RuntimeError):  # closed already by the cancelled read
                await aclose()
