"""The fake OpenAI Responses API, driven by the official ``openai`` SDK: background mode, streams
resumed with ``starting_after`` (each retrieval recorded), idempotency keys, cancel, errors."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseOutputItemAddedEvent,
)

from doemu.testing.fake_providers import (
    FakeLLM,
    Reply,
    Retrieval,
    Text,
    ToolUse,
)

from . import fake_llm_support as support
from .fake_llm_support import KEY, served, statuses, texts

# The shared fixtures (tests/fake_llm_support.py): one server per module.
server, llm, oai = support.server, support.llm, support.oai


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
    # The retrieval is on the books: the cursor it asked for and every event it was sent.
    sent = tuple(event.sequence_number for event in resumed)
    assert llm.stats.retrievals == [Retrieval(response_id, seen[-1].sequence_number, sent)]
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
    whole = list(oai.responses.retrieve(current.id, stream=True))  # no cursor: from the start
    assert [(r.starting_after, r.sent[0]) for r in llm.stats.retrievals] == [(5, 6), (None, 0)]
    assert llm.stats.retrievals[1].sent == tuple(e.sequence_number for e in whole)
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
