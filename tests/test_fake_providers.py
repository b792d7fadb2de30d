"""What every fake provider shares — authentication, malformed bodies, waiting, a SIGKILLed
client — and the side-effect :class:`CounterServer`."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Any

import httpx
import openai
import pytest

from doemu.testing.fake_providers import (
    CounterServer,
    FakeLLM,
    Reply,
    Stats,
    Text,
)

from . import fake_llm_support as support
from .fake_llm_support import KEY, USER, served, statuses, texts

# The shared fixtures (tests/fake_llm_support.py): one server per module.
server, llm, oai = support.server, support.llm, support.oai

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


# -- CounterServer ---------------------------------------------------------------


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
