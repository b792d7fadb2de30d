"""Approval before a server tool runs, in the agent server under a real ``doemu dev``, with
SIGKILLs (issue 32, item 5).

``e2e/apps/agent_server``'s ``deploy`` needs a person's approval; it POSTs to a counter in the
test process, so the deploys are counted from outside the killed server.

1. Killed while the run is ``suspended_approval``: the suspension survives; ``/resume`` with
   ``options.approvals`` runs the deploy once and the run completes.
2. Killed right after the approval, once the deploy ran and the model is answering: the run is
   ``interrupted`` on restart; ``/resume`` completes it and the ledger replays the deploy's
   stored result instead of deploying again.
"""

from __future__ import annotations

from doemu.testing.devserver import DevServer
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from tests.polling import eventually_sync

from .agent_server_fixtures import Session
from .agent_server_fixtures import effects as effects  # the fixtures: server asks for both
from .agent_server_fixtures import llm as llm
from .agent_server_fixtures import server as server
from .counter import Counter


def deploys(effects: Counter) -> list[object]:
    return [e for e in effects.snapshot() if isinstance(e, dict) and e.get("tool") == "deploy"]


def test_killed_while_suspended_for_approval_resume_with_approvals_deploys_once(
    server: DevServer, llm: FakeLLM, effects: Counter
) -> None:
    llm.script(Reply(Text("deploying"), ToolUse("deploy", {"service": "api"}, id="d1")))
    llm.script(Reply(Text(" done")))
    s = Session(server, "approve-wait")
    s.start("deploy the api", "researcher")
    s.wait("suspended_approval")
    server.kill()
    server.start()
    assert s.wait("suspended_approval")["status"] == "suspended_approval"
    assert deploys(effects) == []
    snapshot = s.get("/snapshot")
    assert snapshot["pendingClientToolCalls"]["d1"]["toolName"] == "deploy"
    approvals = {"options": {"approvals": [{"toolCallId": "d1", "approved": True}]}}
    status, body = s.call("/resume", approvals)
    assert status == 200, body
    assert s.wait("completed")["output"] == "deploying done"
    assert len(deploys(effects)) == 1
    kinds = [c["type"] for c in s.chunks() if c["type"].startswith(("tool_", "run_"))]
    assert kinds == ["run_started", "tool_call_start", "tool_approval_request", "run_suspended",
                     "run_resumed", "tool_approval_response", "tool_result",
                     "run_completed"]  # fmt: skip
    assert "Traceback" not in server.output


def test_killed_right_after_the_approval_the_deploy_is_not_repeated(
    server: DevServer, llm: FakeLLM, effects: Counter
) -> None:
    llm.script(Reply(ToolUse("deploy", {"service": "db"}, id="d2")))
    llm.script(Reply(Text("deployed ", "the ", "db"), hold_after=1))
    s = Session(server, "approve-kill")
    s.start("deploy the db", "researcher")
    s.wait("suspended_approval")
    status, body = s.call("/chat/approve-kill/submit-tool-result",
                          {"toolCallId": "d2", "approved": True})  # fmt: skip
    assert status == 200 and body["accepted"] is True, body
    llm.wait_held(timeout=20)  # the deploy ran; the model's answer is cut mid-way
    eventually_sync(lambda: len(deploys(effects)) == 1, within=10, what="the deploy")
    server.kill()
    llm.release()
    server.start()
    s.wait("interrupted", within=40)  # the process running it stopped
    status, body = s.call("/resume", {"options": {"mode": "continue"}})
    assert status == 200, body
    final = s.wait("completed", within=40)
    assert final["output"].endswith("db")
    assert len(deploys(effects)) == 1  # the ledger replayed the deploy's stored result
    parts = s.get("/messages")["messages"][-1]["parts"]
    (part,) = [p for p in parts if p.get("toolCallId") == "d2"]
    assert part["state"] == "output-available" and part["output"] == {"deployed": "db"}
    assert "Traceback" not in server.output
