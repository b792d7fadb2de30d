"""Approval before a server tool runs, in the agent server (issue 32, item 5), in process.

A definition's ``Tool(..., needs_approval=True)`` (or a function of the arguments) suspends the
run at the call: status ``suspended_approval``, the seed's ``tool_approval_request`` chunk and
``run_suspended {reason: "approval"}``. ``/resume`` with ``options.approvals`` or
``submit-tool-result {toolCallId, approved, reason?}`` answers; an approved call runs once
(ledger) as the run goes on, a denied one never runs and the model reads why. The SIGKILL paths
are in ``e2e/test_agent_server_approval.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agents.providers import OpenAIChatCompletions, Tool
from agents.server import AgentRegistry, create_agent_server, define_agent
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from doemu.testing.plugin import HarnessFactory

from .agent_server_steps import Session

RUNS: list[tuple[str, Any]] = []


async def deploy(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    RUNS.append(("deploy", args))
    return {"deployed": args.get("service")}


async def pay(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    RUNS.append(("pay", args))
    return {"paid": args.get("amount")}


def registry() -> AgentRegistry:
    agents = AgentRegistry()
    tools = [
        Tool("deploy", "Deploy.", {"type": "object"}, execute=deploy, needs_approval=True),
        Tool("pay", "Pay.", {"type": "object"}, execute=pay,
             needs_approval=lambda args: args.get("amount", 0) > 100),
    ]  # fmt: skip
    agents.register(define_agent("ops", tools=tools))
    return agents


Server = create_agent_server(
    agents=registry(),
    llm_adapter=lambda env, ctx: OpenAIChatCompletions.from_env(env, model="m"),
    name="ApprovalServer",
)


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    RUNS.clear()
    with FakeLLM(api_key="k") as server:
        yield server


async def session(doemu_harness: HarnessFactory, llm: FakeLLM, name: str) -> Session:
    h = await doemu_harness(
        {"AGENTS": Server}, vars={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": f"{llm.url}/v1"}
    )
    return Session(h, name, default_agent="ops")


def of(chunks: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [c["chunk"] for c in chunks if c["chunk"]["type"] == kind]


async def test_a_gated_call_suspends_the_run_and_resume_with_approvals_runs_it_once(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(Text("deploying"), ToolUse("deploy", {"service": "api"}, id="d1")))
    llm.script(Reply(Text(" done")))
    s = await session(doemu_harness, llm, "approve-resume")
    await s.start("deploy the api")
    await s.wait("suspended_approval")
    assert RUNS == []  # nothing ran before the approval
    history = await s.history()
    (request,) = of(history, "tool_approval_request")
    assert {k: request[k] for k in ("toolCallId", "approvalId", "toolName", "input")} == {
        "toolCallId": "d1", "approvalId": "d1", "toolName": "deploy",
        "input": {"service": "api"}}  # fmt: skip
    (suspended,) = of(history, "run_suspended")
    assert suspended["reason"] == "approval" and list(suspended["toolCalls"]) == ["d1"]
    _, snapshot = await s.call("/snapshot")
    assert snapshot["pendingClientToolCalls"]["d1"]["approval"] is True

    code, refused = await s.call("/resume", {"options": {"mode": "continue"}})
    assert code == 409 and refused["code"] == "APPROVAL_PENDING"
    assert refused["toolCallIds"] == ["d1"] and "'d1'" in refused["error"]
    code, refused = await s.call(
        "/resume", {"options": {"approvals": [{"toolCallId": "zz", "approved": True}]}}
    )
    assert code == 404 and refused["toolCallIds"] == ["zz"]
    code, refused = await s.call("/resume", {"options": {"approvals": [{"toolCallId": "d1"}]}})
    assert code == 400 and refused["field"] == "options.approvals[0]"
    assert (await s.status())["status"] == "suspended_approval"  # the refusals changed nothing

    code, resumed = await s.call(
        "/resume", {"options": {"approvals": [{"toolCallId": "d1", "approved": True}]}}
    )
    assert code == 200 and resumed["status"] == "resumed", resumed
    done = await s.wait("completed")
    assert done["output"] == "deploying done"
    assert RUNS == [("deploy", {"service": "api"})]
    history = await s.history()
    (response,) = of(history, "tool_approval_response")
    assert response["toolCallId"] == "d1" and response["decision"] == "approve"
    results = of(history, "tool_result")
    assert [r.get("result") for r in results] == [{"deployed": "api"}]
    follow_up = llm.requests("chat")[-1]["messages"]
    assert follow_up[-1]["role"] == "tool" and "api" in follow_up[-1]["content"]
    code, again = await s.call(  # the same /resume again: its answer again, nothing re-runs
        "/resume", {"options": {"approvals": [{"toolCallId": "d1", "approved": True}]}}
    )
    assert code == 200 and again == {**resumed, "duplicate": True}
    assert RUNS == [("deploy", {"service": "api"})]
    assert (await s.status())["status"] == "completed"


async def test_a_denial_by_submit_tool_result_never_runs_the_tool_and_the_model_reads_why(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(ToolUse("deploy", {"service": "db"}, id="d2")))
    llm.script(Reply(Text("not deployed")))
    s = await session(doemu_harness, llm, "approve-deny")
    await s.start("deploy the db")
    await s.wait("suspended_approval")
    code, refused = await s.call("/chat/approve-deny/submit-tool-result",
                                 {"toolCallId": "d2", "result": "ok"})  # fmt: skip
    assert code == 400 and "'d2'" in refused["error"] and "approved" in refused["error"]
    body = {"toolCallId": "d2", "approved": False, "reason": "not on a Friday"}
    code, answer = await s.call("/chat/approve-deny/submit-tool-result", body)
    assert code == 200 and answer["accepted"] is True
    done = await s.wait("completed")
    assert done["output"] == "not deployed" and RUNS == []
    denial = llm.requests("chat")[-1]["messages"][-1]
    assert denial["role"] == "tool" and "not on a Friday" in denial["content"]
    history = await s.history()
    (response,) = of(history, "tool_approval_response")
    assert response["decision"] == "reject" and response["reason"] == "not on a Friday"
    assert of(history, "tool_result")[-1]["denied"] is True
    (part,) = [p for m in await s.messages() for p in m.get("parts") or () if p.get("toolCallId")]
    assert part["state"] == "output-denied"
    code, again = await s.call("/chat/approve-deny/submit-tool-result", body)
    assert code == 200 and again["accepted"] is False  # the same decision: nothing changes
    flipped = {"toolCallId": "d2", "approved": True}
    code, conflict = await s.call("/chat/approve-deny/submit-tool-result", flipped)
    assert code == 409 and conflict["code"] == "APPROVAL_CONFLICT" and "'d2'" in conflict["error"]
    assert RUNS == []


async def test_a_callable_needs_approval_suspends_only_for_the_calls_it_names(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(ToolUse("pay", {"amount": 5}, id="p1")))
    llm.script(Reply(ToolUse("pay", {"amount": 500}, id="p2")))
    llm.script(Reply(Text("paid")))
    s = await session(doemu_harness, llm, "approve-callable")
    await s.start("pay twice")
    status = await s.wait("suspended_approval")
    assert RUNS == [("pay", {"amount": 5})]  # the small payment needed no one
    assert status["stepCount"] == 2
    body = {"toolCallId": "p2", "approved": True}
    code, _ = await s.call("/chat/approve-callable/submit-tool-result", body)
    assert code == 200
    assert (await s.wait("completed"))["output"] == "paid"
    assert RUNS == [("pay", {"amount": 5}), ("pay", {"amount": 500})]
