"""The provider adapters against the fake provider servers, with real SIGKILLs.

Each test runs ``e2e/apps/providers`` under a real ``doemu dev`` whose ``.dev.vars`` point the
adapters at :class:`~doemu.testing.fake_providers.FakeLLM` (OpenAI Responses, Anthropic
Messages, chat completions) and at two side-effect counters, all living in the test process so
they outlive the killed server. Outcomes are read from the object's SQLite file directly
(``doemu_dev``'s ``sql``/``kv``), which never wakes the object: only the persisted keep-alive
alarm brings the interrupted turn back.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets

from doemu.testing.devserver import DevServer, DevServerFactory
from doemu.testing.fake_providers import CounterServer, FakeLLM, Reply, Text, ToolUse
from tests.polling import eventually_sync

APP = Path(__file__).resolve().parent / "apps" / "providers"
ROOT = Path(__file__).resolve().parent.parent
AMBIGUITY = "may have executed; verify before retrying"


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(api_key="test-key") as server:
        yield server


@pytest.fixture
def counters() -> Iterator[tuple[CounterServer, CounterServer]]:
    with (
        CounterServer(honour_idempotency=True) as keyed,
        CounterServer(honour_idempotency=False) as plain,
    ):
        yield keyed, plain


@pytest.fixture
def server(
    tmp_path: Path,
    doemu_dev: DevServerFactory,
    llm: FakeLLM,
    counters: tuple[CounterServer, CounterServer],
) -> DevServer:
    project = tmp_path / "app"
    shutil.copytree(APP, project, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    keyed, plain = counters
    (project / ".dev.vars").write_text(
        f"OPENAI_API_KEY=test-key\nOPENAI_BASE_URL={llm.url}/v1\n"
        f"ANTHROPIC_API_KEY=test-key\nANTHROPIC_BASE_URL={llm.url}\n"
        f"COUNTER_URL={keyed.url}\nCOUNTER_PLAIN_URL={plain.url}\n"
    )
    return doemu_dev(project, env={"PYTHONPATH": str(ROOT)})


def words(start: int, stop: int) -> list[str]:
    return [f"w{i} " for i in range(start, stop)]


def prefilled(start: int, stop: int) -> list[str]:
    """What a model continuing a prefill ``… w<start-1>`` streams: each word after a space."""
    out = [f" w{i}" for i in range(start, stop)]
    return [out[0].lstrip(), *out[1:]] if start == 0 and out else out


class Chat:
    def __init__(self, server: DevServer, binding: str, name: str) -> None:
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

        async def go() -> None:
            async with websockets.connect(f"{self.server.ws_url}{self.path}") as ws:
                await ws.send(json.dumps(frame))
                seen = 0
                async with asyncio.timeout(20):
                    while seen < until_chunks:
                        data = json.loads(await ws.recv())
                        if data.get("type") == "cf_agent_use_chat_response" and data["body"]:
                            seen += 1

        asyncio.run(go())

    def sql(self, query: str) -> list[dict[str, Any]]:
        return self.server.sql(self.binding, self.name, query)

    def messages(self) -> list[dict[str, Any]]:
        rows = self.sql("SELECT message FROM cf_ai_chat_agent_messages ORDER BY seq")
        return [json.loads(row["message"]) for row in rows]

    def texts(self) -> list[tuple[str, str]]:
        return [(m["role"], "".join(p.get("text", "") for p in m["parts"] if p["type"] == "text"))
                for m in self.messages()]  # fmt: skip

    def checkpoint(self) -> dict[str, Any]:
        value = self.server.kv(self.binding, self.name).get("cf_agents_model_turn")
        return value if isinstance(value, dict) else {}

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
        with urllib.request.urlopen(f"{self.server.url}{self.path}/usage", timeout=20) as answer:
            totals: dict[str, Any] = json.loads(answer.read())
        return totals


def _clean(server: DevServer) -> None:
    assert "Traceback" not in server.output


def stored_events(llm: FakeLLM, response_id: str) -> list[dict[str, Any]]:
    """Every event of a stored response, read as a client would (retrieving never bills)."""
    url = f"{llm.url}/v1/responses/{response_id}?stream=true"
    request = urllib.request.Request(url, headers={"authorization": "Bearer test-key"})
    with urllib.request.urlopen(request, timeout=20) as answer:
        lines = answer.read().decode().splitlines()
    return [json.loads(line[6:]) for line in lines if line.startswith("data: ")]


def test_openai_responses_killed_after_create_is_retrieved_not_regenerated(
    server: DevServer, llm: FakeLLM
) -> None:
    """1. A background response streams 30 of 60 words, then waits.
    2. SIGKILL once a partial reached storage; the response finishes while the agent is dead.
    3. On restart the agent re-attaches with ``starting_after`` = the text cursor it stored for
       the persisted text (every 10 deltas: the newest the persisted text covers), reads only
       what follows, and drops the few words re-read that storage already had.
    4. One create, one bill, one usage entry (opened partial, completed by the retrieve)."""
    llm.script(Reply(Text(*words(0, 60)), hold_after=30))
    chat = Chat(server, "ResponsesChat", "retrieve")
    chat.send("tell me", until_chunks=20)
    llm.wait_held(timeout=10)
    eventually_sync(lambda: chat.checkpoint().get("handle"), within=10, what="the response id")
    eventually_sync(lambda: len(chat.persisted_text().split()) >= 10, within=10,
                    what="a persisted partial of 10 words or more")  # fmt: skip
    eventually_sync(lambda: chat.usage_rows() == [(0, 30, True)], within=10,
                    what="the running request's output, counted as it streamed")  # fmt: skip
    server.kill()
    persisted = len(chat.persisted_text().split())
    response_id = chat.checkpoint()["handle"]["responseId"]
    llm.release()  # the background generation finishes while the agent is dead
    server.start()
    whole = "".join(words(0, 60))
    eventually_sync(lambda: chat.texts() == [("user", "tell me"), ("assistant", whole)],
                    within=30, what="the whole reply, retrieved")  # fmt: skip
    stats = llm.stats
    assert stats.requests["responses.create"] == 1
    assert len(stats.generations) == 1
    (retrieval,) = stats.retrievals
    deltas = [e["sequence_number"] for e in stored_events(llm, response_id)
              if e["type"] == "response.output_text.delta"]  # fmt: skip
    cursor = deltas[10 * (persisted // 10) - 1]  # the newest cursor the persisted text covers
    assert retrieval.starting_after == cursor
    assert retrieval.sent[0] == cursor + 1  # nothing before the cursor was read again
    assert list(retrieval.sent) == list(range(cursor + 1, cursor + 1 + len(retrieval.sent)))
    reread = [seq for seq in retrieval.sent if seq in deltas[:persisted]]
    assert len(reread) == persisted % 10  # persisted words past the cursor, read and dropped
    assert chat.usage() == (stats.billed_input_tokens, stats.billed_output_tokens)
    assert [partial for _, _, partial in chat.usage_rows()] == [False]
    _clean(server)


def test_anthropic_continues_the_partial_as_a_prefill_once(server: DevServer, llm: FakeLLM) -> None:
    """The continuation is one request, and the cut one still counts: its input tokens as
    ``message_start`` reported them, its output as counted while it streamed (20 of the 25
    deltas, written every 10), in a partial entry — ``usage()`` says the totals are a lower
    bound."""
    llm.script(Reply(Text(*words(0, 40)), hold_after=25))
    chat = Chat(server, "AnthropicChat", "prefill")
    chat.send("tell me", until_chunks=20)
    llm.wait_held(timeout=10)
    eventually_sync(lambda: chat.persisted_text(), within=10, what="a persisted partial")
    eventually_sync(lambda: [r[1:] for r in chat.usage_rows()] == [(20, True)], within=10,
                    what="the cut request's output, counted as it streamed")  # fmt: skip
    server.kill()
    partial = chat.persisted_text()
    done = len(partial.split())
    # A model continuing "… wK" starts with a space: the adapter joins it without a seam.
    llm.script(Reply(Text(*prefilled(done, 40))))
    llm.release()
    server.start()
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
    assert totals["output_tokens"] <= llm.stats.billed_output_tokens
    assert (totals["partial_calls"], totals["tokens_lower_bound"]) == (1, True)
    _clean(server)


def test_chat_completions_retries_once_with_the_partial_as_the_last_message(
    server: DevServer, llm: FakeLLM
) -> None:
    llm.script(Reply(Text(*words(0, 40)), hold_after=25))
    chat = Chat(server, "CompletionsChat", "retry")
    chat.send("tell me", until_chunks=20)
    llm.wait_held(timeout=10)
    eventually_sync(lambda: chat.persisted_text(), within=10, what="a persisted partial")
    eventually_sync(lambda: chat.usage_rows() == [(0, 20, True)], within=10,
                    what="the cut request's output (its input comes only at the end)")  # fmt: skip
    server.kill()
    partial = chat.persisted_text()
    llm.script(Reply(Text(*words(len(partial.split()), 40))))
    llm.release()
    server.start()
    whole = "".join(words(0, 40))
    eventually_sync(lambda: chat.texts() == [("user", "tell me"), ("assistant", whole)],
                    within=30, what="one reply")  # fmt: skip
    requests = llm.requests("chat")
    assert len(requests) == 2
    retry = requests[1]["messages"]  # the AI SDK's continuation prompt: [.., user, partial]
    assert retry[-2:] == [{"role": "user", "content": "tell me"},
                          {"role": "assistant", "content": partial}]  # fmt: skip
    retried = llm.stats.generations[1]
    assert chat.usage_rows() == [(0, 20, True),
                                 (retried.input_tokens, retried.output_tokens, False)]  # fmt: skip
    _clean(server)


@pytest.mark.parametrize("binding", ["ResponsesChat", "CompletionsChat"])
def test_an_idempotent_side_effect_killed_mid_call_happens_once(
    server: DevServer, llm: FakeLLM, counters: tuple[CounterServer, CounterServer], binding: str
) -> None:
    keyed, _ = counters
    llm.script(Reply(ToolUse("charge", {"amount": 5}, id="call_1")))
    llm.script(Reply(Text("charged ", "once")))
    keyed.hold_next()
    chat = Chat(server, binding, "pay")
    chat.send("pay", until_chunks=1)
    keyed.wait_held(timeout=10)
    server.kill()
    keyed.release()
    server.start()
    eventually_sync(lambda: chat.texts()[-1:] == [("assistant", "charged once")],
                    within=30, what="the turn, finished after the restart")  # fmt: skip
    assert (keyed.count, keyed.calls) == (1, 2)  # the second call was collapsed by its key
    (tool,) = [p for p in chat.messages()[-1]["parts"] if p["type"] == "tool-charge"]
    assert tool["state"] == "output-available" and tool["output"]["count"] == 1
    _clean(server)


def test_an_unkeyed_side_effect_killed_mid_call_is_reported_not_rerun(
    server: DevServer, llm: FakeLLM, counters: tuple[CounterServer, CounterServer]
) -> None:
    _, plain = counters
    llm.script(Reply(ToolUse("notify", {"amount": 5}, id="call_1")))
    llm.script(Reply(Text("I will check first.")))
    plain.hold_next()
    chat = Chat(server, "CompletionsChat", "notify")
    chat.send("notify", until_chunks=1)
    plain.wait_held(timeout=10)
    server.kill()
    plain.release()
    server.start()
    eventually_sync(lambda: chat.texts()[-1:] == [("assistant", "I will check first.")],
                    within=30, what="the turn, finished after the restart")  # fmt: skip
    assert (plain.count, plain.calls) == (1, 1)  # never run again
    (tool,) = [p for p in chat.messages()[-1]["parts"] if p["type"] == "tool-notify"]
    assert tool["state"] == "output-error" and AMBIGUITY in tool["errorText"]
    told = llm.requests("chat")[-1]["messages"]
    assert any(m["role"] == "tool" and AMBIGUITY in m["content"] for m in told)
    _clean(server)


def test_a_completed_side_effect_is_never_rerun(
    server: DevServer, llm: FakeLLM, counters: tuple[CounterServer, CounterServer]
) -> None:
    _, plain = counters
    llm.script(Reply(ToolUse("notify", {"amount": 1}, id="call_1")))
    llm.script(Reply(Text(*words(0, 30)), hold_after=3))
    chat = Chat(server, "AnthropicChat", "done")
    chat.send("notify", until_chunks=1)
    llm.wait_held(timeout=10)
    assert plain.count == 1
    server.kill()
    done = len(chat.persisted_text().split())
    llm.script(Reply(Text(*prefilled(done, 30))))
    llm.release()
    server.start()
    whole = "".join(words(0, 30)).rstrip()
    eventually_sync(lambda: chat.texts()[-1:] == [("assistant", whole)],
                    within=30, what="the turn, finished after the restart")  # fmt: skip
    assert (plain.count, plain.calls) == (1, 1)
    (tool,) = [p for p in chat.messages()[-1]["parts"] if p["type"] == "tool-notify"]
    assert tool["state"] == "output-available" and tool["output"]["count"] == 1
    _clean(server)


def test_usage_per_turn_and_agent_matches_the_billed_tokens(
    server: DevServer, llm: FakeLLM
) -> None:
    llm.script(Reply(ToolUse("charge", {"amount": 2}, id="call_1")))
    llm.script(Reply(Text("done ", "and ", "dusted")))
    llm.script(Reply(Text("second ", "turn")))
    chat = Chat(server, "ResponsesChat", "usage")
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
    _clean(server)
