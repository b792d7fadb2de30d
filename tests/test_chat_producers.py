"""Producing UI-message streams: the helpers' exact chunks (research §4.1), and the streamed SSE
``Response`` read back through its body (directly and from a Durable Object, chunk by chunk),
cancelled, failing or stalled."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from workers import DurableObject

from agents.chat.streams.producers import (
    NO_OUTPUT,
    new_tool_call_id,
    sse_stream,
    text_stream,
    tool_call,
    ui_message_response,
    ui_message_stream,
)
from agents.chat.streams.scripted import demo_model
from agents.chat.transcript.chunks import UI_MESSAGE_STREAM_HEADERS, SseDecoder
from agents.chat.transcript.messages import AssistantMessage
from agents.core.protocol import dumps
from doemu.testing.plugin import HarnessFactory

from .chat_stream_reading import HELLO, Chunk, collect, decode, read_events, user
from .polling import eventually


# -- helpers ---------------------------------------------------------------------------------------
async def test_text_stream_is_what_stream_text_emits() -> None:
    assert await collect(text_stream(["Hello", ", ", "world"])) == HELLO

    async def deltas() -> AsyncIterator[str]:
        for delta in ["Hello", "", ", ", "world"]:  # empty deltas are dropped, as streamText does
            yield delta

    assert await collect(text_stream(deltas())) == HELLO
    chunks = await collect(text_stream(["x"], message_id="m1", text_id="msg_1"))
    assert chunks[0] == {"type": "start", "messageId": "m1"}
    assert chunks[2] == {"type": "text-start", "id": "msg_1"}


async def test_the_step_and_the_text_open_with_the_first_delta_as_in_stream_text() -> None:
    """``streamText`` sends ``start`` at once but ``start-step`` only when the model's stream
    has begun and ``text-start`` with its first text: a provider that refuses the request (or a
    reply with no text) leaves no empty step and no empty text part (issue 28, item 7)."""

    async def refused() -> AsyncIterator[str]:
        raise ConnectionRefusedError("HTTP 429")
        yield ""  # pragma: no cover

    got: list[Chunk] = []
    with pytest.raises(ConnectionRefusedError):
        async for chunk in text_stream(refused()):
            got.append(chunk)
    assert got == [{"type": "start"}]
    assert await collect(text_stream(["", ""])) == [
        {"type": "start"},
        {"type": "start-step"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop"},
    ]


def test_tool_call_chunks() -> None:
    assert tool_call("getWeather", {"city": "Paris"}, tool_call_id="call_1") == [
        {"type": "tool-input-start", "toolCallId": "call_1", "toolName": "getWeather"},
        {"type": "tool-input-delta", "toolCallId": "call_1", "inputTextDelta": '{"city":"Paris"}'},
        {
            "type": "tool-input-available",
            "toolCallId": "call_1",
            "toolName": "getWeather",
            "input": {"city": "Paris"},
        },
    ]
    ran = tool_call("t", {}, tool_call_id="c", output=None, input_deltas=["{", "", "}"])
    assert [c["type"] for c in ran] == [
        "tool-input-start",
        "tool-input-delta",
        "tool-input-delta",
        "tool-input-available",
        "tool-output-available",
    ]
    assert dumps(ran[-1]) == '{"type":"tool-output-available","toolCallId":"c","output":null}'
    approval = tool_call("d", {"x": 21}, tool_call_id="a", stream_input=False, approval_id="ap")
    assert approval == [
        {"type": "tool-input-available", "toolCallId": "a", "toolName": "d", "input": {"x": 21}},
        {"type": "tool-approval-request", "approvalId": "ap", "toolCallId": "a"},
    ]
    with pytest.raises(ValueError, match="not both"):
        tool_call("d", {}, output=1, approval_id="ap")
    generated = tool_call("t", {}, output=NO_OUTPUT)[0]["toolCallId"]
    assert generated.startswith("call_") and len(generated) == 29
    assert new_tool_call_id() != new_tool_call_id()


async def test_ui_message_stream_wraps_content_in_one_step() -> None:
    chunks = await collect(
        ui_message_stream(tool_call("t", {}, tool_call_id="c"), finish_reason="tool-calls")
    )
    assert chunks[:2] == [{"type": "start"}, {"type": "start-step"}]
    assert chunks[-2:] == [
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "tool-calls"},
    ]


async def test_sse_stream_frames_and_ends_with_done() -> None:
    events = [e async for e in sse_stream([{"type": "start"}])]
    assert events == ['data: {"type":"start"}\n\n', "data: [DONE]\n\n"]


# -- the streamed Response -------------------------------------------------------------------------
async def test_response_headers_and_body() -> None:
    response = ui_message_response(text_stream(["Hello", ", ", "world"]))
    assert response.status == 200
    for name, value in UI_MESSAGE_STREAM_HEADERS.items():
        assert response.headers.get(name) == value
    events = await read_events(response.body)
    # One SSE event per read, byte for byte as JsonToSseTransformStream writes them.
    assert events[3] == b'data: {"type":"text-delta","id":"txt-0","delta":"Hello"}\n\n'
    assert events[-1] == b"data: [DONE]\n\n"
    assert len(events) == len(HELLO) + 1
    assert decode(events) == HELLO


async def test_response_status_and_extra_headers() -> None:
    response = ui_message_response([{"type": "start"}], status=201, headers={"x-extra": "1"})
    assert response.status == 201
    assert response.headers.get("x-extra") == "1"
    assert response.headers.get("content-type") == "text/event-stream"
    assert await response.text() == 'data: {"type":"start"}\n\ndata: [DONE]\n\n'


async def test_response_streams_each_chunk_as_it_is_produced() -> None:
    gate = asyncio.Event()
    progress: list[str] = []

    async def chunks() -> AsyncIterator[Chunk]:
        yield {"type": "start"}
        progress.append("waiting")
        await gate.wait()
        progress.append("released")
        yield {"type": "finish"}

    reader = ui_message_response(chunks()).body.getReader()
    first = await reader.read()
    assert bytes(first.value) == b'data: {"type":"start"}\n\n'
    second = asyncio.ensure_future(reader.read())
    await eventually(lambda: progress == ["waiting"], what="the producer to wait at its gate")
    assert not second.done()  # nothing more until the producer goes on
    gate.set()
    assert bytes((await second).value) == b'data: {"type":"finish"}\n\n'
    assert bytes((await reader.read()).value) == b"data: [DONE]\n\n"
    assert (await reader.read()).done


async def test_cancelling_the_body_closes_the_producer() -> None:
    closed = asyncio.Event()

    async def chunks() -> AsyncIterator[Chunk]:
        try:
            for i in range(1000):
                yield {"type": "text-delta", "id": "t0", "delta": str(i)}
        finally:
            closed.set()

    def sync_chunks() -> Any:
        try:
            yield {"type": "start"}
            yield {"type": "finish"}
        finally:
            closed_sync.append(True)

    closed_sync: list[bool] = []
    for source in (chunks(), sync_chunks()):
        reader = ui_message_response(source).body.getReader()
        await reader.read()
        await reader.cancel("client went away")
    await eventually(closed.is_set, what="the async producer's finally")
    await eventually(lambda: closed_sync == [True], what="the sync producer's finally")


async def test_a_failing_producer_errors_the_body() -> None:
    async def chunks() -> AsyncIterator[Chunk]:
        yield {"type": "start"}
        raise RuntimeError("provider connection reset")

    reader = ui_message_response(chunks()).body.getReader()
    assert bytes((await reader.read()).value) == b'data: {"type":"start"}\n\n'
    with pytest.raises(RuntimeError, match="provider connection reset"):
        await reader.read()


# -- through a Durable Object ----------------------------------------------------------------------
#: The "slow" script's sleeps wait on ``SLOW["gate"]`` (the test releases them one at a time);
#: ``SLOW["sleeping"]`` counts the sleeps begun.
SLOW: dict[str, Any] = {}


async def gated_sleep(_seconds: float) -> None:
    SLOW["sleeping"] += 1
    await SLOW["gate"].get()


class ChatReplies(DurableObject):
    """Answers ``/<text>`` with the demo model's reply to a user message ``<text>``."""

    async def fetch(self, request: Any) -> Any:
        text = request.url.rsplit("/", 1)[-1]
        return demo_model(sleep=gated_sleep).response([user(text)])


async def test_a_durable_objects_streamed_reply_read_chunk_by_chunk(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"REPLIES": ChatReplies})
    response = await h.stub("REPLIES", "chat-producers-1").fetch("http://do/hi")
    assert response.status == 200
    assert response.headers.get("x-vercel-ai-ui-message-stream") == "v1"
    assert response.headers.get("content-type") == "text/event-stream"
    decoder = SseDecoder()
    message = AssistantMessage.new(1795689006530)
    async for piece in response.body:
        for chunk in decoder.feed(bytes(piece)):
            message.consume(chunk)
    assert decoder.finish() == [] and decoder.skipped == 0
    # The stored parts of research §3.8.
    assert dumps(message.parts) == (
        '[{"type":"step-start"},{"type":"text","text":"Hello, world","state":"done"}]'
    )


async def test_a_slow_reply_arrives_while_it_is_produced(doemu_harness: HarnessFactory) -> None:
    SLOW.update(gate=asyncio.Queue(), sleeping=0)
    h = await doemu_harness({"REPLIES": ChatReplies})
    response = await h.stub("REPLIES", "chat-producers-2").fetch("http://do/slow")
    reader = response.body.getReader()
    decoder = SseDecoder()
    received: list[Chunk] = []

    async def next_chunk() -> Chunk:
        while True:
            result = await reader.read()
            assert not result.done
            chunks = decoder.feed(bytes(result.value))
            if chunks:
                received.extend(chunks)
                return chunks[-1]

    assert [(await next_chunk())["type"] for _ in range(4)] == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
    ]
    for i in range(1, 25):  # each delta only once its sleep is released
        pending = asyncio.ensure_future(next_chunk())
        await eventually(lambda i=i: SLOW["sleeping"] == i, what=f"the producer's sleep {i}")
        assert not pending.done()  # the producer is asleep: nothing is buffered ahead
        SLOW["gate"].put_nowait(None)
        assert (await pending) == {"type": "text-delta", "id": "t0", "delta": f"w{i} "}
    rest = [chunk async for chunk in _drain(reader, decoder)]
    assert [c["type"] for c in rest] == ["text-end", "finish-step", "finish"]


async def _drain(reader: Any, decoder: SseDecoder) -> AsyncIterator[Chunk]:
    while not (result := await reader.read()).done:
        for chunk in decoder.feed(bytes(result.value)):
            yield chunk


async def test_cancelling_while_a_read_is_pending_stops_the_read_and_closes_the_upstream() -> None:
    """A ``text_stream`` whose provider went quiet (the stall watchdog's case): the body is
    cancelled while the next delta is still awaited; the pending read stops at once and the
    producer's ``finally`` (closing the upstream request) runs — not when a byte arrives."""
    upstream_closed, reading = asyncio.Event(), asyncio.Event()

    async def deltas() -> AsyncIterator[str]:
        try:
            yield "one "
            reading.set()
            await asyncio.Event().wait()  # the provider never sends another byte
            yield "never"
        finally:
            upstream_closed.set()

    reader = ui_message_response(text_stream(deltas())).body.getReader()
    for _ in range(4):  # start, start-step, text-start, the first delta
        await reader.read()
    pending = asyncio.ensure_future(reader.read())
    await eventually(reading.is_set, what="a read waiting on the provider")
    await reader.cancel("stalled")
    await eventually(upstream_closed.is_set, what="the upstream closed by the cancel")
    pending.cancel()
