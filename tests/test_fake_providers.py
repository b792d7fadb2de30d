"""doemu.testing.fake_providers, driven by the official SDKs: their parsers are the proof that the
fakes speak the real wire formats. One server for the module, reset before each test."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseOutputItemAddedEvent,
    ResponseTextDeltaEvent,
)

from doemu.testing.fake_providers import CounterServer, FakeLLM, Reply, Stats, Text, ToolUse

try:  # the HTTP client under the current SDKs; the Anthropic SDK lets its errors through a stream
    import httpx2

    CUT: tuple[type[Exception], ...] = (
        anthropic.APIConnectionError,
        httpx.TransportError,
        httpx2.TransportError,
    )
except ImportError:  # older SDKs use httpx itself
    CUT = (anthropic.APIConnectionError, httpx.TransportError)

KEY = "test-key"
USER: Any = [{"role": "user", "content": "say hello"}]  # 2 input tokens
CHARGE_TOOL: Any = {
    "type": "function",
    "function": {"name": "charge", "parameters": {"type": "object", "properties": {}}},
}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLM]:
    with FakeLLM(api_key=KEY) as llm:
        yield llm


@pytest.fixture
def llm(server: FakeLLM) -> FakeLLM:
    server.reset()
    return server


@pytest.fixture
def oai(llm: FakeLLM) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{llm.url}/v1", api_key=KEY, max_retries=0, timeout=10) as client:
        yield client


@pytest.fixture
def claude(llm: FakeLLM) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=llm.url, api_key=KEY, max_retries=0, timeout=10) as client:
        yield client


def texts(events: list[Any]) -> str:
    return "".join(event.delta for event in events if isinstance(event, ResponseTextDeltaEvent))


def statuses(stats: Stats) -> list[str]:
    return [generation.status for generation in stats.generations]


def served(stats: Stats) -> dict[str, int]:
    """The routes that were called (``stats.requests`` has a 0 for every other one)."""
    return {route: count for route, count in stats.requests.items() if count}


# -- OpenAI Responses ----------------------------------------------------------------------------


def test_responses_background_stream_parses_as_typed_events(
    llm: FakeLLM, oai: openai.OpenAI
) -> None:
    llm.script(Reply(Text("Hello ", "world"), ToolUse("charge", {"amount": 5}, id="call_1")))
    events = list(
        oai.responses.create(model="gpt-test", input="say hello", stream=True, background=True)
    )

    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert isinstance(events[0], ResponseCreatedEvent)
    assert events[0].response.status == "queued" and events[0].response.background
    assert [event.type for event in events[:3]] == [
        "response.created",
        "response.queued",
        "response.in_progress",
    ]
    assert texts(events) == "Hello world"
    call = next(
        e.item
        for e in events
        if isinstance(e, ResponseOutputItemAddedEvent) and e.item.type == "function_call"
    )
    assert (call.call_id, call.name, call.arguments) == ("call_1", "charge", "")
    deltas = [e for e in events if isinstance(e, ResponseFunctionCallArgumentsDeltaEvent)]
    assert [json.loads(delta.delta) for delta in deltas] == [{"amount": 5}]
    completed = events[-1]
    assert isinstance(completed, ResponseCompletedEvent)
    assert completed.response.output_text == "Hello world"
    assert completed.response.usage is not None
    assert (completed.response.usage.input_tokens, completed.response.usage.output_tokens) == (2, 3)

    (generation,) = llm.stats.generations
    assert generation.id == completed.response.id
    assert (generation.api, generation.status, generation.text) == (
        "responses",
        "completed",
        "Hello world",
    )
    assert generation.request["input"] == "say hello"
    assert generation.headers["authorization"] == f"Bearer {KEY}"
    assert (llm.stats.billed_input_tokens, llm.stats.billed_output_tokens) == (2, 3)


def test_responses_resume_after_die_after_goes_on_in_background(
    llm: FakeLLM, oai: openai.OpenAI
) -> None:
    llm.script(Reply(Text("a ", "b ", "c ", "d"), die_after=2))
    seen: list[Any] = []
    with pytest.raises(openai.APIConnectionError):
        for event in oai.responses.create(model="m", input="x", stream=True, background=True):
            seen.append(event)
    assert texts(seen) == "a b "
    response_id = seen[0].response.id
    stats = llm.wait_for(lambda s: s.generations[0].status == "completed")
    assert stats.generations[0].output_tokens == 4  # it went on without its stream

    resumed = list(
        oai.responses.retrieve(response_id, stream=True, starting_after=seen[-1].sequence_number)
    )
    assert resumed[0].sequence_number == seen[-1].sequence_number + 1
    assert texts(seen) + texts(resumed) == "a b c d"
    assert isinstance(resumed[-1], ResponseCompletedEvent)
    assert served(llm.stats) == {"responses.create": 1, "responses.retrieve": 1}
    assert (llm.stats.billed_input_tokens, llm.stats.billed_output_tokens) == (1, 4)


def test_responses_retrieve_follows_a_live_background_generation(
    llm: FakeLLM, oai: openai.OpenAI
) -> None:
    llm.script(Reply(Text("one ", "two ", "three"), hold_after=1))
    stream = oai.responses.create(model="m", input="x", stream=True, background=True)
    first = [next(stream) for _ in range(6)]  # created … in_progress, item, part, delta 1
    assert texts(first) == "one "
    stream.close()  # the client goes away; a background generation does not
    llm.wait_held()
    current = oai.responses.retrieve(first[0].response.id)
    assert (current.status, current.output_text) == ("in_progress", "one ")

    resumed = oai.responses.retrieve(current.id, stream=True, starting_after=5)
    llm.release()
    rest = list(resumed)
    assert texts(first) + texts(rest) == "one two three"
    assert oai.responses.retrieve(current.id).status == "completed"


def test_responses_without_background_stop_when_the_client_leaves(
    llm: FakeLLM, oai: openai.OpenAI
) -> None:
    llm.script(Reply(Text("a", "b", "c"), hold_after=1))
    stream = oai.responses.create(model="m", input="x", stream=True)
    assert texts([next(stream) for _ in range(5)]) == "a"
    llm.wait_held()
    stream.close()
    stats = llm.wait_for(lambda s: statuses(s) == ["incomplete"])
    assert stats.billed_output_tokens == 1
    assert oai.responses.retrieve(stats.generations[0].id).status == "incomplete"


def test_responses_idempotency_key_starts_one_generation(llm: FakeLLM, oai: openai.OpenAI) -> None:
    llm.script(Reply(Text("once")), Reply(Text("twice")))
    key = {"Idempotency-Key": "turn-1"}
    first = list(oai.responses.create(model="m", input="hi", stream=True, extra_headers=key))
    again = list(oai.responses.create(model="m", input="hi", stream=True, extra_headers=key))
    plain = oai.responses.create(model="m", input="hi", extra_headers=key)

    assert [event.model_dump() for event in again] == [event.model_dump() for event in first]
    assert plain.id == first[0].response.id and plain.output_text == "once"
    (generation,) = llm.stats.generations
    assert generation.idempotency_key == "turn-1"
    assert llm.stats.requests["responses.create"] == 3
    assert len(llm.requests("responses")) == 3
    assert (llm.stats.billed_input_tokens, llm.stats.billed_output_tokens) == (1, 1)
    assert llm.queued == 1


def test_responses_background_without_stream_is_queued_then_polled(
    llm: FakeLLM, oai: openai.OpenAI
) -> None:
    created = oai.responses.create(model="m", input="x", background=True)
    assert created.status == "queued"
    llm.wait_for(lambda s: statuses(s) == ["completed"])
    done = oai.responses.retrieve(created.id)
    assert (done.status, done.output_text) == ("completed", "ok")


def test_responses_stall_then_cancel(llm: FakeLLM, oai: openai.OpenAI) -> None:
    llm.script(Reply(Text("a", "b"), stall_after=1))
    created = oai.responses.create(model="m", input="x", background=True)
    llm.wait_for(lambda s: s.billed_output_tokens == 1)
    assert oai.responses.retrieve(created.id).status == "in_progress"
    assert oai.responses.cancel(created.id).status == "cancelled"
    assert statuses(llm.stats) == ["cancelled"]


def test_responses_errors_have_the_real_shapes(llm: FakeLLM, oai: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        oai.responses.retrieve("resp_nope")
    assert missing.value.body == {
        "message": "Response with id 'resp_nope' not found.",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    with pytest.raises(openai.BadRequestError, match="store"):
        oai.responses.create(model="m", input="x", background=True, store=False)
    llm.script(Reply(fail=(429, "rate limited")))
    with pytest.raises(openai.RateLimitError) as limited:
        oai.responses.create(model="m", input="x", stream=True)
    assert limited.value.body == {
        "message": "rate limited",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
    assert statuses(llm.stats) == ["failed"]
    assert (llm.stats.billed_input_tokens, llm.stats.billed_output_tokens) == (0, 0)


def test_responses_input_tokens_count_every_text(llm: FakeLLM, oai: openai.OpenAI) -> None:
    oai.responses.create(
        model="m",
        instructions="be brief",  # 2
        input=[
            {"role": "user", "content": "what is owed"},  # 3
            {"role": "user", "content": [{"type": "input_text", "text": "in total"}]},  # 2
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": '{"a": 1}'},  # 2
            {"type": "function_call_output", "call_id": "c", "output": "five dollars"},  # 2
        ],
    )
    assert llm.stats.generations[0].input_tokens == 11


# -- OpenAI chat completions ---------------------------------------------------------------------


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


# -- Anthropic Messages --------------------------------------------------------------------------


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


# -- every API: auth, malformed requests, waiting ------------------------------------------------


OPENAI_AUTH = {"authorization": f"Bearer {KEY}"}
CLAUDE_AUTH = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}


@pytest.mark.parametrize(
    ("path", "headers", "body", "status", "error"),
    [
        ("/v1/responses", {}, {"model": "m", "input": "x"}, 401, "invalid_request_error"),
        ("/v1/chat/completions", {"authorization": "Bearer no"}, {}, 401, "invalid_request_error"),
        ("/v1/chat/completions", OPENAI_AUTH, {"model": "m"}, 400, "invalid_request_error"),
        ("/v1/responses", OPENAI_AUTH, "{not json", 400, "invalid_request_error"),
        ("/v1/messages", {**CLAUDE_AUTH, "x-api-key": "no"}, {}, 401, "authentication_error"),
        ("/v1/messages", {"x-api-key": KEY}, {}, 400, "invalid_request_error"),
        (
            "/v1/messages",
            CLAUDE_AUTH,
            {"model": "c", "messages": USER},
            400,
            "invalid_request_error",
        ),
    ],
)
def test_refusals_use_each_providers_error_body(
    llm: FakeLLM, path: str, headers: dict[str, str], body: Any, status: int, error: str
) -> None:
    content = body if isinstance(body, str) else json.dumps(body)
    answer = httpx.post(f"{llm.url}{path}", headers=headers, content=content)
    assert answer.status_code == status
    payload = answer.json()
    if path == "/v1/messages":
        assert payload["type"] == "error" and payload["error"]["type"] == error
    else:
        assert set(payload["error"]) == {"message", "type", "param", "code"}
        assert payload["error"]["type"] == error
    assert llm.stats.generations == []


async def test_async_clients_and_waits(llm: FakeLLM) -> None:
    llm.script(Reply(Text("x", "y"), hold_after=1))
    async with openai.AsyncOpenAI(base_url=f"{llm.url}/v1", api_key=KEY, max_retries=0) as client:
        stream = await client.responses.create(model="m", input="x", stream=True, background=True)
        await llm.await_held(timeout=10)
        llm.release()
        events = [event async for event in stream]
    assert texts(events) == "xy"
    stats = await llm.await_for(lambda s: statuses(s) == ["completed"], timeout=10)
    assert stats.billed_output_tokens == 2


def test_wait_for_names_the_predicate_and_reset_forgets(llm: FakeLLM, oai: openai.OpenAI) -> None:
    with pytest.raises(TimeoutError, match="never_true"):

        def never_true(stats: Stats) -> bool:
            return False

        llm.wait_for(never_true, timeout=0.05)
    response = oai.responses.create(model="m", input="x")
    llm.script(Reply(Text("left over")))
    llm.reset()
    assert served(llm.stats) == {} and llm.stats.generations == []
    assert (llm.stats.billed_input_tokens, llm.stats.billed_output_tokens) == (0, 0)
    assert llm.queued == 0 and llm.requests("responses") == []
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(response.id)


_KILLED_CLIENT = """
import sys, httpx
body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}
headers = {"authorization": "Bearer test-key"}
with httpx.stream("POST", sys.argv[1] + "/v1/chat/completions", json=body, headers=headers) as r:
    for line in r.iter_lines():
        if '"content":"a"' in line:
            print("streaming", flush=True)
"""


def test_a_sigkilled_client_stops_its_generation_and_the_server_goes_on(
    llm: FakeLLM, oai: openai.OpenAI
) -> None:
    llm.script(Reply(Text("a", "b"), stall_after=1))
    client = subprocess.Popen(
        [sys.executable, "-c", _KILLED_CLIENT, llm.url], stdout=subprocess.PIPE, text=True
    )
    try:
        assert client.stdout is not None and client.stdout.readline() == "streaming\n"
    finally:
        client.kill()
        client.wait(10)
    llm.wait_for(lambda s: statuses(s) == ["incomplete"])
    completion = oai.chat.completions.create(model="m", messages=USER)
    assert completion.choices[0].message.content == "ok"


# -- CounterServer -------------------------------------------------------------------------------


@pytest.mark.parametrize("honour", [True, False])
def test_counter_idempotency(honour: bool) -> None:
    with CounterServer(honour_idempotency=honour) as counter, httpx.Client() as client:
        key = {"Idempotency-Key": "charge-1"}
        first = client.post(f"{counter.url}/increment", json={"amount": 5}, headers=key).json()
        second = client.post(f"{counter.url}/increment", json={"amount": 5}, headers=key).json()
        client.post(f"{counter.url}/increment")
        assert first == {"count": 1, "idempotency_key": "charge-1"}
        assert second == (first if honour else {"count": 2, "idempotency_key": "charge-1"})
        assert (counter.count, counter.calls) == ((2, 3) if honour else (3, 3))
        assert counter.bodies == [{"amount": 5}, {"amount": 5}, None]


def test_counter_hold_next_answers_after_release() -> None:
    with CounterServer() as counter:
        counter.hold_next()
        answers: list[Any] = []
        caller = threading.Thread(
            target=lambda: answers.append(httpx.post(f"{counter.url}/increment").json())
        )
        caller.start()
        counter.wait_held(timeout=10)
        assert (counter.count, answers) == (1, [])  # the effect happened, the answer waits
        counter.release()
        caller.join(10)
        assert answers == [{"count": 1, "idempotency_key": None}]


# -- a responder, the demo model and the CLI -----------------------------------------------------

APPROVE_TOOL: Any = {"type": "function", "function": {"name": "approve", "parameters": {}}}


def _chat_text(client: openai.OpenAI, messages: Any, **extra: Any) -> tuple[str, list[Any]]:
    """A streamed chat completion's text and its tool calls as ``(id, name, arguments)`` (the
    SDK's own parser reads the stream)."""
    stream = client.chat.completions.create(model="m", messages=messages, stream=True, **extra)
    deltas = [chunk.choices[0].delta for chunk in stream if chunk.choices]
    calls: dict[int, list[str]] = {}
    for call in (call for delta in deltas for call in delta.tool_calls or ()):
        seen = calls.setdefault(call.index, [call.id or "", "", ""])
        seen[1] += (call.function and call.function.name) or ""
        seen[2] += (call.function and call.function.arguments) or ""
    text = "".join(delta.content or "" for delta in deltas)
    return text, [(i, n, json.loads(a or "{}")) for i, n, a in calls.values()]


def test_a_responder_answers_what_nothing_was_scripted_for_in_every_format() -> None:
    asked: list[tuple[str, Any]] = []

    def echo(api: str, body: dict[str, Any]) -> Reply | None:
        asked.append((api, body))
        body.clear()  # its own copy: what the fake recorded is untouched
        return None if len(asked) == 2 else Reply(Text("echo ", api))

    with (
        FakeLLM(api_key=KEY, responder=echo) as llm,
        openai.OpenAI(base_url=f"{llm.url}/v1", api_key=KEY, max_retries=0) as client,
        anthropic.Anthropic(base_url=llm.url, api_key=KEY, max_retries=0) as claude,
    ):
        llm.script(Reply(Text("scripted")))
        assert _chat_text(client, USER)[0] == "scripted"  # the script comes first
        assert _chat_text(client, USER)[0] == "echo chat"
        assert _chat_text(client, USER)[0] == "ok"  # None: the default reply
        assert client.responses.create(model="m", input="hi").output_text == "echo responses"
        reply = claude.messages.create(model="c", max_tokens=8, messages=USER)
        assert reply.content[0].type == "text" and reply.content[0].text == "echo messages"
        assert [api for api, _ in asked] == ["chat", "chat", "responses", "messages"]
        assert llm.requests("chat")[1]["messages"] == USER
        llm.responder = None
        assert _chat_text(client, USER)[0] == "ok" and len(asked) == 4


BOOM: Any = [{"role": "user", "content": "boom"}]


def test_a_failing_responder_is_the_providers_500_and_the_server_goes_on() -> None:
    def broken(api: str, body: dict[str, Any]) -> Reply | None:
        if "boom" in json.dumps(body):
            raise ValueError("no answer for boom")
        return "not a reply"  # type: ignore[return-value]

    with (
        FakeLLM(api_key=KEY, responder=broken) as llm,
        openai.OpenAI(base_url=f"{llm.url}/v1", api_key=KEY, max_retries=0) as client,
    ):
        with pytest.raises(openai.InternalServerError, match="ValueError: no answer for boom"):
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "boom"}]
            )
        with pytest.raises(openai.InternalServerError, match="returned str"):
            client.chat.completions.create(model="m", messages=USER)
        assert statuses(llm.stats) == ["failed", "failed"]
        llm.script(Reply(Text("still here")))
        assert _chat_text(client, USER)[0] == "still here"


def test_concurrent_requests_each_get_their_own_body() -> None:
    def echo(api: str, body: dict[str, Any]) -> Reply:
        return Reply(Text(*body["messages"][-1]["content"].split()), delay_ms=5)

    with (
        FakeLLM(api_key=KEY, responder=echo) as llm,
        openai.OpenAI(base_url=f"{llm.url}/v1", api_key=KEY, max_retries=0) as client,
    ):
        said = [f"caller{i} says {i}" for i in range(8)]
        heard: dict[int, str] = {}

        def call(i: int) -> None:
            heard[i] = _chat_text(client, [{"role": "user", "content": said[i]}])[0]

        threads = [threading.Thread(target=call, args=(i,)) for i in range(len(said))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
        assert heard == {i: text.replace(" ", "") for i, text in enumerate(said)}


def test_the_demo_model_answers_asks_for_approval_and_continues_a_cut_answer() -> None:
    from doemu.testing.fake_providers.__main__ import DEMO_DELAY_MS, demo_responder

    def undelayed(api: Any, body: dict[str, Any]) -> Reply | None:
        reply = demo_responder(api, body)
        assert reply is not None and reply.delay_ms == DEMO_DELAY_MS
        return Reply(*reply.items)  # the same words, without the demo's pauses

    with (
        FakeLLM(api_key=KEY, responder=undelayed) as llm,
        openai.OpenAI(base_url=f"{llm.url}/v1", api_key=KEY, max_retries=0) as client,
    ):
        question = [{"role": "user", "content": "tell me about otters"}]
        answer, calls = _chat_text(client, question, tools=[APPROVE_TOOL])
        assert answer.startswith("You asked: “tell me about otters”.") and calls == []
        (generation,) = llm.stats.generations
        assert generation.output_tokens == len(answer.split()) > 30  # one word per delta

        ask = [{"role": "user", "content": "please approve the deploy"}]
        lead, calls = _chat_text(client, ask, tools=[APPROVE_TOOL])
        assert lead == "I need your approval before I do that. "
        ((call_id, name, args),) = calls
        assert (name, args) == ("approve", {"action": "please approve the deploy"})
        asked = [*ask, {"role": "assistant", "content": lead, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": "approve", "arguments": json.dumps(args)}}]}]  # fmt: skip
        for result, said in (({"approved": True}, "Approved: please approve the deploy."),
                             ({"approved": False}, "Not approved.")):  # fmt: skip
            answered = [*asked, {"role": "tool", "tool_call_id": call_id,
                                 "content": json.dumps(result)}]  # fmt: skip
            text, more = _chat_text(client, answered, tools=[APPROVE_TOOL])
            assert text.startswith(said) and more == [], text
        assert _chat_text(client, ask)[0].startswith("You asked:")  # no approve tool offered

        cut = answer[: answer.index("Durable")]
        instruction = "Your previous answer was cut off. Continue exactly where it stopped."
        rest = _chat_text(client, [*question, {"role": "assistant", "content": cut},
                                   {"role": "user", "content": instruction}])[0]  # fmt: skip
        assert cut + rest == answer


def test_the_demo_model_reads_every_wire_format_and_the_example_tools() -> None:
    from doemu.testing.fake_providers.__main__ import demo_responder

    def said(api: Any, body: dict[str, Any]) -> tuple[str, list[tuple[str, Any]]]:
        reply = demo_responder(api, body)
        assert reply is not None
        texts = "".join(d for item in reply.items if isinstance(item, Text) for d in item.chunks)
        return texts, [(i.name, dict(i.arguments)) for i in reply.items if isinstance(i, ToolUse)]

    tools = [{"type": "function", "name": n} for n in ("approve", "word_count", "summarize")]
    assert said("responses", {"input": "count these words", "tools": tools})[1] == [
        ("word_count", {"text": "count these words"})
    ]
    counted = {"input": [{"role": "user", "content": [{"type": "input_text", "text": "count"}]},
                         {"type": "function_call", "call_id": "c1", "name": "word_count",
                          "arguments": "{}"},
                         {"type": "function_call_output", "call_id": "c1",
                          "output": '{"words": 1}'}], "tools": tools}  # fmt: skip
    assert said("responses", counted)[0].startswith("That message has 1 words")
    otters = {"messages": [{"role": "user", "content": "summarize otters"}], "tools": tools}
    assert said("messages", otters)[1] == [("summarize", {"message": "summarize otters"})]
    child = {"system": "You summarize.", "messages": [{"role": "user", "content": "a b c"}]}
    assert said("messages", child)[0] == "In short: a b c."
    approved = {"messages": [
        {"role": "user", "content": [{"type": "text", "text": "approve it"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "approve",
                                           "input": {"action": "ship it"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": '{"approved": true}'}]}]}  # fmt: skip
    assert said("messages", approved)[0].startswith("Approved: ship it.")
    prefill = {"messages": [{"role": "user", "content": "hi"},
                            {"role": "assistant", "content": "You asked: “hi”. I"}]}  # fmt: skip
    assert said("messages", prefill)[0].startswith(" am the demo model")
    assert demo_responder("chat", {"messages": [{"role": "system", "content": "x"}]}) is None


def _first_line(proc: subprocess.Popen[str], within: float = 15.0) -> str:
    """The process's first stdout line, read against a deadline (a hung start fails the test)."""
    import selectors

    assert proc.stdout is not None
    deadline = time.monotonic() + within
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while not selector.select(timeout=0.1):
            assert proc.poll() is None, f"it exited with {proc.returncode}"
            assert time.monotonic() < deadline, "no line within the deadline"
    return proc.stdout.readline()


def test_the_cli_serves_a_demo_fake_until_terminated_and_never_prints_the_key() -> None:
    command = [sys.executable, "-m", "doemu.testing.fake_providers", "--port", "0", "--demo",
               "--api-key", "sk-cli-secret"]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = _first_line(proc)
        url = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert url is not None and "sk-cli-secret" not in line, line
        with openai.OpenAI(base_url=f"{url[0]}/v1", api_key="sk-cli-secret", max_retries=0,
                           timeout=15) as client:  # fmt: skip
            words: list[tuple[float, str]] = []  # the first words, as they arrive
            hello: Any = [{"role": "user", "content": "hello cli"}]
            with client.chat.completions.create(model="m", messages=hello, stream=True) as stream:
                for chunk in stream:
                    if chunk.choices and chunk.choices[0].delta.content:
                        words.append((time.monotonic(), chunk.choices[0].delta.content))
                        if len(words) == 4:
                            break  # and leave mid-answer: the server stops that generation
            assert "".join(w for _, w in words) == "You asked: “hello cli”. "
            # word by word: each delta one word (a timed assertion would be flaky; the pacing,
            # DEMO_DELAY_MS, is the responder's, asserted on its Reply in the tests above)
            assert [len(w.split()) for _, w in words] == [1, 1, 1, 1]
            with pytest.raises(openai.AuthenticationError):
                client.with_options(api_key="wrong").chat.completions.create(
                    model="m", messages=USER
                )
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    assert "sk-cli-secret" not in out + err and "Traceback" not in err, (out, err)
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        busy = subprocess.run([*command[:4], str(port)], capture_output=True, text=True,
                              timeout=15)  # fmt: skip
    assert busy.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in busy.stderr
