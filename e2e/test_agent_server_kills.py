"""Issue 26 under a real ``doemu dev`` with real SIGKILLs (``e2e/apps/agent_server``):

1. SIGKILL in the middle of a companion call: the writer's blocking ``companion__spawnAgent``
   is reading its critic, which has run a tool (a custom metric) and is mid-answer. After the
   restart the writer is interrupted; ``/resume`` calls the companion tool again, which
   re-attaches to the critic's run (resumed by its run key; its stored response retrieved, not
   regenerated) instead of starting another. The critic ran each step once, its metric counts
   once, and the roll-up's tokens equal what the provider billed.
2. SIGKILL in the middle of a step-partial suspension: a step called a server tool (a side
   effect counted outside the process) and a client tool; the server one ran, the run suspended
   ``suspended_step_partial``. Killed there and restarted, it is still suspended; the client's
   result completes the step, and the server tool never runs again.
3. ``auto_resume``: a run killed mid-answer is continued after the restart with no request at
   all (its own alarm wakes it).
"""

from __future__ import annotations

from doemu.testing.devserver import DevServer
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from tests.polling import eventually_sync

from .agent_server_fixtures import Session, words
from .agent_server_fixtures import effects as effects  # the fixtures: server asks for both
from .agent_server_fixtures import llm as llm
from .agent_server_fixtures import server as server
from .counter import Counter


def test_a_sigkill_in_the_middle_of_a_companion_call(server: DevServer, llm: FakeLLM) -> None:
    spawn = {"agentType": "critic", "name": "c", "message": "review my draft"}
    llm.script(Reply(ToolUse("companion__spawnAgent", spawn, id="sp1")))  # the writer
    llm.script(Reply(ToolUse("word_count", {"text": "one two three"}, id="wc1")))  # the critic
    llm.script(Reply(Text(*words(0, 30)), hold_after=8))  # the critic's answer, cut
    llm.script(Reply(Text("revised ", "draft")))  # the writer, once its critic answered
    writer = Session(server, "kwriter")
    critic = Session(server, "kwriter-child-c")
    writer.start("write", "writer")
    llm.wait_held(timeout=10)
    eventually_sync(lambda: len(critic.deltas().split()) >= 5, within=10, what="critic words")
    server.kill()
    llm.release()  # the stored response completes while the server is down
    server.start()
    writer.wait("interrupted")
    status, body = writer.call("/resume", {"options": {"mode": "continue"}})
    assert status == 200, body
    assert writer.wait("completed")["output"] == "revised draft"
    assert critic.wait("completed")["output"] == "".join(words(0, 30))
    assert critic.deltas() == "".join(words(0, 30))  # each word once in the critic's stream
    stats = llm.stats
    assert stats.requests["responses.create"] == 4  # nothing generated twice: the cut answer
    rolled = writer.get("/usage?mode=rollup")  # was retrieved, not asked again
    assert rolled["tokensIncludingSubAgents"]["prompt"] == stats.billed_input_tokens
    assert rolled["tokensIncludingSubAgents"]["completion"] == stats.billed_output_tokens
    assert rolled["customIncludingSubAgents"] == {"words": {"counted": 3}}  # recorded once
    assert rolled["subAgentStats"]["byType"]["critic"]["successfulCalls"] == 1
    parts = writer.get("/messages")["messages"][-1]["parts"]
    spawned = next(p for p in parts if p.get("toolCallId") == "sp1")
    assert spawned["output"]["output"] == "".join(words(0, 30))
    assert "Traceback" not in server.output


def test_a_sigkill_in_the_middle_of_a_step_partial_suspension(
    server: DevServer, llm: FakeLLM, effects: Counter
) -> None:
    batch = Reply(ToolUse("notify", {"who": "ops"}, id="n1"),
                  ToolUse("approve", {"action": "ship"}, id="a1"))  # fmt: skip
    llm.script(batch)
    llm.script(Reply(Text("shipped ", "and ", "notified")))
    s = Session(server, "kpartial")
    s.start("ship it", "researcher")
    s.wait("suspended_step_partial")
    assert [e["tool"] for e in effects.snapshot()] == ["notify"]
    server.kill()
    server.start()
    assert s.get("/status")["status"] == "suspended_step_partial"  # the pause is durable
    snapshot = s.get("/snapshot")
    assert list(snapshot["pendingClientToolCalls"]) == ["a1"]
    status, body = s.call("/chat/kpartial/submit-tool-result",
                          {"toolCallId": "a1", "result": {"approved": True}})  # fmt: skip
    assert status == 200 and body["accepted"] is True, body
    assert s.wait("completed")["output"] == "shipped and notified"
    assert [e["tool"] for e in effects.snapshot()] == ["notify"]  # never run again
    usage = s.get("/usage")
    assert usage["toolStats"]["byTool"]["notify"]["calls"] == 1
    assert usage["custom"] == {"notifications": {"sent": 1}}
    assert usage["tokens"]["completion"] == llm.stats.billed_output_tokens
    kinds = [c["type"] for c in s.chunks()]
    assert kinds.count("run_suspended") == 1
    assert "Traceback" not in server.output


def test_auto_resume_continues_a_killed_run_with_no_request(
    server: DevServer, llm: FakeLLM
) -> None:
    llm.script(Reply(Text(*words(0, 30)), hold_after=10))
    s = Session(server, "kauto", prefix="auto")
    s.start("count", "researcher")
    llm.wait_held(timeout=10)
    eventually_sync(lambda: len(s.deltas().split()) >= 5, within=10, what="stored words")
    server.kill()
    llm.release()
    retrieves = llm.stats.requests.get("responses.retrieve", 0)
    server.start()
    # No request to the session: only its own alarm can wake it and resume the answer.
    llm.wait_for(lambda st: st.requests.get("responses.retrieve", 0) > retrieves, timeout=20)
    done = s.wait("completed")
    assert done["output"] == "".join(words(0, 30))
    assert s.deltas() == "".join(words(0, 30))
    assert llm.stats.requests["responses.create"] == 1
    assert "Traceback" not in server.output
