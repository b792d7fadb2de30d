"""The seed's vocabulary on the agent server's surface (issue 33, item 4): ``run_resumed`` with
``previousRunId``, ``ExecutionState.status`` as the seed lists it, the snapshot's
``interruptContext`` / ``completedClientToolCalls`` / ``clientToolCallOwnership``, a sub-agent's
client tool answered on the parent's route, and camelCase usage entries."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from agents.providers import OpenAIChatCompletions, Tool
from agents.server import (
    AgentRegistry,
    create_agent_server,
    define_agent,
    session_object_name,
    sub_agent_tool,
)
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from doemu.testing.plugin import HarnessFactory

from .agent_server_steps import Session
from .polling import eventually


def registry() -> AgentRegistry:
    agents = AgentRegistry()
    agents.register(
        define_agent(
            "researcher",
            tools=[Tool("approve", "Ask the user."), sub_agent_tool("checker")],
        )
    )
    agents.register(define_agent("checker", tools=[Tool("approve", "Ask the user.")]))
    return agents


async def _execution(request: Any, ctx: Any) -> Any:
    from workers import Response

    state = ctx.execution_state
    return Response(json.dumps({"status": state.status, "isExecuting": state.is_executing}))


Server = create_agent_server(
    agents=registry(),
    llm_adapter=lambda env, ctx: OpenAIChatCompletions.from_env(env, model="m"),
    sub_agent_namespace=lambda env: env.AGENTS,
    endpoints={"/execution": _execution},
    name="VocabularyServer",
)


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(api_key="k") as server:
        yield server


async def harness(doemu_harness: HarnessFactory, llm: FakeLLM) -> Any:
    return await doemu_harness(
        {"AGENTS": Server}, vars={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": f"{llm.url}/v1"}
    )


async def _deltas(s: Session, n: int) -> bool:
    return sum(c["chunk"]["type"] == "text_delta" for c in await s.history()) >= n


async def test_a_resume_is_a_new_run_naming_the_one_it_continues_and_the_context_says_why(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(Text("one ", "two ", "three"), hold_after=1))
    h = await harness(doemu_harness, llm)
    s = Session(h, "voc-resume")
    started = await s.start("count")
    await llm.await_held(timeout=10)
    await eventually(lambda: _deltas(s, 1), what="a stored delta")
    _, running = await s.call("/execution")
    assert running == {"status": "running", "isExecuting": True}
    h.reset("AGENTS", session_object_name("voc-resume"), "simulated crash")
    llm.release()
    stopped = await s.wait("interrupted")
    _, snapshot = await s.call("/snapshot")
    context = snapshot["interruptContext"]
    assert context["source"] == "crash" and context["runId"] == started["streamId"]
    assert context["reason"] and isinstance(context["interruptedAt"], int)
    _, state = await s.call("/execution")
    assert state == {"status": "interrupted", "isExecuting": False}
    llm.script(Reply(Text("three")))
    status, resumed = await s.call("/resume", {"options": {"mode": "continue"}})
    assert status == 200 and resumed["previousRunId"] == stopped["runId"]
    assert resumed["runId"] != stopped["runId"]
    done = await s.wait("completed")
    assert done["runId"] == resumed["runId"]
    chunk = next(c["chunk"] for c in await s.history() if c["chunk"]["type"] == "run_resumed")
    assert chunk["previousRunId"] == stopped["runId"] and chunk["runId"] == resumed["runId"]
    _, snapshot = await s.call("/snapshot")
    assert "interruptContext" not in snapshot  # only while it is interrupted
    _, state = await s.call("/execution")
    assert state["status"] == "completed"


async def test_a_childs_client_tool_is_owned_by_the_child_and_answered_on_the_parents_route(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(ToolUse("checker", {"message": "check"}, id="sub1")))  # the parent
    llm.script(Reply(ToolUse("approve", {"what": "it"}, id="ask-deep")))  # the child
    h = await harness(doemu_harness, llm)
    parent = Session(h, "voc-parent")
    child = Session(h, "voc-parent-remote-sub1")
    await parent.start("check")
    await parent.wait("suspended_awaiting_children")
    _, state = await parent.call("/execution")
    assert state["status"] == "paused"  # the seed's word for a run waiting at a boundary
    _, snapshot = await parent.call("/snapshot")
    assert snapshot["pendingClientToolCalls"] == {
        "ask-deep": {"toolName": "approve", "input": {"what": "it"}}
    }
    assert snapshot["clientToolCallOwnership"] == {"ask-deep": child.id}
    assert "completedClientToolCalls" not in snapshot
    llm.script(Reply(Text("child ", "ok")))
    llm.script(Reply(Text("parent ", "ok")))
    status, body = await parent.call(
        "/chat/voc-parent/submit-tool-result", {"toolCallId": "ask-deep", "result": {"ok": 1}}
    )
    assert status == 200 and body["accepted"] is True and body["ownerSessionId"] == child.id
    assert (await child.wait("completed"))["output"] == "child ok"
    assert (await parent.wait("completed"))["output"] == "parent ok"
    _, snapshot = await parent.call("/snapshot")
    assert list(snapshot["completedClientToolCalls"]) == ["ask-deep"]
    assert "pendingClientToolCalls" not in snapshot
    _, child_snapshot = await child.call("/snapshot")
    assert isinstance(child_snapshot["completedClientToolCalls"]["ask-deep"], int)
    status, again = await parent.call(
        "/chat/voc-parent/submit-tool-result", {"toolCallId": "ask-deep", "result": {"ok": 2}}
    )
    assert status == 404  # no longer waited for anywhere under this session
    status, again = await child.call(
        "/chat/voc-parent-remote-sub1/submit-tool-result",
        {"toolCallId": "ask-deep", "result": {"ok": 2}},
    )
    assert status == 200 and again["accepted"] is False  # the first answer stands


async def test_usage_entries_are_camel_case(doemu_harness: HarnessFactory, llm: FakeLLM) -> None:
    llm.script(Reply(Text("hello")))
    h = await harness(doemu_harness, llm)
    s = Session(h, "voc-usage")
    await s.start("hi")
    await s.wait("completed")
    _, body = await s.call("/usage?mode=entries")
    (entry,) = body["entries"]
    assert entry["inputTokens"] == llm.stats.billed_input_tokens
    assert entry["outputTokens"] == llm.stats.billed_output_tokens
    assert entry["totalTokens"] == entry["inputTokens"] + entry["outputTokens"]
    assert {"opId", "provider", "model", "at"} <= set(entry)
    assert not any("_" in key for key in entry)
