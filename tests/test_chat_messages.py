"""UI messages: the assistant message built from stream chunks exactly as the published SDK stores
it (research §3.7, §3.8, §4.3, §5.9), the chunks it forwards, migration of v4 messages (§1.3),
validation of untrusted input, ids."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from agents.chat.transcript.incoming import (
    auto_transform_message,
    auto_transform_messages,
    is_valid_message,
    validate_message,
)
from agents.chat.transcript.messages import (
    AssistantMessage,
    is_replay_chunk,
    new_assistant_id,
    normalize_tool_input,
    origin_message_ids,
    partial_parts,
    plain_text_chunks,
)
from agents.core.protocol import dumps
from agents.errors import AgentsError, InvalidMessageError

Chunks = list[dict[str, Any]]


def text_reply(*deltas: str, finish: str = "stop") -> Chunks:
    """What ``streamText().toUIMessageStream()`` emits for a plain reply (§4.1)."""
    return [
        {"type": "start"},
        {"type": "start-step"},
        {"type": "text-start", "id": "t0"},
        *({"type": "text-delta", "id": "t0", "delta": d} for d in deltas),
        {"type": "text-end", "id": "t0"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": finish},
    ]


def feed(message: AssistantMessage, chunks: Chunks) -> Chunks:
    out: Chunks = []
    for chunk in chunks:
        out += message.consume(chunk)
    return out


# -- the worked example and the wire rewrites ------------------------------------------------------
def test_worked_example_hello_world() -> None:
    """§3.8: the stored row's content, byte for byte, and the bodies clients received (§4.3)."""
    message = AssistantMessage.new(1795689006530, random.Random(1))
    wire = feed(message, text_reply("Hello", ", ", "world"))
    assert re.fullmatch(r"assistant_1795689006530_[0-9a-z]{9}", message.id)
    assert dumps(message.message) == (
        '{"id":"' + message.id + '","role":"assistant","parts":[{"type":"step-start"},'
        '{"type":"text","text":"Hello, world","state":"done"}]}'
    )
    assert [dumps(c) for c in wire] == [
        '{"type":"start","messageId":"' + message.id + '"}',
        '{"type":"start-step"}',
        '{"type":"text-start","id":"t0"}',
        '{"type":"text-delta","id":"t0","delta":"Hello"}',
        '{"type":"text-delta","id":"t0","delta":", "}',
        '{"type":"text-delta","id":"t0","delta":"world"}',
        '{"type":"text-end","id":"t0"}',
        '{"type":"finish-step"}',
        '{"type":"finish","messageMetadata":{"finishReason":"stop"}}',
    ]
    # The finishReason lives only on the wire; the stored message has no metadata (§3.8).
    assert message.finish_reason == "stop"
    assert "metadata" not in message.message
    assert message.error_text is None


def test_start_adopts_the_models_message_id_and_metadata_merges() -> None:
    message = AssistantMessage.new(1)
    wire = feed(
        message,
        [
            {"type": "start", "messageId": "m-1", "messageMetadata": {"a": 1, "b": 1}},
            {"type": "message-metadata", "messageMetadata": {"b": 2}},
            {"type": "finish", "finishReason": "length", "messageMetadata": {"c": 3}},
        ],
    )
    assert message.id == "m-1"
    assert message.metadata == {"a": 1, "b": 2, "c": 3}
    assert wire[0] == {"type": "start", "messageId": "m-1", "messageMetadata": {"a": 1, "b": 1}}
    # On the wire the chunk's own messageMetadata is replaced by {finishReason} (§4.3, §7 #22).
    assert dumps(wire[2]) == '{"type":"finish","messageMetadata":{"finishReason":"length"}}'
    assert message.finish_reason == "length"


def test_a_finish_without_a_reason_is_forwarded_as_is() -> None:
    message = AssistantMessage.new(1)
    assert message.consume({"type": "finish"}) == [{"type": "finish"}]
    assert message.finish_reason is None


def test_null_message_id_is_stamped() -> None:
    message = AssistantMessage.new(5)
    out = message.consume({"type": "start", "messageId": None, "x": 1})
    assert dumps(out) == '[{"type":"start","messageId":"' + message.id + '","x":1}]'


def test_error_chunk_ends_the_turn_without_being_forwarded() -> None:
    message = AssistantMessage.new(1)
    feed(message, [{"type": "start"}, {"type": "start-step"}])
    assert message.consume({"type": "error", "errorText": "custom error: model exploded"}) == []
    assert message.error_text == "custom error: model exploded"
    # An error right after start-step persists just the step-start (§3.7).
    assert message.parts == [{"type": "step-start"}]
    bare = AssistantMessage.new(1)
    assert bare.consume({"type": "error"}) == []
    assert bare.error_text == '{"type":"error"}'


def test_unknown_and_typeless_chunks() -> None:
    message = AssistantMessage.new(1)
    custom = {"type": "reset-step", "z": 1}
    assert message.consume(custom) == [custom]
    assert message.consume({"type": "abort"}) == [{"type": "abort"}]
    assert message.consume({"no": "type"}) == []
    assert message.consume({"type": 3}) == []
    assert message.parts == []


def test_aborted_partial_keeps_its_text_streaming() -> None:
    message = AssistantMessage.new(1)
    feed(message, text_reply("w0 ", "w1 ", "w2 ", "w3 ")[:7])  # cut before text-end
    assert message.parts == [
        {"type": "step-start"},
        {"type": "text", "text": "w0 w1 w2 w3 ", "state": "streaming"},
    ]


def test_text_and_reasoning_parts() -> None:
    message = AssistantMessage.new(1)
    feed(
        message,
        [
            {"type": "reasoning-start", "id": "r0", "providerMetadata": {"x": {"a": 1}}},
            {"type": "reasoning-delta", "id": "r0", "delta": "think", "providerMetadata": {"p": 1}},
            {"type": "reasoning-end", "id": "r0", "providerMetadata": {"q": {"sig": "s"}}},
            {"type": "text-delta", "id": "t9", "delta": "no start"},
            {"type": "text-end", "id": "t9"},
            {"type": "text-delta", "id": "t9", "delta": "!"},  # appends to the last text part
            {"type": "reasoning-delta", "id": "r1", "delta": None},  # appends "" to "think"
        ],
    )
    assert dumps(message.parts) == (
        '[{"type":"reasoning","text":"think","state":"done","providerMetadata":{"p":1,"q":{"sig":"s"}}},'
        '{"type":"text","text":"no start!","state":"done"}]'
    )


def test_sources_files_and_data_parts() -> None:
    message = AssistantMessage.new(1)
    wire = feed(
        message,
        [
            {"type": "source-url", "sourceId": "s1", "url": "https://x", "title": "X"},
            {"type": "source-document", "sourceId": "s2", "mediaType": "a/b", "title": "D"},
            {"type": "file", "url": "data:image/png;base64,AA", "mediaType": "image/png", "k": 1},
            {"type": "data-weather", "id": "w", "data": {"t": 1}},
            {"type": "data-weather", "id": "w", "data": {"t": 2}},  # same type+id: updated
            {"type": "data-weather", "data": {"t": 3}},  # no id: pushed
            {"type": "data-progress", "data": 50, "transient": True},  # never stored
        ],
    )
    assert len(wire) == 7  # every one of them is forwarded
    assert dumps(message.parts) == (
        '[{"type":"source-url","sourceId":"s1","url":"https://x","title":"X"},'
        '{"type":"source-document","sourceId":"s2","mediaType":"a/b","title":"D"},'
        '{"type":"file","mediaType":"image/png","url":"data:image/png;base64,AA"},'
        '{"type":"data-weather","id":"w","data":{"t":2}},'
        '{"type":"data-weather","data":{"t":3}}]'
    )


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


# -- continuations -----------------------------------------------------------------------------
def test_continuation_merges_into_the_interrupted_text_part() -> None:
    """§5.9: the interrupted partial, continued: ``[step-start, text (merged), step-start]``."""
    interrupted = {
        "id": "assistant_1_x",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {"type": "text", "text": "w0 w1 w2 w3 w4 w5 w6 ", "state": "streaming"},
        ],
    }
    cont = AssistantMessage.for_turn([interrupted], continuation=True, now_ms=9)
    wire = feed(cont, text_reply("It is ", "sunny."))
    assert [c["type"] for c in wire] == [
        "start",
        "start-step",
        "text-delta",  # no text-start: the interrupted block is continued in place
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    assert wire[0] == {"type": "start"}
    assert cont.message == {
        "id": "assistant_1_x",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {"type": "text", "text": "w0 w1 w2 w3 w4 w5 w6 It is sunny.", "state": "done"},
            {"type": "step-start"},
        ],
    }
    assert interrupted["parts"][1]["state"] == "streaming"  # structuredClone: original untouched


def test_continuation_after_finished_text_opens_a_new_part() -> None:
    done = {
        "id": "a",
        "role": "assistant",
        "parts": [{"type": "text", "text": "A", "state": "done"}],
    }
    cont = AssistantMessage.continuing(done)
    wire = feed(cont, text_reply("B"))
    assert {"type": "text-start", "id": "t0"} in wire
    assert [p.get("text") for p in cont.parts] == ["A", None, "B"]


def test_continuation_reasoning_start_is_forwarded_but_not_applied() -> None:
    partial = {
        "id": "a",
        "role": "assistant",
        "parts": [{"type": "reasoning", "text": "hmm", "state": "streaming"}],
    }
    cont = AssistantMessage.continuing(partial)
    assert cont.consume({"type": "reasoning-start", "id": "r"}) == [
        {"type": "reasoning-start", "id": "r"}
    ]
    cont.consume({"type": "reasoning-delta", "id": "r", "delta": " more"})
    cont.consume({"type": "reasoning-end", "id": "r"})
    assert cont.parts == [{"type": "reasoning", "text": "hmm more", "state": "done"}]


def test_continuation_without_an_assistant_message_starts_a_new_one() -> None:
    cont = AssistantMessage.for_turn(
        [{"id": "u", "role": "user", "parts": []}], continuation=True, now_ms=7
    )
    assert cont.id.startswith("assistant_7_") and cont.continuation
    assert cont.consume({"type": "start", "messageId": "x"}) == [{"type": "start"}]
    assert cont.id.startswith("assistant_7_")


# -- plain text replies ----------------------------------------------------------------------------
def test_plain_text_reply() -> None:
    """§3.7/§4.3: request id as the text part id, no start/step-start, one text part."""
    chunks = plain_text_chunks("r1", ["plain ", "", "text reply"])
    assert [dumps(c) for c in chunks] == [
        '{"type":"text-start","id":"r1"}',
        '{"type":"text-delta","id":"r1","delta":"plain "}',
        '{"type":"text-delta","id":"r1","delta":"text reply"}',
        '{"type":"text-end","id":"r1"}',
    ]
    message = AssistantMessage.new(1)
    assert feed(message, chunks) == chunks
    assert message.parts == [{"type": "text", "text": "plain text reply", "state": "done"}]
    interrupted = {
        "id": "a",
        "role": "assistant",
        "parts": [{"type": "text", "text": "x ", "state": "streaming"}],
    }
    cont = AssistantMessage.continuing(interrupted)
    assert feed(cont, plain_text_chunks("r2", ["y"]))[0]["type"] == "text-delta"
    assert cont.parts == [{"type": "text", "text": "x y", "state": "done"}]


def test_partial_parts_from_stored_bodies() -> None:
    bodies = [dumps(c) for c in text_reply("w0 ", "w1 ")[:5]] + ["{broken", "[1]"]
    assert partial_parts(bodies) == [
        {"type": "step-start"},
        {"type": "text", "text": "w0 w1 ", "state": "streaming"},
    ]


# -- ids -------------------------------------------------------------------------------------------
def test_new_assistant_id() -> None:
    rng = random.Random(42)
    first = new_assistant_id(1795689006530.7, rng)
    assert re.fullmatch(r"assistant_1795689006530_[0-9a-z]{9}", first)
    assert new_assistant_id(1795689006530.7, random.Random(42)) == first
    assert new_assistant_id(1, rng) != new_assistant_id(1, rng)


def test_origin_message_ids() -> None:
    user = {"role": "user"}
    assert origin_message_ids([{**user, "id": "u9"}, {**user, "id": "q1"}]) == ["u9", "q1"]
    assert origin_message_ids(
        [{**user, "id": "u1"}, {"id": "a", "role": "assistant"}, {**user, "id": "u2"}]
    ) == ["u2"]
    assert origin_message_ids([{**user, "id": "u1"}, {"id": "a", "role": "assistant"}]) == []
    assert origin_message_ids([{**user, "id": ""}, {**user, "id": 3}, {**user, "id": "u"}]) == ["u"]
    assert origin_message_ids([]) == [] and origin_message_ids(None) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"a": 1}, {"a": 1}),
        ('{"a": 1}', {"a": 1}),
        ('  {"a": 1} ', {"a": 1}),
        ("[1]", {}),
        ('{"a": NaN}', {}),
        ("{broken", {}),
        ("", {}),
        ("plain", {}),
        (None, {}),
        ([{"a": 1}], {}),
        (3, {}),
    ],
)
def test_normalize_tool_input(value: Any, expected: dict[str, Any]) -> None:
    assert normalize_tool_input(value) == expected


# -- validation and migration ------------------------------------------------------------------
def test_validate_message_accepts_the_minimum() -> None:
    message = {"id": "u1", "role": "user", "parts": [], "extra": 1}
    assert validate_message(message) is message
    assert is_valid_message(message)


@pytest.mark.parametrize(
    ("value", "field", "text"),
    [
        ([], "message", "must be an object, got a list"),
        (None, "message", "must be an object, got null"),
        ({"role": "user", "parts": []}, "id", "non-empty string id, got null"),
        ({"id": "", "role": "user", "parts": []}, "id", "got ''"),
        ({"id": 5, "role": "user", "parts": []}, "id", "got 5"),
        ({"id": "u1", "role": "data", "parts": []}, "role", "'u1': role must be one of user"),
        ({"id": "u1", "parts": []}, "role", "got null"),
        ({"id": "u1", "role": "user"}, "parts", "parts must be a list, got null"),
        ({"id": "u1", "role": "user", "parts": {}}, "parts", "got a dict"),
    ],
)
def test_validate_message_names_what_is_wrong(value: Any, field: str, text: str) -> None:
    with pytest.raises(InvalidMessageError) as caught:
        validate_message(value)
    assert caught.value.field == field
    assert text in str(caught.value)
    assert isinstance(caught.value, AgentsError) and isinstance(caught.value, ValueError)
    assert not is_valid_message(value)


def test_auto_transform_keeps_ui_messages_by_reference() -> None:
    message = {"parts": [{"type": "text", "text": "hi"}], "id": "u1", "role": "user"}
    assert auto_transform_messages([message])[0] is message


def test_auto_transform_repairs_tool_inputs_in_a_copy() -> None:
    message = {
        "id": "a",
        "role": "assistant",
        "parts": [
            {"type": "tool-t", "toolCallId": "c", "state": "input-available", "input": '{"q":1}'},
            {"type": "dynamic-tool", "toolCallId": "d", "state": "input-streaming"},
            {"type": "tool-ok", "toolCallId": "e", "state": "input-available", "input": {}},
        ],
    }
    fixed = auto_transform_message(message)
    assert fixed is not message
    assert dumps(fixed["parts"]) == (
        '[{"type":"tool-t","toolCallId":"c","state":"input-available","input":{"q":1}},'
        '{"type":"dynamic-tool","toolCallId":"d","state":"input-streaming","input":{}},'
        '{"type":"tool-ok","toolCallId":"e","state":"input-available","input":{}}]'
    )
    assert fixed["parts"][2] is message["parts"][2]
    assert message["parts"][0]["input"] == '{"q":1}'


def test_auto_transform_v4_messages() -> None:
    v4 = [
        {"role": "user", "content": "hi"},
        {
            "id": "a1",
            "role": "assistant",
            "content": "",
            "reasoning": "because",
            "toolInvocations": [
                {
                    "toolCallId": "c1",
                    "toolName": "w",
                    "state": "result",
                    "args": {"x": 1},
                    "result": 2,
                },
                {"toolCallId": "c2", "toolName": "w", "state": "partial-call", "args": "[1]"},
                {"toolCallId": "c3", "toolName": "w", "state": "weird"},
                {"no": "toolName"},
            ],
        },
        {
            "id": "d",
            "role": "data",
            "content": [{"text": "a"}, {"type": "x", "text": ""}, {"t": 1}],
        },
        {"id": "n", "content": {"k": 1}},
        {"id": "z", "role": "user", "content": None},
        {"whatever": True},
        "just text",
        7,
    ]
    out = auto_transform_messages(v4)
    assert [m["id"] for m in out] == ["msg-0", "a1", "d", "n", "z", "msg-5", "msg-6", "msg-7"]
    assert [m["role"] for m in out] == [
        "user",
        "assistant",
        "system",
        "user",
        "user",
        "user",
        "user",
        "user",
    ]
    assert out[0]["parts"] == [{"type": "text", "text": "hi"}]
    assert dumps(out[1]["parts"]) == (
        '[{"type":"reasoning","text":"because"},'
        '{"type":"tool-w","toolCallId":"c1","state":"output-available","input":{"x":1},"output":2},'
        '{"type":"tool-w","toolCallId":"c2","state":"input-streaming","input":{},"output":null},'
        '{"type":"tool-w","toolCallId":"c3","state":"input-available","input":{},"output":null}]'
    )
    assert out[2]["parts"] == [{"type": "text", "text": "a"}, {"type": "x", "text": ""}]
    assert out[3]["parts"] == [{"type": "text", "text": '{"k":1}'}]
    assert out[4]["parts"] == [{"type": "text", "text": "null"}]
    assert out[5]["parts"] == [{"type": "text", "text": '{"whatever":true}'}]
    assert out[6]["parts"] == [{"type": "text", "text": "just text"}]
    assert out[7]["parts"] == [{"type": "text", "text": "7"}]
    assert all(is_valid_message(m) for m in out)


def test_auto_transform_refuses_what_the_sdk_throws_on() -> None:
    with pytest.raises(InvalidMessageError, match="messages must be a list"):
        auto_transform_messages(None)  # a body without messages (§1.3)
    with pytest.raises(InvalidMessageError, match="message 1 is null"):
        auto_transform_messages([{"id": "u", "role": "user", "parts": []}, None])
