"""The agent server under a real ``doemu dev``, with real SIGKILLs (``e2e/apps/agent_server``).

The provider is the fake OpenAI Responses server (``FakeLLM``, in this process, so it outlives
the killed server); state is read over the server's own HTTP endpoints after each restart.

* a run streams over SSE before it ends, with heartbeats;
* SIGKILL mid-run → ``/status`` says interrupted → ``/resume {"mode": "continue"}`` finishes it;
  ``/history`` has no gap; ``/messages``, ``/snapshot`` and ``/usage`` agree with each other
  and with the provider's billed tokens;
* a run whose sub-agent is killed mid-run → both recover, the roll-up counts both;
* a client-tool approval answered after the object was evicted continues the run;
* a durable interrupt is observed within its deadline; bad input is a clear 4xx.
"""

from __future__ import annotations

import json

import httpx

from doemu.testing.devserver import DevServer
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from tests.polling import eventually_sync

from .agent_server_fixtures import Session, words
from .agent_server_fixtures import effects as effects  # the fixtures: server asks for both
from .agent_server_fixtures import llm as llm
from .agent_server_fixtures import server as server


def _clean(server: DevServer) -> None:
    assert "Traceback" not in server.output


def test_a_run_streams_over_sse_before_it_ends_with_heartbeats(
    server: DevServer, llm: FakeLLM
) -> None:
    llm.script(Reply(Text(*words(0, 20)), hold_after=5))
    s = Session(server, "live")
    s.start("tell me")
    seen: list[str] = []
    with httpx.stream("GET", s.url("/sse?fromSequence=0"), timeout=20) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.iter_lines()
        while not (sum('"text_delta"' in line for line in seen) >= 5
                   and any(line.startswith(":") for line in seen)):  # fmt: skip
            seen.append(next(lines))
        assert s.get("/status")["isExecuting"]  # chunks and a heartbeat while the run goes on
        llm.release()
        for line in lines:
            seen.append(line)
            if line.startswith("data:") and json.loads(line[5:])["type"] == "end":
                break
    events = [json.loads(line[5:]) for line in seen if line.startswith("data:")]
    deltas = "".join(e["chunk"].get("delta", "") for e in events if e["type"] == "chunk")
    assert deltas == "".join(words(0, 20)) and events[-1]["finalOutput"] == deltas
    _clean(server)


def test_a_killed_run_is_interrupted_then_resumed_and_every_view_agrees(
    server: DevServer, llm: FakeLLM
) -> None:
    llm.script(Reply(Text(*words(0, 40)), hold_after=15))
    s = Session(server, "kill")
    s.start("tell me")
    llm.wait_held(timeout=10)
    eventually_sync(lambda: len(s.history()) >= 10, within=10, what="stored chunks")
    server.kill()
    llm.release()  # the background response finishes while the server is down
    server.start()
    interrupted = s.wait("interrupted")
    assert interrupted["output"] is None
    status, body = s.call("/resume", {"agentType": "researcher", "options": {"mode": "continue"}})
    assert status == 200 and body["status"] == "resumed", body
    done = s.wait("completed")
    whole = "".join(words(0, 40))
    assert done["output"] == whole
    chunks = s.history()
    assert [c["sequence"] for c in chunks] == list(range(len(chunks)))  # no gap across the kill
    deltas = "".join(c["chunk"].get("delta", "") for c in chunks)
    assert deltas == whole  # nothing lost, nothing twice
    kinds = [c["chunk"]["type"] for c in chunks]
    assert kinds.count("run_interrupted") == 1 and kinds.count("run_resumed") == 1
    messages = s.get("/messages")
    snapshot = s.get("/snapshot")
    assert snapshot["messages"] == messages["messages"] and messages["total"] == 2
    assert snapshot["streamSequence"] == chunks[-1]["sequence"] and snapshot["status"] == "ended"
    reply = messages["messages"][1]
    assert "".join(p.get("text", "") for p in reply["parts"] if p["type"] == "text") == whole
    usage = s.get("/usage")
    stats = llm.stats
    assert stats.requests["responses.create"] == 1  # retrieved, not regenerated
    assert usage["tokens"]["prompt"] == stats.billed_input_tokens
    assert usage["tokens"]["completion"] == stats.billed_output_tokens
    _clean(server)


def test_a_sub_agent_killed_mid_run_recovers_with_its_parent(
    server: DevServer, llm: FakeLLM
) -> None:
    llm.script(Reply(ToolUse("analyzer", {"message": "analyze this"}, id="sub1")))
    llm.script(Reply(Text(*words(0, 30)), hold_after=10))  # the child's reply
    llm.script(Reply(Text("the analysis is in")))  # the parent's next step
    parent = Session(server, "parent")
    child = Session(server, "parent-remote-sub1")
    parent.start("analyze")
    llm.wait_held(timeout=10)
    eventually_sync(lambda: len(child.history()) >= 5, within=10, what="the child's chunks")
    server.kill()
    llm.release()
    server.start()
    parent.wait("interrupted")
    status, body = parent.call("/resume", {"agentType": "researcher",
                                           "options": {"mode": "continue"}})  # fmt: skip
    assert status == 200, body
    done = parent.wait("completed")
    assert done["output"] == "the analysis is in"
    assert child.wait("completed")["output"] == "".join(words(0, 30))
    chunks = parent.history()
    kinds = [c["chunk"]["type"] for c in chunks]
    start, end = kinds.index("subagent_start"), len(kinds) - 1 - kinds[::-1].index("subagent_end")
    copied = "".join(c["chunk"].get("delta", "") for c in chunks[start:end]
                     if c["chunk"].get("agentId") == child.id)  # fmt: skip
    assert copied == "".join(words(0, 30))  # the child's text once in the parent's stream
    rolled = parent.get("/usage?mode=rollup")
    stats = llm.stats
    assert rolled["tokensIncludingSubAgents"]["prompt"] == stats.billed_input_tokens
    assert rolled["tokensIncludingSubAgents"]["completion"] == stats.billed_output_tokens
    assert rolled["subAgentStats"]["byType"]["analyzer"]["successfulCalls"] == 1
    _clean(server)


def test_an_approval_after_eviction_continues_the_run(server: DevServer, llm: FakeLLM) -> None:
    llm.script(Reply(ToolUse("approve", {"action": "deploy"}, id="ask1")))
    llm.script(Reply(Text("deploying now")))
    s = Session(server, "hitl")
    s.start("deploy?")
    s.wait("suspended_client_tool")
    assert s.get("/snapshot")["pendingClientToolCalls"]["ask1"]["toolName"] == "approve"
    evicted = httpx.post(f"{server.url}/__doemu/api/objects/AGENTS/session:hitl/evict", timeout=10)
    assert evicted.status_code in (200, 202, 204), evicted.text
    status, body = s.call("/chat/hitl/submit-tool-result",
                          {"toolCallId": "ask1", "result": {"approved": True}})  # fmt: skip
    assert status == 200 and body["accepted"] is True, body
    assert s.wait("completed")["output"] == "deploying now"
    _clean(server)


def test_a_durable_interrupt_is_observed_within_its_deadline(
    server: DevServer, llm: FakeLLM
) -> None:
    llm.script(Reply(Text(*words(0, 200)), delay_ms=20))
    s = Session(server, "stop")
    s.start("long")
    eventually_sync(lambda: len(s.history()) >= 3, within=10, what="the run streaming")
    status, body = s.call("/chat/stop/interrupt", {"reason": "user"})
    assert status == 202 and body["observed"] is True, body
    assert s.wait("interrupted")["status"] == "interrupted"
    _clean(server)


def test_bad_input_is_a_clear_4xx(server: DevServer, llm: FakeLLM) -> None:
    s = Session(server, "bad")
    status, body = s.call("/start", {"agentType": "nobody", "sessionId": "bad",
                                     "input": {"message": "x"}})  # fmt: skip
    assert status == 404
    assert body["availableTypes"] == ["analyzer", "critic", "researcher", "writer"]
    status, body = s.call("/start", "{not json")
    assert status == 400 and "JSON" in body["error"]
    status, body = s.call("/history?fromSequence=99")
    assert status == 416 and body["code"] == "BAD_FROM_SEQUENCE"
    status, body = s.call("/chat/bad/submit-tool-result", {"toolCallId": "x", "result": 1})
    assert status == 404
    assert s.get("/status")["status"] == "idle"
    _clean(server)
