"""Incoming UI messages: validation of untrusted input, migration of v4 messages (research §1.3),
tool input repair, and message ids."""

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
    new_assistant_id,
    normalize_tool_input,
    origin_message_ids,
)
from agents.core.protocol import dumps
from agents.errors import AgentsError, InvalidMessageError


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
