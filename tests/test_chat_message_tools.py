"""UI messages' tool parts built from stream chunks as the published SDK stores them (research
§4.3): their states and key order, input errors, approvals, and replayed chunks."""

from __future__ import annotations

from typing import Any

import pytest

from agents.chat.transcript.messages import AssistantMessage, is_replay_chunk
from agents.core.protocol import dumps

from .chat_message_chunks import feed, text_reply

# -- tool calls ------------------------------------------------------------------------------------
CLIENT_TOOL = [
    {"type": "start"},
    {"type": "start-step"},
    {"type": "tool-input-start", "toolCallId": "call_1", "toolName": "getWeather"},
    {"type": "tool-input-delta", "toolCallId": "call_1", "inputTextDelta": '{"city":'},
    {"type": "tool-input-delta", "toolCallId": "call_1", "inputTextDelta": '"Paris"}'},
    {
        "type": "tool-input-available",
        "toolCallId": "call_1",
        "toolName": "getWeather",
        "input": {"city": "Paris"},
    },
    {"type": "finish-step"},
    {"type": "finish", "finishReason": "tool-calls"},
]


def test_tool_part_states_from_streaming_to_output() -> None:
    message = AssistantMessage.new(1)
    seen = []
    for chunk in CLIENT_TOOL:
        message.consume(chunk)
        tool = [p for p in message.parts if p["type"] == "tool-getWeather"]
        seen.append(tool[0]["state"] if tool else None)
    assert seen[2:6] == ["input-streaming", "input-streaming", "input-streaming", "input-available"]
    # The partial JSON of the deltas never becomes the part's input.
    assert dumps(message.parts[1]) == (
        '{"type":"tool-getWeather","toolCallId":"call_1","toolName":"getWeather",'
        '"state":"input-available","input":{"city":"Paris"}}'
    )
    assert message.finish_reason == "tool-calls"
    message.consume(
        {"type": "tool-output-available", "toolCallId": "call_1", "output": {"temp": 21}}
    )
    message.consume({"type": "tool-output-available", "toolCallId": "call_1", "preliminary": False})
    # The live-observed stored part (§3.7); an output chunk without output drops the key (JS
    # ``undefined``), so a second one is visible here only through preliminary.
    assert dumps(message.parts[1]) == (
        '{"type":"tool-getWeather","toolCallId":"call_1","toolName":"getWeather",'
        '"state":"output-available","input":{"city":"Paris"},"preliminary":false}'
    )


def test_tool_part_key_order_follows_the_sdks_literal() -> None:
    message = AssistantMessage.new(1)
    message.consume(
        {
            "type": "tool-input-start",
            "toolCallId": "c",
            "toolName": "search",
            "providerExecuted": True,
            "providerMetadata": {"m": 1},
            "title": "Search",
            "dynamic": True,
        }
    )
    message.consume({"type": "tool-input-available", "toolCallId": "c", "input": '{"q":"x"}'})
    message.consume({"type": "tool-output-available", "toolCallId": "c", "output": None})
    assert dumps(message.parts[0]) == (
        '{"type":"tool-search","toolCallId":"c","toolName":"search","state":"output-available",'
        '"input":{"q":"x"},"providerExecuted":true,"callProviderMetadata":{"m":1},'
        '"title":"Search","output":null}'
    )


def test_tool_input_available_without_start_and_input_errors() -> None:
    message = AssistantMessage.new(1)
    feed(
        message,
        [
            {"type": "tool-input-available", "toolCallId": "a", "toolName": "t", "input": [1]},
            {
                "type": "tool-input-error",
                "toolCallId": "b",
                "toolName": "t",
                "input": "oops",
                "errorText": "bad input",
            },
            {"type": "tool-output-error", "toolCallId": "a", "errorText": "failed"},
            # a settled part ignores a later input error
            {"type": "tool-input-error", "toolCallId": "a", "toolName": "t", "errorText": "x"},
            {"type": "tool-output-available", "toolCallId": "nope", "output": 1},  # not here
        ],
    )
    assert dumps(message.parts) == (
        '[{"type":"tool-t","toolCallId":"a","toolName":"t","state":"output-error","input":{},'
        '"errorText":"failed"},'
        '{"type":"tool-t","toolCallId":"b","toolName":"t","state":"output-error","input":{},'
        '"errorText":"bad input"}]'
    )
    assert message.has_tool_call("a") and not message.has_tool_call("nope")


def test_approval_request_fills_input_from_deltas_and_denial() -> None:
    message = AssistantMessage.new(1)
    feed(
        message,
        [
            {"type": "tool-input-start", "toolCallId": "call_a", "toolName": "dangerous"},
            {"type": "tool-input-delta", "toolCallId": "call_a", "inputTextDelta": '{"x":'},
            {"type": "tool-input-delta", "toolCallId": "call_a", "inputTextDelta": "21}"},
            {
                "type": "tool-approval-request",
                "approvalId": "ap1",
                "toolCallId": "call_a",
                "approvalDescriptor": {"why": "danger"},
            },
        ],
    )
    assert dumps(message.parts[0]) == (
        '{"type":"tool-dangerous","toolCallId":"call_a","toolName":"dangerous",'
        '"state":"approval-requested","input":{"x":21},'
        '"approval":{"id":"ap1","descriptor":{"why":"danger"}}}'
    )
    # A late tool-input-available while approval is pending: input replaced (it was only
    # reconstructed from deltas), approval kept, and two chunks forwarded (§4.3).
    late = {
        "type": "tool-input-available",
        "toolCallId": "call_a",
        "toolName": "dangerous",
        "input": {"x": 22},
    }
    assert message.consume(late) == [
        late,
        {
            "type": "tool-approval-request",
            "approvalId": "ap1",
            "toolCallId": "call_a",
            "approvalDescriptor": {"why": "danger"},
        },
    ]
    assert message.parts[0]["input"] == {"x": 22}
    assert message.parts[0]["state"] == "approval-requested"
    # A second late input no longer replaces a canonical input; still re-sent with the approval.
    out = message.consume({**late, "input": {"x": 99}})
    assert out[0]["input"] == {"x": 22} and message.parts[0]["input"] == {"x": 22}
    assert message.consume({"type": "tool-output-denied", "toolCallId": "call_a"}) == [
        {"type": "tool-output-denied", "toolCallId": "call_a"}
    ]
    assert message.parts[0]["state"] == "output-denied"


def test_live_approval_flow_and_approved_continuation() -> None:
    """§3.7/§5.7: the approval turn, then the continuation that runs the approved tool."""
    first = AssistantMessage.new(1)
    feed(
        first,
        [
            {"type": "start"},
            {"type": "start-step"},
            {
                "type": "tool-input-available",
                "toolCallId": "call_a",
                "toolName": "dangerous",
                "input": {"x": 21},
            },
            {"type": "tool-approval-request", "approvalId": "aitxt-G", "toolCallId": "call_a"},
            {"type": "finish-step"},
            {"type": "finish", "finishReason": "tool-calls"},
        ],
    )
    stored = first.message
    assert stored["parts"][1]["state"] == "approval-requested"
    # The client approves: the agent marks the part approval-responded (§5.7a).
    stored["parts"][1]["state"] = "approval-responded"
    stored["parts"][1]["approval"] = {"id": "aitxt-G", "approved": True}
    cont = AssistantMessage.for_turn(
        [{"id": "u", "role": "user"}, stored], continuation=True, now_ms=2
    )
    wire = feed(
        cont,
        [
            {"type": "start", "messageId": "ignored"},
            {"type": "tool-approval-request", "approvalId": "aitxt-G", "toolCallId": "call_a"},
            {"type": "tool-output-available", "toolCallId": "call_a", "output": {"doubled": 42}},
            *text_reply("It is ", "sunny.")[1:],
        ],
    )
    assert cont.id == first.id
    assert wire[0] == {"type": "start"}  # continuation start: messageId dropped
    assert wire[1]["type"] == "tool-output-available"  # the replayed approval request is dropped
    assert dumps(cont.parts[1]) == (
        '{"type":"tool-dangerous","toolCallId":"call_a","toolName":"dangerous",'
        '"state":"output-available","input":{"x":21},'
        '"approval":{"id":"aitxt-G","approved":true},"output":{"doubled":42}}'
    )
    assert [p["type"] for p in cont.parts] == [
        "step-start",
        "tool-dangerous",
        "step-start",
        "text",
    ]
    assert stored["parts"][1]["state"] == "approval-responded"  # the original was copied


@pytest.mark.parametrize(
    ("state", "chunk", "replay"),
    [
        ("input-available", {"type": "tool-input-start"}, True),
        ("input-streaming", {"type": "tool-input-start"}, True),
        ("input-streaming", {"type": "tool-input-delta", "inputTextDelta": "x"}, False),
        ("input-available", {"type": "tool-input-delta", "inputTextDelta": "x"}, True),
        ("output-available", {"type": "tool-input-available", "input": {}}, True),
        ("output-error", {"type": "tool-output-denied"}, True),
        ("approval-responded", {"type": "tool-output-denied"}, True),
        ("approval-requested", {"type": "tool-output-denied"}, False),
        ("approval-responded", {"type": "tool-approval-request", "approvalId": "a"}, True),
        ("input-available", {"type": "tool-approval-request", "approvalId": "a"}, False),
        ("output-available", {"type": "tool-output-available", "output": 2}, False),
    ],
)
def test_replay_chunks_are_neither_applied_nor_forwarded(
    state: str, chunk: dict[str, Any], replay: bool
) -> None:
    part = {"type": "tool-t", "toolCallId": "c", "toolName": "t", "state": state, "input": {}}
    chunk = {**chunk, "toolCallId": "c", "toolName": "t"}
    assert is_replay_chunk([part], chunk) is replay
    assert not is_replay_chunk([part], {**chunk, "toolCallId": "other"})
    message = AssistantMessage({"id": "m", "role": "assistant", "parts": [dict(part)]})
    before = dumps(message.parts)
    out = message.consume(chunk)
    if replay:
        assert out == []
        assert dumps(message.parts) == before
    else:
        assert out == [chunk]
