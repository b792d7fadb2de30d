"""The deterministic ``ScriptedModel``: demo scripts, tool parts, steps, errors, delays through
an injected sleep, stalls and aborts, and scripts chosen per request."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

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
from agents.chat.transcript.messages import AssistantMessage
from agents.core.protocol import dumps

from .chat_stream_reading import HELLO, Chunk, collect, decode, read_events, user
from .polling import eventually


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
