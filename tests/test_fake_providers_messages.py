"""The fake Anthropic Messages API, driven by the official ``anthropic`` SDK: the stream's events,
the prefill rule, failures and cuts, input-token counting."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from doemu.testing.fake_providers import (
    FakeLLM,
    Reply,
    Text,
    ToolUse,
)

from . import fake_llm_support as support
from .fake_llm_support import CUT, USER, served, statuses

# The shared fixtures (tests/fake_llm_support.py): one server per module.
server, llm, oai, claude = support.server, support.llm, support.oai, support.claude


def test_messages_stream_text_tool_use_and_usage(llm: FakeLLM, claude: anthropic.Anthropic) -> None:
    llm.script(Reply(Text("Hi ", "there"), ToolUse("charge", {"amount": 5})))
    with claude.messages.stream(model="claude-test", max_tokens=64, messages=USER) as stream:
        events = list(stream)
        message = stream.get_final_message()
    start = events[0]
    assert start.type == "message_start"
    assert (start.message.usage.input_tokens, start.message.usage.output_tokens) == (2, 1)
    assert message.content[0].type == "text" and message.content[0].text == "Hi there"
    tool = message.content[1]
    assert tool.type == "tool_use" and tool.name == "charge" and tool.input == {"amount": 5}
    assert tool.id.startswith("toolu_")
    assert (message.stop_reason, message.usage.output_tokens) == ("tool_use", 3)
    (generation,) = llm.stats.generations
    assert (generation.id, generation.api, generation.text) == (message.id, "messages", "Hi there")
    assert (llm.stats.billed_input_tokens, llm.stats.billed_output_tokens) == (2, 3)


def test_messages_prefill_with_trailing_whitespace_is_refused(
    llm: FakeLLM, claude: anthropic.Anthropic
) -> None:
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.messages.create(
            model="c",
            max_tokens=64,
            messages=[*USER, {"role": "assistant", "content": "Sure, "}],
        )
    assert refused.value.body == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "messages: final assistant content cannot end with trailing whitespace",
        },
        "request_id": refused.value.body["request_id"],
    }
    assert llm.stats.generations == [] and served(llm.stats) == {"messages": 1}
    prefilled = claude.messages.create(
        model="c",
        max_tokens=64,
        messages=[*USER, {"role": "assistant", "content": "Sure,"}],
    )
    assert prefilled.content[0].type == "text" and prefilled.content[0].text == "ok"


def test_messages_fail_and_die(llm: FakeLLM, claude: anthropic.Anthropic) -> None:
    llm.script(Reply(fail=(529, "overloaded")), Reply(Text("a", "b"), die_after=1))
    with pytest.raises(anthropic.APIStatusError) as overloaded:
        claude.messages.create(model="c", max_tokens=8, messages=USER)
    assert overloaded.value.status_code == 529
    assert overloaded.value.body["error"]["type"] == "overloaded_error"
    with pytest.raises(CUT, match="incomplete chunked read"):
        with claude.messages.stream(model="c", max_tokens=8, messages=USER) as stream:
            list(stream)
    stats = llm.wait_for(lambda s: statuses(s) == ["failed", "incomplete"])
    assert (stats.billed_input_tokens, stats.billed_output_tokens) == (2, 1)


def test_messages_input_tokens_count_system_and_tool_blocks(
    llm: FakeLLM, claude: anthropic.Anthropic
) -> None:
    messages: Any = [
        {"role": "user", "content": "charge me"},  # 2
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "charge", "input": {"amount": 5}}],
        },  # 2
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t", "content": "charged five dollars"}
            ],
        },  # 3
    ]
    claude.messages.create(model="c", max_tokens=8, system="you bill", messages=messages)  # 2
    assert llm.stats.generations[0].input_tokens == 9
