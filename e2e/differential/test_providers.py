"""The provider adapters and the operation ledger on doemu and on workerd, with real SIGKILLs.

``e2e/apps/providers``: chat agents on OpenAI Responses, Anthropic Messages and OpenAI chat
completions, whose HTTP goes through ``workers.fetch`` to the fake provider servers in this
process (``FakeLLM``; on workerd through the runner's network service, which allows loopback),
with two side-effect counters behind tools: ``charge`` (idempotent: the ledger sends an
idempotency key) and ``notify`` (not). Every outcome is read from the object's SQLite file or
from the fakes' books, never by waking the object: after a kill, only the persisted keep-alive
alarm brings an interrupted turn back.

* Responses: a turn killed after its background response was created is *retrieved* from the
  stored text cursor, never generated again;
* Anthropic: a partial reply is continued once, as a prefill;
* chat completions: retried once with the AI SDK's continuation prompt (the partial last);
* the ledger: an idempotent side effect killed mid-call happens once (its retry is collapsed by
  its key); an unkeyed one is reported as ambiguous to the model, never run again;
* usage per turn and per agent equals what the provider billed; a cut request stays counted as a
  partial entry.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from doemu.testing.fake_providers import CounterServer, FakeLLM, Reply, Text, ToolUse
from tests.polling import eventually_sync

from ..targets import AGENTS_VENDOR, ROOT, TargetServer
from .chatwire import RESPONSE, ChatSocket
from .conftest import running

APP = ROOT / "e2e" / "apps" / "providers"
AMBIGUITY = "may have executed; verify before retrying"


@pytest.fixture(scope="module")
def fakes() -> Iterator[tuple[FakeLLM, CounterServer, CounterServer]]:
    """The fake providers and the two counters, in this process: they outlive every kill."""
    with (
        FakeLLM(api_key="test-key") as llm,
        CounterServer(honour_idempotency=True) as keyed,
        CounterServer(honour_idempotency=False) as plain,
    ):
        yield llm, keyed, plain


@pytest.fixture(scope="module")
def providers(serve: Any, fakes: tuple[FakeLLM, CounterServer, CounterServer]) -> TargetServer:
    llm, keyed, plain = fakes
    keys = {
        "OPENAI_API_KEY": "test-key",
        "OPENAI_BASE_URL": f"{llm.url}/v1",
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": llm.url,
        "COUNTER_URL": keyed.url,
        "COUNTER_PLAIN_URL": plain.url,
    }
    server: TargetServer = serve(APP, vendor=AGENTS_VENDOR, vars=keys)
    return server


@pytest.fixture
def llm(fakes: tuple[FakeLLM, CounterServer, CounterServer]) -> FakeLLM:
    """The fake provider, its script, books and held generations cleared for this test."""
    for fake in fakes:
        fake.reset()
    return fakes[0]


@pytest.fixture
def keyed(llm: FakeLLM, fakes: tuple[FakeLLM, CounterServer, CounterServer]) -> CounterServer:
    return fakes[1]


@pytest.fixture
def plain(llm: FakeLLM, fakes: tuple[FakeLLM, CounterServer, CounterServer]) -> CounterServer:
    return fakes[2]


def words(start: int, stop: int) -> list[str]:
    return [f"w{i} " for i in range(start, stop)]


def prefilled(start: int, stop: int) -> list[str]:
    """What a model continuing a prefill ``… w<start-1>`` streams: each word after a space."""
    out = [f" w{i}" for i in range(start, stop)]
    return [out[0].lstrip(), *out[1:]] if start == 0 and out else out


class Chat:
    def __init__(self, server: TargetServer, binding: str, name: str) -> None:
        self.server, self.binding, self.name = server, binding, name
        kebab = "".join(f"-{c.lower()}" if c.isupper() else c for c in binding).lstrip("-")
        self.path = f"/agents/{kebab}/{name}"

    def send(self, text: str, until_chunks: int = 1) -> None:
        """Send a user message; return once ``until_chunks`` reply chunks arrived."""
        body = {"messages": [{"id": f"u-{uuid.uuid4().hex[:8]}", "role": "user",
                              "parts": [{"type": "text", "text": text}]}],
                "trigger": "submit-message"}  # fmt: skip
        frame = {"id": uuid.uuid4().hex[:12], "type": "cf_agent_use_chat_request",
                 "init": {"method": "POST", "body": json.dumps(body)}}  # fmt: skip
        with ChatSocket(f"{running(self.server).ws_url}{self.path}") as ws:
            ws.send(json.dumps(frame))
            ws.until(
                lambda frames: (
                    sum(1 for f in frames if f.get("type") == RESPONSE and f.get("body"))
                    >= until_chunks
                )
            )

    def sql(self, query: str) -> list[dict[str, Any]]:
        return self.server.sql(self.binding, self.name, query)

    def messages(self) -> list[dict[str, Any]]:
        rows = self.sql("SELECT message FROM cf_ai_chat_agent_messages ORDER BY seq")
        return [json.loads(row["message"]) for row in rows]

    def texts(self) -> list[tuple[str, str]]:
        return [(m["role"], "".join(p.get("text", "") for p in m["parts"] if p["type"] == "text"))
                for m in self.messages()]  # fmt: skip

    def persisted_text(self) -> str:
        """The text of the reply's chunks that reached storage (read while the server is down)."""
        rows = self.sql("SELECT body FROM cf_ai_chat_stream_chunks ORDER BY chunk_index")
        chunks: list[dict[str, Any]] = []
        for row in rows:  # a row is one chunk, or a flushed segment of them
            body = json.loads(row["body"])
            for item in body if isinstance(body, list) else [body]:
                chunks.append(json.loads(item) if isinstance(item, str) else item)
        return "".join(c.get("delta", "") for c in chunks if c.get("type") == "text-delta")

    def usage(self) -> tuple[int, int]:
        (row,) = self.sql("SELECT coalesce(sum(input_tokens), 0) AS i, "
                          "coalesce(sum(output_tokens), 0) AS o FROM cf_agents_usage")  # fmt: skip
        return int(row["i"]), int(row["o"])

    def usage_rows(self) -> list[tuple[int, int, bool]]:
        """``(input, output, partial)`` of each usage entry, oldest first."""
        rows = self.sql("SELECT input_tokens AS i, output_tokens AS o, partial AS p "
                        "FROM cf_agents_usage ORDER BY id")  # fmt: skip
        return [(int(r["i"]), int(r["o"]), bool(r["p"])) for r in rows]

    def usage_totals(self) -> dict[str, Any]:
        """What ``usage()`` answers, asked over HTTP (wakes the object)."""
        answer = httpx.get(f"{running(self.server).url}{self.path}/usage", timeout=30)
        assert answer.status_code == 200, answer.text
        totals: dict[str, Any] = answer.json()
        return totals

    def tool_part(self, tool: str) -> dict[str, Any]:
        (part,) = [p for p in self.messages()[-1]["parts"] if p["type"] == f"tool-{tool}"]
        return part


def stored_events(llm: FakeLLM, response_id: str) -> list[dict[str, Any]]:
    """Every event of a stored response, read as a client would (retrieving never bills)."""
    answer = httpx.get(
        f"{llm.url}/v1/responses/{response_id}?stream=true",
        headers={"authorization": "Bearer test-key"},
        timeout=20,
    )
    lines = answer.text.splitlines()
    return [json.loads(line[6:]) for line in lines if line.startswith("data: ")]


def test_openai_responses_killed_after_create_is_retrieved_not_regenerated(
    providers: TargetServer, llm: FakeLLM, target: str
) -> None:
    """1. A background response streams 30 of 60 words, then waits; the agent has stored a
       partial of 10 words or more, the response's id and the output counted so far when the
       server is SIGKILLed.
    2. The background generation finishes while the agent is dead; the server restarts.
    3. The alarm brings the turn back: it re-attaches with ``starting_after`` = the text cursor
       stored for the persisted text, reads nothing before it, and the reply is whole, from
       the one generation; one usage entry, completed, equal to what was billed."""
    llm.script(Reply(Text(*words(0, 60)), hold_after=30))
    chat = Chat(providers, "ResponsesChat", f"retrieve-{target}")
    chat.send("tell me", until_chunks=20)
    llm.wait_held(timeout=10)
    eventually_sync(
        lambda: chat.sql(
            # The checkpoint's value is msgpack on doemu and V8's serialization on workerd;
            # both keep an ASCII string's bytes as they are.
            "SELECT 1 AS found FROM _cf_KV "
            "WHERE key = 'cf_agents_model_turn' AND instr(value, 'resp_') > 0"
        ),
        within=10,
        what="the response's id in the checkpoint",
    )
    eventually_sync(lambda: len(chat.persisted_text().split()) >= 10, within=10,
                    what="a persisted partial of 10 words or more")  # fmt: skip
    eventually_sync(lambda: chat.usage_rows() == [(0, 30, True)], within=10,
                    what="the running request's output, counted as it streamed")  # fmt: skip
    providers.kill()
    persisted = len(chat.persisted_text().split())
    (generation,) = llm.stats.generations
    llm.release()  # the background generation finishes while the agent is dead
    providers.restart()
    whole = "".join(words(0, 60))
    eventually_sync(lambda: chat.texts() == [("user", "tell me"), ("assistant", whole)],
                    within=30, what="the whole reply, retrieved")  # fmt: skip
    stats = llm.stats
    assert stats.requests["responses.create"] == 1
    assert len(stats.generations) == 1
    (retrieval,) = stats.retrievals
    deltas = [e["sequence_number"] for e in stored_events(llm, generation.id)
              if e["type"] == "response.output_text.delta"]  # fmt: skip
    cursor = deltas[10 * (persisted // 10) - 1]  # the newest cursor the persisted text covers
    assert retrieval.starting_after == cursor
    assert list(retrieval.sent) == list(range(cursor + 1, cursor + 1 + len(retrieval.sent)))
    assert chat.usage() == (stats.billed_input_tokens, stats.billed_output_tokens)
    assert [partial for _, _, partial in chat.usage_rows()] == [False]


def test_anthropic_continues_the_partial_as_a_prefill_once(
    providers: TargetServer, llm: FakeLLM, target: str
) -> None:
    """A reply killed mid-stream is continued once: the second request ends with the stored
    partial as the assistant's prefill, and the transcript holds one coherent reply. The cut
    request still counts: its input, and its output as counted while it streamed (20 of 25
    deltas, written every 10), in a partial entry; usage() says the totals are a lower bound."""
    llm.script(Reply(Text(*words(0, 40)), hold_after=25))
    chat = Chat(providers, "AnthropicChat", f"prefill-{target}")
    chat.send("tell me", until_chunks=20)
    llm.wait_held(timeout=10)
    eventually_sync(lambda: chat.persisted_text(), within=10, what="a persisted partial")
    eventually_sync(lambda: [r[1:] for r in chat.usage_rows()] == [(20, True)], within=10,
                    what="the cut request's output, counted as it streamed")  # fmt: skip
    providers.kill()
    partial = chat.persisted_text()
    llm.script(Reply(Text(*prefilled(len(partial.split()), 40))))
    llm.release()
    providers.restart()
    whole = "".join(words(0, 40)).rstrip()
    eventually_sync(lambda: chat.texts() == [("user", "tell me"), ("assistant", whole)],
                    within=30, what="one coherent reply")  # fmt: skip
    requests = llm.requests("messages")
    assert len(requests) == 2  # the first, and exactly one continuation
    last = requests[1]["messages"][-1]
    assert last["role"] == "assistant"
    assert "".join(b["text"] for b in last["content"]) == partial.rstrip()
    cut, continuation = llm.stats.generations
    assert chat.usage_rows() == [
        (cut.input_tokens, 20, True),
        (continuation.input_tokens, continuation.output_tokens, False),
    ]
    totals = chat.usage_totals()
    assert totals["input_tokens"] == llm.stats.billed_input_tokens  # every input was counted
    assert (totals["partial_calls"], totals["tokens_lower_bound"]) == (1, True)


def test_chat_completions_retries_once_with_the_partial_as_the_last_message(
    providers: TargetServer, llm: FakeLLM, target: str
) -> None:
    """A reply killed mid-stream is asked for again once, with the AI SDK's continuation prompt
    (the user's message, then the stored partial as the last assistant message); the transcript
    holds one reply; the cut request is a partial usage entry."""
    llm.script(Reply(Text(*words(0, 40)), hold_after=25))
    chat = Chat(providers, "CompletionsChat", f"retry-{target}")
    chat.send("tell me", until_chunks=20)
    llm.wait_held(timeout=10)
    eventually_sync(lambda: chat.persisted_text(), within=10, what="a persisted partial")
    eventually_sync(lambda: chat.usage_rows() == [(0, 20, True)], within=10,
                    what="the cut request's output (its input comes only at the end)")  # fmt: skip
    providers.kill()
    partial = chat.persisted_text()
    llm.script(Reply(Text(*words(len(partial.split()), 40))))
    llm.release()
    providers.restart()
    whole = "".join(words(0, 40))
    eventually_sync(lambda: chat.texts() == [("user", "tell me"), ("assistant", whole)],
                    within=30, what="one reply")  # fmt: skip
    requests = llm.requests("chat")
    assert len(requests) == 2
    assert requests[1]["messages"][-2:] == [{"role": "user", "content": "tell me"},
                                            {"role": "assistant", "content": partial}]  # fmt: skip
    retried = llm.stats.generations[1]
    assert chat.usage_rows() == [(0, 20, True),
                                 (retried.input_tokens, retried.output_tokens, False)]  # fmt: skip


def test_an_idempotent_side_effect_killed_mid_call_happens_once(
    providers: TargetServer, llm: FakeLLM, keyed: CounterServer, target: str
) -> None:
    """The ledger: `charge` is held by its server when the agent is killed; after the restart the
    call is made again with the same idempotency key, which the server collapses: one charge,
    two calls; the tool part has the one charge's output."""
    llm.script(Reply(ToolUse("charge", {"amount": 5}, id="call_1")))
    llm.script(Reply(Text("charged ", "once")))
    keyed.hold_next()
    chat = Chat(providers, "CompletionsChat", f"pay-{target}")
    chat.send("pay", until_chunks=1)
    keyed.wait_held(timeout=10)
    providers.kill()
    keyed.release()
    providers.restart()
    eventually_sync(lambda: chat.texts()[-1:] == [("assistant", "charged once")],
                    within=30, what="the turn, finished after the restart")  # fmt: skip
    assert (keyed.count, keyed.calls) == (1, 2)  # the second call was collapsed by its key
    tool = chat.tool_part("charge")
    assert tool["state"] == "output-available" and tool["output"]["count"] == 1


def test_an_unkeyed_side_effect_killed_mid_call_is_reported_not_rerun(
    providers: TargetServer, llm: FakeLLM, plain: CounterServer, target: str
) -> None:
    """The ledger: `notify` (no key) is held when the agent is killed; after the restart it is
    never called again: the tool part is an error saying it may have executed, and the model is
    told so."""
    llm.script(Reply(ToolUse("notify", {"amount": 5}, id="call_1")))
    llm.script(Reply(Text("I will check first.")))
    plain.hold_next()
    chat = Chat(providers, "CompletionsChat", f"notify-{target}")
    chat.send("notify", until_chunks=1)
    plain.wait_held(timeout=10)
    providers.kill()
    plain.release()
    providers.restart()
    eventually_sync(lambda: chat.texts()[-1:] == [("assistant", "I will check first.")],
                    within=30, what="the turn, finished after the restart")  # fmt: skip
    assert (plain.count, plain.calls) == (1, 1)  # never run again
    tool = chat.tool_part("notify")
    assert tool["state"] == "output-error" and AMBIGUITY in tool["errorText"]
    told = llm.requests("chat")[-1]["messages"]
    assert any(m["role"] == "tool" and AMBIGUITY in m["content"] for m in told)


def test_usage_per_turn_and_agent_matches_the_billed_tokens(
    providers: TargetServer, llm: FakeLLM, target: str
) -> None:
    """Two turns (the first with a tool call, two generations): the usage rows per turn and
    their sum equal the provider's books; the cost is the class's prices times the tokens."""
    llm.script(Reply(ToolUse("charge", {"amount": 2}, id="call_1")))
    llm.script(Reply(Text("done ", "and ", "dusted")))
    llm.script(Reply(Text("second ", "turn")))
    chat = Chat(providers, "ResponsesChat", f"usage-{target}")
    chat.send("one", until_chunks=1)
    eventually_sync(lambda: chat.texts()[-1:] == [("assistant", "done and dusted")],
                    within=20, what="the first turn")  # fmt: skip
    chat.send("two", until_chunks=1)
    eventually_sync(lambda: chat.texts()[-1:] == [("assistant", "second turn")],
                    within=20, what="the second turn")  # fmt: skip
    stats = llm.stats
    assert chat.usage() == (stats.billed_input_tokens, stats.billed_output_tokens)
    first, second = (m["id"] for m in chat.messages() if m["role"] == "assistant")
    per_turn = {row["turn"]: (row["i"], row["o"], row["n"]) for row in chat.sql(
        "SELECT turn, sum(input_tokens) AS i, sum(output_tokens) AS o, count(*) AS n "
        "FROM cf_agents_usage GROUP BY turn")}  # fmt: skip
    gens = stats.generations
    assert per_turn[first] == (gens[0].input_tokens + gens[1].input_tokens,
                               gens[0].output_tokens + gens[1].output_tokens, 2)  # fmt: skip
    assert per_turn[second] == (gens[2].input_tokens, gens[2].output_tokens, 1)
    (cost,) = chat.sql("SELECT sum(cost) AS c FROM cf_agents_usage")
    billed = stats.billed_input_tokens * 1.0 + stats.billed_output_tokens * 2.0
    assert cost["c"] == pytest.approx(billed / 1_000_000)
