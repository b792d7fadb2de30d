"""Producing UI-message streams: the helpers' exact chunks (research §4.1), the streamed SSE
``Response`` read back through its body (directly and from a Durable Object, chunk by chunk), and
the deterministic ``ScriptedModel`` (delays through an injected sleep, stalls, aborts, errors)."""

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
from agents.chat.streams.scripted import (
    Chunks,
    Delay,
    Fail,
    NextStep,
    Raise,
    Reasoning,
    ScriptedModel,
    Stall,
    Text,
    ToolCall,
    demo_model,
    last_user_text,
)
from agents.chat.transcript.chunks import UI_MESSAGE_STREAM_HEADERS, SseDecoder
from agents.chat.transcript.messages import AssistantMessage
from agents.core.protocol import dumps
from doemu.testing.plugin import HarnessFactory

from .polling import eventually

Chunk = dict[str, Any]

HELLO = [
    {"type": "start"},
    {"type": "start-step"},
    {"type": "text-start", "id": "txt-0"},
    {"type": "text-delta", "id": "txt-0", "delta": "Hello"},
    {"type": "text-delta", "id": "txt-0", "delta": ", "},
    {"type": "text-delta", "id": "txt-0", "delta": "world"},
    {"type": "text-end", "id": "txt-0"},
    {"type": "finish-step"},
    {"type": "finish", "finishReason": "stop"},
]


def user(text: str) -> dict[str, Any]:
    return {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}


async def collect(chunks: AsyncIterator[Chunk]) -> list[Chunk]:
    return [chunk async for chunk in chunks]


async def read_events(body: Any) -> list[bytes]:
    """Every read of a body, as bytes (one SSE event per read when streamed by these helpers)."""
    return [bytes(piece) async for piece in body]


def decode(events: list[bytes]) -> list[Chunk]:
    decoder = SseDecoder()
    chunks = [chunk for event in events for chunk in decoder.feed(event)]
    return chunks + decoder.finish()


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


# -- the scripted model ----------------------------------------------------------------------------
def no_wait() -> tuple[list[float], Any]:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    return slept, sleep


async def test_demo_model_scripts() -> None:
    slept, sleep = no_wait()
    model = demo_model(sleep=sleep)
    hello = [{**c, "id": "t0"} if "id" in c else c for c in HELLO]  # the scripted model's ids
    assert await collect(model.stream([user("hi")])) == hello
    assert await collect(model.stream([user("something else")])) == hello
    tool = await collect(model.stream([user("tool")]))
    assert [dumps(c) for c in tool] == [
        '{"type":"start"}',
        '{"type":"start-step"}',
        '{"type":"tool-input-start","toolCallId":"call_1","toolName":"getWeather"}',
        '{"type":"tool-input-delta","toolCallId":"call_1","inputTextDelta":"{\\"city\\":"}',
        '{"type":"tool-input-delta","toolCallId":"call_1","inputTextDelta":"\\"Paris\\"}"}',
        '{"type":"tool-input-available","toolCallId":"call_1","toolName":"getWeather",'
        '"input":{"city":"Paris"}}',
        '{"type":"finish-step"}',
        '{"type":"finish","finishReason":"tool-calls"}',
    ]
    approve = await collect(model.stream([user("approve")]))
    assert [c["type"] for c in approve] == [
        "start",
        "start-step",
        "tool-input-available",
        "tool-approval-request",
        "finish-step",
        "finish",
    ]
    boom = await collect(model.stream([user("boom")]))
    assert boom[2:] == [
        {"type": "error", "errorText": "custom error: model exploded"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "error"},
    ]
    with pytest.raises(RuntimeError, match="onChatMessage threw"):
        await collect(model.stream([user("throw")]))
    continued = await collect(model.stream([user("tool"), {"id": "a", "role": "assistant"}]))
    assert [c.get("delta") for c in continued if c["type"] == "text-delta"] == ["It is ", "sunny."]
    slow = await collect(model.stream([user("slow")]))
    assert "".join(c.get("delta", "") for c in slow) == "".join(f"w{i} " for i in range(25))
    assert slept == [0.05] * 24  # through the injected sleep: no real waiting


async def test_tool_script_builds_the_live_tool_part() -> None:
    _, sleep = no_wait()
    message = AssistantMessage.new(1)
    for chunk in await collect(demo_model(sleep=sleep).stream([user("tool")])):
        message.consume(chunk)
    assert dumps(message.parts) == (
        '[{"type":"step-start"},{"type":"tool-getWeather","toolCallId":"call_1",'
        '"toolName":"getWeather","state":"input-available","input":{"city":"Paris"}}]'
    )
    assert message.finish_reason == "tool-calls"


async def test_script_steps() -> None:
    model = ScriptedModel(
        [
            Reasoning("hm", ""),
            Text("a"),
            ToolCall("lookup", {"q": 1}, output={"r": 2}, input_deltas=['{"q":', "1}"]),
            NextStep(),
            Chunks([{"type": "data-note", "data": 1}]),
            Text("b"),
        ],
        message_id="m1",
    )
    chunks = await collect(model.stream([]))
    assert [dumps(c) for c in chunks] == [
        '{"type":"start","messageId":"m1"}',
        '{"type":"start-step"}',
        '{"type":"reasoning-start","id":"r0"}',
        '{"type":"reasoning-delta","id":"r0","delta":"hm"}',
        '{"type":"reasoning-end","id":"r0"}',
        '{"type":"text-start","id":"t0"}',
        '{"type":"text-delta","id":"t0","delta":"a"}',
        '{"type":"text-end","id":"t0"}',
        '{"type":"tool-input-start","toolCallId":"call_1","toolName":"lookup"}',
        '{"type":"tool-input-delta","toolCallId":"call_1","inputTextDelta":"{\\"q\\":"}',
        '{"type":"tool-input-delta","toolCallId":"call_1","inputTextDelta":"1}"}',
        '{"type":"tool-input-available","toolCallId":"call_1","toolName":"lookup","input":{"q":1}}',
        '{"type":"tool-output-available","toolCallId":"call_1","output":{"r":2}}',
        '{"type":"finish-step"}',
        '{"type":"start-step"}',
        '{"type":"data-note","data":1}',
        '{"type":"text-start","id":"t1"}',
        '{"type":"text-delta","id":"t1","delta":"b"}',
        '{"type":"text-end","id":"t1"}',
        '{"type":"finish-step"}',
        '{"type":"finish","finishReason":"stop"}',
    ]


async def test_error_at_and_raise_at() -> None:
    model = ScriptedModel([Text("a", "b")], error_at=3, error_text="quota exceeded")
    chunks = await collect(model.stream([]))
    assert chunks == [
        {"type": "start"},
        {"type": "start-step"},
        {"type": "text-start", "id": "t0"},
        {"type": "error", "errorText": "quota exceeded"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "error"},
    ]
    got: list[Chunk] = []
    model = ScriptedModel([Text("a", "b")], raise_at=4, exception=ConnectionResetError("reset"))
    with pytest.raises(ConnectionResetError):
        async for chunk in model.stream([]):
            got.append(chunk)
    assert [c["type"] for c in got] == ["start", "start-step", "text-start", "text-delta"]
    with pytest.raises(KeyError):
        await collect(ScriptedModel([Text("a"), Raise(KeyError("k"))]).stream([]))
    assert await collect(ScriptedModel([Fail()]).stream([])) == [
        {"type": "start"},
        {"type": "start-step"},
        {"type": "error", "errorText": "An error occurred."},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "error"},
    ]


async def test_a_stall_ends_with_abort_when_the_turn_is_aborted() -> None:
    abort = asyncio.Event()
    model = ScriptedModel([Text("partial"), Stall(), Text("never")])
    received: list[Chunk] = []

    async def consume() -> None:
        async for chunk in model.stream([], abort=abort):
            received.append(chunk)

    task = asyncio.ensure_future(consume())
    await eventually(lambda: {"type": "text-end", "id": "t0"} in received, what="the partial")
    assert not task.done()
    abort.set()
    await task
    assert received[-1] == {"type": "abort"}
    assert all(c.get("delta") != "never" for c in received)


async def test_a_stall_without_abort_waits_until_cancelled() -> None:
    stream = ScriptedModel([Stall()]).stream([])
    assert await anext(stream) == {"type": "start"}
    assert await anext(stream) == {"type": "start-step"}
    pending = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0)
    assert not pending.done()
    pending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await pending


async def test_abort_interrupts_a_delay_and_stops_between_chunks() -> None:
    abort = asyncio.Event()

    async def forever(_seconds: float) -> None:
        await asyncio.get_running_loop().create_future()

    model = ScriptedModel([Text("a"), Delay(60_000), Text("b")], sleep=forever)
    received: list[Chunk] = []

    async def consume() -> None:
        async for chunk in model.stream([], abort=abort):
            received.append(chunk)

    task = asyncio.ensure_future(consume())
    await eventually(lambda: len(received) == 5, what="the chunks before the delay")
    abort.set()
    await task
    assert received[-1] == {"type": "abort"} and len(received) == 6
    # Already aborted: the stream is just the abort chunk.
    assert await collect(ScriptedModel([Text("a")]).stream([], abort=abort)) == [{"type": "abort"}]


async def test_script_chosen_by_function_and_response() -> None:
    model = ScriptedModel(lambda messages: [Text(f"{len(messages)} messages")])
    chunks = await collect(model.stream([user("a"), user("b")]))
    assert chunks[3]["delta"] == "2 messages"
    response = ScriptedModel([Text("ok")]).response([])
    assert response.headers.get("content-type") == "text/event-stream"
    assert decode(await read_events(response.body))[3] == {
        "type": "text-delta",
        "id": "t0",
        "delta": "ok",
    }


def test_last_user_text() -> None:
    messages = [
        user("first"),
        {
            "id": "u2",
            "role": "user",
            "parts": [
                {"type": "text", "text": "a"},
                {"type": "file"},
                {"type": "text", "text": "b"},
            ],
        },
        {"id": "a", "role": "assistant", "parts": [{"type": "text", "text": "x"}]},
    ]
    assert last_user_text(messages) == "ab"
    assert last_user_text([]) == ""
    assert last_user_text([{"role": "user", "parts": None}]) == ""


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
