"""The fakes refuse what the real APIs refuse: each body is checked against the official SDK's
request type and the API's rules across messages, and answered with a 400 in the API's words.

Bodies go through the official SDKs (which send whatever they are given) or raw HTTP for shapes
their types would not let a typed caller write; each refusal is the full error body, and no
refused request starts a generation.
"""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import openai
import pytest

from doemu.testing.fake_providers import FakeLLM

from . import fake_llm_support as support
from .fake_llm_support import KEY, USER

# The shared fixtures (tests/fake_llm_support.py): one server per module.
server, llm, oai, claude = support.server, support.llm, support.oai, support.claude

CALL: Any = {"id": "call_a", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def openai_refusal(llm: FakeLLM, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    answer = httpx.post(f"{llm.url}{path}", json=body, headers={"authorization": f"Bearer {KEY}"})
    payload: dict[str, Any] = answer.json()
    return answer.status_code, payload["error"]


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        (
            [*USER, {"role": "tool", "tool_call_id": "call_a", "content": "r"}],
            {"message": "Invalid parameter: messages with role 'tool' must be a response to a "
                        "preceeding message with 'tool_calls'.",
             "param": "messages.[1].role", "code": None},
        ),
        (
            [*USER, {"role": "assistant", "tool_calls": [CALL, {**CALL, "id": "call_b"}]},
             {"role": "tool", "tool_call_id": "call_b", "content": "r"}, *USER],
            {"message": "An assistant message with 'tool_calls' must be followed by tool "
                        "messages responding to each 'tool_call_id'. The following tool_call_ids "
                        "did not have response messages: call_a",
             "param": "messages.[1].role", "code": None},
        ),
        (
            [*USER, {"role": "assistant", "content": None}],
            {"message": "Invalid value for 'content': expected a string, got null.",
             "param": "messages.[1].content", "code": None},
        ),
        (
            [*USER, {"role": "assistant", "tool_calls": [CALL]}, {"role": "tool", "content": "r"}],
            {"message": "Missing required parameter: 'messages[2].tool_call_id'.",
             "param": "messages[2].tool_call_id", "code": "missing_required_parameter"},
        ),
        (
            [{"role": "tol", "content": "x"}],
            {"message": "Invalid value: 'tol'. Supported values are: 'developer', 'system', "
                        "'user', 'assistant', 'tool', and 'function'.",
             "param": "messages[0].role", "code": "invalid_value"},
        ),
        (
            [{"role": "user", "content": 5}],
            {"message": "Invalid type for 'messages[0].content': expected a string or an array, "
                        "but got an integer instead.",
             "param": "messages[0].content", "code": "invalid_type"},
        ),
    ],
)  # fmt: skip
def test_chat_completions_refuses_what_openai_refuses(
    llm: FakeLLM, oai: openai.OpenAI, messages: Any, error: dict[str, Any]
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        oai.chat.completions.create(model="m", messages=messages, stream=True)
    assert refused.value.body == {**error, "type": "invalid_request_error"}
    assert llm.stats.generations == [] and llm.stats.requests["chat.completions"] == 1
    assert llm.requests("chat")[0]["messages"] == messages  # still recorded, as sent


def test_chat_completions_names_an_unknown_argument(llm: FakeLLM) -> None:
    status, error = openai_refusal(llm, "/v1/chat/completions",
                                   {"model": "m", "messages": USER, "temprature": 1})  # fmt: skip
    assert (status, error["message"]) == (400, "Unrecognized request argument supplied: temprature")


@pytest.mark.parametrize(
    ("items", "message", "param", "code"),
    [
        (
            [{"type": "function_call_output", "call_id": "call_x", "output": "r"}],
            "No tool call found for function call output with call_id call_x.", "input", None,
        ),
        (
            [{"role": "user", "content": "hi"},
             {"type": "function_call", "call_id": "call_x", "name": "f", "arguments": "{}"}],
            "No tool output found for function call call_x.", "input", None,
        ),
        (
            [{"role": "user", "content": "hi", "bogus": 1}],
            "Unknown parameter: 'input[0].bogus'.", "input[0].bogus", "unknown_parameter",
        ),
        (
            [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c", "output": 5}],
            "Invalid type for 'input[1].output': expected a string or an array, but got an "
            "integer instead.", "input[1].output", "invalid_type",
        ),
    ],
)  # fmt: skip
def test_responses_refuses_what_openai_refuses(
    llm: FakeLLM, oai: openai.OpenAI, items: Any, message: str, param: str, code: str | None
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.create(model="m", input=items, stream=True, background=True)
    assert refused.value.body == {"message": message, "type": "invalid_request_error",
                                  "param": param, "code": code}  # fmt: skip
    assert llm.stats.generations == []


def test_a_responses_function_tool_needs_strict(llm: FakeLLM) -> None:
    """The API's function tool has a required ``strict`` (the agents adapter sends it)."""
    tool = {"type": "function", "name": "f", "parameters": {"type": "object"}}
    status, error = openai_refusal(llm, "/v1/responses",
                                   {"model": "m", "input": "x", "tools": [tool]})  # fmt: skip
    assert (status, error["message"]) == (400, "Missing required parameter: 'tools[0].strict'.")
    strict = {"model": "m", "input": "x", "tools": [{**tool, "strict": False}]}
    status, _ = openai_refusal(llm, "/v1/responses", strict)
    assert status == 200


def _use(tool_id: str) -> Any:
    return {"type": "tool_use", "id": tool_id, "name": "f", "input": {}}


def _result(tool_id: str) -> Any:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": "r"}


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        (
            [*USER, *USER],
            'messages: roles must alternate between "user" and "assistant", but found multiple '
            '"user" roles in a row',
        ),
        (
            [*USER, {"role": "assistant", "content": "ok"},
             {"role": "user", "content": [_result("toolu_x")]}],
            "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
            "toolu_x. Each `tool_result` block must have a corresponding `tool_use` block in the "
            "previous message.",
        ),
        (
            [*USER, {"role": "assistant", "content": [_use("toolu_a"), _use("toolu_b")]},
             {"role": "user", "content": [_result("toolu_a")]}],
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately "
            "after: toolu_b. Each `tool_use` block must have a corresponding `tool_result` block "
            "in the next message.",
        ),
        (
            [*USER, {"role": "assistant", "content": [_use("toolu_a")]},
             {"role": "user", "content": [{"type": "text", "text": "and"}, _result("toolu_a")]}],
            "messages.2: Did not find 1 tool_result block(s) at the beginning of this message. "
            "Messages following tool_use blocks must begin with a matching number of "
            "tool_result blocks.",
        ),
        ([{"role": "user", "content": [{"type": "text", "text": ""}]}],
         "messages: text content blocks must be non-empty"),
        ([{"role": "user", "content": [{"type": "text", "text": " \n"}]}],
         "messages: text content blocks must contain non-whitespace text"),
        ([*USER, {"role": "assistant", "content": "Sure, "}],
         "messages: final assistant content cannot end with trailing whitespace"),
        ([{"role": "user", "content": [{"type": "text", "txt": "hi"}]}],
         "messages.0.content.0.text: Field required"),
        ([{"role": "user", "content": [{"type": "text", "text": "hi", "bold": True}]}],
         "messages.0.content.0.bold: Extra inputs are not permitted"),
    ],
)  # fmt: skip
def test_messages_refuses_what_anthropic_refuses(
    llm: FakeLLM, claude: anthropic.Anthropic, messages: Any, message: str
) -> None:
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.messages.create(model="c", max_tokens=8, messages=messages)
    body = refused.value.body
    assert body == {"type": "error", "request_id": body["request_id"],
                    "error": {"type": "invalid_request_error", "message": message}}  # fmt: skip
    assert llm.stats.generations == []


def test_messages_checks_top_level_types(llm: FakeLLM) -> None:
    body = {"model": "c", "max_tokens": "8", "messages": USER}
    headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    answer = httpx.post(f"{llm.url}/v1/messages", json=body, headers=headers)
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == "max_tokens: Input should be a valid integer"


def test_a_well_formed_tool_round_trip_passes_in_every_format(
    llm: FakeLLM, oai: openai.OpenAI, claude: anthropic.Anthropic
) -> None:
    """The shapes the rules above refuse, done right, are answered."""
    chat = oai.chat.completions.create(model="m", messages=[
        *USER, {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_a", "content": "r"}])  # fmt: skip
    assert chat.choices[0].message.content == "ok"
    response = oai.responses.create(model="m", input=[
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "r"}])  # fmt: skip
    assert response.output_text == "ok"
    message = claude.messages.create(model="c", max_tokens=8, messages=[
        *USER, {"role": "assistant", "content": [_use("toolu_a")]},
        {"role": "user", "content": [_result("toolu_a"), {"type": "text", "text": "on"}]},
    ])  # fmt: skip
    assert message.content[0].type == "text"
    assert len(llm.stats.generations) == 3
