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
  partial entry;
* approval before a server tool runs (``refund``: ``needs_approval``): the
  ``tool-approval-request`` chunk, the ``cf_agent_tool_approval`` answer on the chat WebSocket
  after a SIGKILL while it waited, the tool run once; a denial the model reads;
* files to the model: an image and a PDF as each provider's input parts;
* ``on_chat_recovery`` → ``{"persist": False}`` after a kill keeps a settled tool result and
  drops only the unsettled text (behind the same SIGKILL as the waiting approval).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import pytest

from doemu.testing.fake_providers import CounterServer, FakeLLM, Reply, Text, ToolUse
from doemu.testing.fake_providers.script import Api
from tests.polling import eventually_sync
from tests.test_providers_files import PDF_URL, PNG_URL, SENT

from ..targets import AGENTS_VENDOR, ROOT, TargetServer
from .chatwire import ChatSocket, chunks
from .conftest import running

APP = ROOT / "e2e" / "apps" / "providers"
AMBIGUITY = "may have executed; verify before retrying"
#: What the model reads for a call a person denied.
DENIED = "The user denied this tool call."
#: Each chat class's provider (its key in ``SENT``) and the fake's name for its API.
FILE_APIS: dict[str, tuple[str, Api]] = {"ResponsesChat": ("responses", "responses"),
             "AnthropicChat": ("anthropic", "messages"),
             "CompletionsChat": ("chat", "chat")}  # fmt: skip


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

    def socket(self) -> ChatSocket:
        return ChatSocket(f"{running(self.server).ws_url}{self.path}")

    def send(
        self, text: str, until_chunks: int = 1, *, files: Sequence[dict[str, Any]] = ()
    ) -> list[dict[str, Any]]:
        """Send a user message (its text, then ``files``' parts); return the frames received
        once ``until_chunks`` reply chunks arrived (``0``: once the reply is done)."""
        body = {"messages": [{"id": f"u-{uuid.uuid4().hex[:8]}", "role": "user",
                              "parts": [{"type": "text", "text": text}, *files]}],
                "trigger": "submit-message"}  # fmt: skip
        request_id = uuid.uuid4().hex[:12]
        frame = {"id": request_id, "type": "cf_agent_use_chat_request",
                 "init": {"method": "POST", "body": json.dumps(body)}}  # fmt: skip
        with self.socket() as ws:
            ws.send(json.dumps(frame))
            if until_chunks:
                ws.until(lambda frames: len(chunks(frames, request_id)) >= until_chunks)
            else:
                ws.until_done(request_id)
        return [f for f in ws.frames if f.get("id") == request_id]

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


def approve(chat: Chat, call_id: str, approved: bool) -> dict[str, Any]:
    """Answer ``call_id``'s approval request as ``useAgentChat`` does (``autoContinue``); the
    tool part of the message update it causes."""
    frame = {"type": "cf_agent_tool_approval", "toolCallId": call_id, "approved": approved,
             "autoContinue": True}  # fmt: skip
    with chat.socket() as ws:
        ws.send(json.dumps(frame))
        ws.until(lambda frames: any(f["type"] == "cf_agent_message_updated" for f in frames))
    (updated,) = [f for f in ws.frames if f["type"] == "cf_agent_message_updated"]
    part: dict[str, Any] = next(
        p for p in updated["message"]["parts"] if p.get("toolCallId") == call_id
    )
    return part


def asked_for_approval(frames: list[dict[str, Any]], call_id: str) -> None:
    """The reply asked for ``call_id``'s approval and ended, waiting for it."""
    said = [chunk for frame in frames if frame.get("body") for chunk in [json.loads(frame["body"])]]
    assert {"type": "tool-approval-request", "approvalId": call_id, "toolCallId": call_id} in said
    assert said[-1] == {"type": "finish", "messageMetadata": {"finishReason": "tool-calls"}}
    assert frames[-1]["done"] is True


def test_a_denied_server_tool_never_runs_and_the_model_is_told(
    providers: TargetServer, llm: FakeLLM, keyed: CounterServer, target: str
) -> None:
    """The model calls ``refund``; the person denies it: the part is ``output-denied``, the
    refund never runs, the model reads the denial as the tool's result and answers."""
    llm.script(Reply(ToolUse("refund", {"amount": 9}, id="rf2")))
    llm.script(Reply(Text("not refunded")))
    chat = Chat(providers, "CompletionsChat", f"deny-{target}")
    asked_for_approval(chat.send("refund me", until_chunks=0), "rf2")
    assert approve(chat, "rf2", False)["approval"] == {"id": "rf2", "approved": False}
    eventually_sync(lambda: chat.texts()[-1] == ("assistant", "not refunded"),
                    within=30, what="the model's answer to the denial")  # fmt: skip
    part = chat.tool_part("refund")
    assert (part["state"], part["approval"]) == ("output-denied", {"id": "rf2", "approved": False})
    assert keyed.calls == 0
    told = llm.requests("chat")[-1]["messages"][-1]
    assert told == {"role": "tool", "tool_call_id": "rf2", "content": DENIED}


@pytest.mark.parametrize("binding", ["ResponsesChat", "AnthropicChat", "CompletionsChat"])
def test_an_image_and_a_pdf_reach_the_model_in_its_format(
    providers: TargetServer, llm: FakeLLM, binding: str, target: str
) -> None:
    """A user message with a PNG and a PDF (``file`` parts, data URLs): the provider's request
    carries both in its input format — the same parts ``tests/test_providers_files.py`` checks
    in process, which the fake validates against the official SDK's request types."""
    kind, api = FILE_APIS[binding]
    llm.script(Reply(Text("a chart and a report")))
    chat = Chat(providers, binding, f"files-{kind}-{target}")
    files = [{"type": "file", "mediaType": "image/png", "url": PNG_URL},
             {"type": "file", "mediaType": "application/pdf", "url": PDF_URL,
              "filename": "report.pdf"}]  # fmt: skip
    frames = chat.send("what is in these?", until_chunks=0, files=files)
    assert not any(f.get("error") for f in frames), frames
    (sent,) = llm.requests(api)
    conversation = sent["input"] if kind == "responses" else sent["messages"]
    assert conversation[-1] == SENT[kind]
    assert chat.texts() == [("user", "what is in these?"), ("assistant", "a chart and a report")]
    assert [p["type"] for p in chat.messages()[0]["parts"]] == ["text", "file", "file"]


def refund_waits(chat: Chat) -> bool:
    part = chat.tool_part("refund")
    return (part["state"], part["approval"]) == ("approval-requested", {"id": "rf1"})


def test_after_a_kill_an_approval_still_waits_and_settled_work_is_kept(
    providers: TargetServer, llm: FakeLLM, keyed: CounterServer, plain: CounterServer, target: str
) -> None:
    """Two durable states behind one SIGKILL (a workerd restart costs about 10 s):

    1. Approval: the model calls ``refund`` (``needs_approval``); the reply streams
       ``tool-approval-request`` and ends (``finishReason: tool-calls``); the stored part is
       ``approval-requested``; nothing ran.
    2. ``persist: False`` (``ForgettingChat``): ``notify`` (not idempotent) runs and settles,
       then the model's text streams and is held after 25 words, 20 of them stored.
    3. SIGKILL; on disk, the refund still waits; restart, no request.
    4. The keep-alive alarm recovers the cut turn: its text is dropped, the settled call and
       result kept, and the model is asked again from there — the tool result is the last
       thing it reads, no word of the dropped text — instead of answering the user from
       scratch; ``notify`` ran once.
    5. ``cf_agent_tool_approval`` (approved, ``autoContinue``) from a new connection: the part
       becomes ``approval-responded``; the continuation runs the refund once (counted by the
       counter server) and the model, told its result, finishes the same message."""
    llm.script(Reply(Text("refunding"), ToolUse("refund", {"amount": 7}, id="rf1")))
    approval = Chat(providers, "AnthropicChat", f"approve-{target}")
    asked_for_approval(approval.send("refund me", until_chunks=0), "rf1")
    assert refund_waits(approval) and keyed.calls == 0

    llm.script(Reply(ToolUse("notify", {"amount": 3}, id="nt1")))
    llm.script(Reply(Text(*words(0, 40)), hold_after=25))
    forgetting = Chat(providers, "ForgettingChat", f"forget-{target}")
    forgetting.send("notify then explain", until_chunks=20)
    llm.wait_held(timeout=10)
    eventually_sync(lambda: len(forgetting.persisted_text().split()) >= 10, within=10,
                    what="a persisted partial after the tool")  # fmt: skip
    assert (plain.count, plain.calls) == (1, 1)

    providers.kill()
    assert refund_waits(approval)  # read from the file while the server is down
    llm.script(Reply(Text("Notified.")))
    llm.release()
    providers.restart()
    eventually_sync(lambda: forgetting.texts() == [("user", "notify then explain"),
                                                   ("assistant", "Notified.")],
                    within=30, what="the recovered turn, its partial dropped")  # fmt: skip
    notified = forgetting.tool_part("notify")
    assert notified["state"] == "output-available" and notified["output"]["count"] == 1
    assert (plain.count, plain.calls) == (1, 1)  # never run again
    requests = llm.requests("chat")
    assert len(requests) == 3  # the call, the cut text, the one after the recovery
    told = requests[2]["messages"]
    result = {"role": "tool", "tool_call_id": "nt1", "content": json.dumps(notified["output"])}
    assert told[-1] == result
    assert not any("w0" in str(m.get("content")) for m in told)

    llm.script(Reply(Text(", refunded")))
    answered = approve(approval, "rf1", True)
    assert (answered["state"], answered["approval"]) == (
        "approval-responded",
        {"id": "rf1", "approved": True},
    )
    eventually_sync(lambda: approval.texts()[-1] == ("assistant", "refunding, refunded"),
                    within=30, what="the refund and the model's answer")  # fmt: skip
    refunded = approval.tool_part("refund")
    assert refunded["state"] == "output-available" and refunded["output"]["count"] == 1
    assert (keyed.count, keyed.calls) == (1, 1)
    requests = llm.requests("messages")
    assert len(requests) == 2  # the call, then the answer after the refund: nothing in between
    content = json.dumps(refunded["output"])
    result = {"type": "tool_result", "tool_use_id": "rf1", "content": content}
    assert requests[1]["messages"][-1] == {"role": "user", "content": [result]}
    assert [m["role"] for m in approval.messages()] == ["user", "assistant"]
