"""The fake OpenAI chat completions, driven by the official ``openai`` SDK: text, tool calls and
usage in the stream, cuts, holds and stalls, input-token counting."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from doemu.testing.fake_providers import (
    FakeLLM,
    Reply,
    Text,
    ToolUse,
)

from . import fake_llm_support as support
from .fake_llm_support import CHARGE_TOOL, USER, served, statuses

# The shared fixtures (tests/fake_llm_support.py): one server per module.
server, llm, oai = support.server, support.llm, support.oai


def test_chat_stream_with_text_tool_calls_and_usage(llm: FakeLLM, oai: openai.OpenAI) -> None:
    llm.script(Reply(Text("a ", "b"), ToolUse("charge", {"amount": 5}, id="call_9"), delay_ms=1))
    chunks = list(
        oai.chat.completions.create(
            model="m",
            messages=USER,
            tools=[CHARGE_TOOL],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    choices = [chunk.choices[0] for chunk in chunks if chunk.choices]
    assert choices[0].delta.role == "assistant"
    assert "".join(c.delta.content or "" for c in choices) == "a b"
    calls = [call for c in choices for call in c.delta.tool_calls or []]
    assert (calls[0].id, calls[0].function and calls[0].function.name) == ("call_9", "charge")
    assert json.loads(
        "".join(call.function.arguments or "" for call in calls if call.function)
    ) == {"amount": 5}
    assert choices[-1].finish_reason == "tool_calls"
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (2, 3, 5)
    assert served(llm.stats) == {"chat.completions": 1}
    assert (llm.stats.billed_input_tokens, llm.stats.billed_output_tokens) == (2, 3)


def test_chat_usage_only_when_asked_and_plain_completions(llm: FakeLLM, oai: openai.OpenAI) -> None:
    chunks = list(oai.chat.completions.create(model="m", messages=USER, stream=True))
    assert all(chunk.usage is None for chunk in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"
    completion = oai.chat.completions.create(model="m", messages=USER)
    assert completion.choices[0].message.content == "ok"
    assert completion.usage is not None and completion.usage.total_tokens == 3


def test_chat_die_after_cuts_the_stream_and_the_generation(
    llm: FakeLLM, oai: openai.OpenAI
) -> None:
    llm.script(Reply(Text("a", "b", "c"), die_after=1))
    contents: list[str] = []
    with pytest.raises(openai.APIConnectionError):
        for chunk in oai.chat.completions.create(model="m", messages=USER, stream=True):
            contents.extend(choice.delta.content or "" for choice in chunk.choices)
    assert contents == ["", "a"]
    (generation,) = llm.wait_for(lambda s: statuses(s) == ["incomplete"]).generations
    assert (generation.output_tokens, generation.text) == (1, "a")

    llm.script(Reply(Text("a", "b", "c"), die_after=2))
    with pytest.raises(openai.APIConnectionError):  # not streamed: the body never comes
        oai.chat.completions.create(model="m", messages=USER)
    stats = llm.wait_for(lambda s: statuses(s) == ["incomplete", "incomplete"])
    assert stats.billed_output_tokens == 1 + 2


def test_chat_hold_and_release(llm: FakeLLM, oai: openai.OpenAI) -> None:
    llm.script(Reply(Text("a", "b"), hold_after=1))
    stream = oai.chat.completions.create(model="m", messages=USER, stream=True)
    assert [next(stream).choices[0].delta.content for _ in range(2)] == ["", "a"]
    llm.wait_held()
    assert llm.stats.generations[0].status == "in_progress"
    assert llm.release() == 1
    rest = [chunk.choices[0].delta.content for chunk in stream]
    assert rest == ["b", None]
    assert statuses(llm.stats) == ["completed"]


def test_chat_stall_keeps_the_stream_open_until_the_client_leaves(
    llm: FakeLLM, oai: openai.OpenAI
) -> None:
    llm.script(Reply(Text("a", "b"), stall_after=1))
    stream = oai.chat.completions.create(model="m", messages=USER, stream=True)
    assert [next(stream).choices[0].delta.content for _ in range(2)] == ["", "a"]
    assert statuses(llm.stats) == ["in_progress"]
    stream.close()
    stats = llm.wait_for(lambda s: statuses(s) == ["incomplete"])
    assert stats.billed_output_tokens == 1


def test_chat_input_tokens_count_tool_calls_and_results(llm: FakeLLM, oai: openai.OpenAI) -> None:
    messages: Any = [
        {"role": "system", "content": "you bill"},  # 2
        {"role": "user", "content": [{"type": "text", "text": "charge me"}]},  # 2
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c",
                    "type": "function",
                    "function": {"name": "charge", "arguments": '{"amount": 5}'},  # 2
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "charged five"},  # 2
    ]
    oai.chat.completions.create(model="m", messages=messages)
    assert llm.stats.generations[0].input_tokens == 8
