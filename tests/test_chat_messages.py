"""UI messages: the assistant message built from stream chunks exactly as the published SDK stores
it (research §3.7, §3.8, §5.9): its parts, the chunks it forwards, continuations of an interrupted
reply, plain text replies and partial parts from stored bodies."""

from __future__ import annotations

import random
import re

from agents.chat.transcript.messages import AssistantMessage, partial_parts, plain_text_chunks
from agents.core.protocol import dumps

from .chat_message_chunks import feed, text_reply


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
