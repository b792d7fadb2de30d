"""Companion tools for persistent sub-agents (issue 26, item 1), and custom metrics summed
across them (item 4): the critic loop (a re-spawned child continues its preserved session), a
non-blocking spawn waited for later, the listing, status and terminate tools, and the child
refs' mode and name."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agents.providers import OpenAIChatCompletions, Tool
from agents.server import (
    AgentRegistry,
    ServerToolContext,
    create_agent_server,
    define_agent,
)
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from doemu.testing.plugin import HarnessFactory

from .agent_server_steps import Session


async def score(args: dict[str, Any], ctx: ServerToolContext) -> Any:
    ctx.record_metric("reviews", "scored", 1)
    return {"score": 7}


def registry() -> AgentRegistry:
    agents = AgentRegistry()
    agents.register(define_agent("writer", system_prompt="Write.",
                                 persistent_sub_agents=["critic", "helper"]))  # fmt: skip
    tool = Tool("score", "Score a draft.", {"type": "object"}, execute=score)
    agents.register(define_agent("critic", system_prompt="Criticize.", tools=[tool]))
    agents.register(define_agent("helper", system_prompt="Help."))
    return agents


Server = create_agent_server(
    agents=registry(),
    llm_adapter=lambda env, ctx: OpenAIChatCompletions.from_env(env, model="m"),
    sub_agent_namespace=lambda env: env.AGENTS,
    name="CompanionServer",
)


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(api_key="k") as server:
        yield server


async def harness(doemu_harness: HarnessFactory, llm: FakeLLM) -> Any:
    return await doemu_harness(
        {"AGENTS": Server}, vars={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": f"{llm.url}/v1"}
    )


def _spawn(name: str, message: str, **extra: Any) -> ToolUse:
    args = {"agentType": "critic", "name": name, "message": message, **extra}
    return ToolUse("companion__spawnAgent", args, id=f"spawn-{message[-1]}")


async def test_the_critic_loop_re_consults_a_persistent_child_with_its_memory(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(_spawn("critic", "review draft 1")))  # the writer
    llm.script(Reply(ToolUse("score", {}, id="sc1")))  # the critic scores
    llm.script(Reply(Text("too ", "long")))  # and answers
    llm.script(Reply(_spawn("critic", "review draft 2")))  # the writer asks again
    llm.script(Reply(ToolUse("score", {}, id="sc2")))
    llm.script(Reply(Text("good ", "now")))
    llm.script(Reply(Text("final ", "draft")))  # the writer's answer
    h = await harness(doemu_harness, llm)
    writer = Session(h, "cmp-loop", default_agent="writer")
    await writer.start("write it")
    assert (await writer.wait("completed"))["output"] == "final draft"
    tools = {t["function"]["name"] for t in llm.requests("chat")[0]["tools"]}
    assert {"companion__spawnAgent", "companion__sendMessage", "companion__listChildren",
            "companion__getChildStatus", "companion__waitForResult",
            "companion__terminateChild"} <= tools  # fmt: skip
    critic = Session(h, "cmp-loop-child-critic")
    roles = [m["role"] for m in await critic.messages()]
    assert roles == ["user", "assistant", "user", "assistant"]  # one session, two runs
    second_ask = llm.requests("chat")[4]["messages"]  # the critic's first request of run 2
    assert any("too long" in str(m.get("content")) for m in second_ask)  # it remembers
    parts = (await writer.messages())[-1]["parts"]
    results = [p["output"] for p in parts if p.get("type") == "tool-companion__spawnAgent"]
    assert [r["output"] for r in results] == ["too long", "good now"]
    assert {r["childSessionId"] for r in results} == {critic.id}
    chunks = [c["chunk"] for c in await writer.history()]
    kinds = [c["type"] for c in chunks]
    assert kinds.count("subagent_start") == 2 and kinds.count("subagent_end") == 2
    _, rolled = await writer.call("/usage?mode=rollup")
    assert rolled["subAgentStats"]["byType"]["critic"]["calls"] == 2
    assert rolled["subAgentStats"]["byType"]["critic"]["successfulCalls"] == 2
    assert rolled["custom"] == {}  # the writer recorded nothing itself
    assert rolled["customIncludingSubAgents"] == {"reviews": {"scored": 2}}  # its child did
    assert rolled["tokensIncludingSubAgents"]["prompt"] == llm.stats.billed_input_tokens
    assert rolled["tokensIncludingSubAgents"]["completion"] == llm.stats.billed_output_tokens


def _tool_messages(body: dict[str, Any]) -> int:
    return sum(1 for m in body.get("messages", []) if m.get("role") == "tool")


def _system(body: dict[str, Any]) -> str:
    return "".join(str(m.get("content")) for m in body["messages"] if m["role"] == "system")


async def test_non_blocking_spawn_then_list_status_wait_and_terminate(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    spawn = {"agentType": "helper", "name": "h1", "message": "help me", "blocking": False}
    plan = [
        ToolUse("companion__spawnAgent", spawn, id="t0"),
        ToolUse("companion__waitForResult", {"name": "h1"}, id="t1"),
        ToolUse("companion__listChildren", {}, id="t2"),
        ToolUse("companion__getChildStatus", {"name": "h1"}, id="t3"),
        ToolUse("companion__sendMessage", {"name": "nobody", "message": "x"}, id="t4"),
        ToolUse("companion__terminateChild", {"name": "h1"}, id="t5"),
        ToolUse(
            "companion__spawnAgent", {"agentType": "nope", "name": "h2", "message": "x"}, id="t6"
        ),
    ]

    def responder(api: str, body: dict[str, Any]) -> Reply:
        if "Help." in _system(body):
            return Reply(Text("helped ", "you"), delay_ms=20)
        step = _tool_messages(body)
        return Reply(plan[step]) if step < len(plan) else Reply(Text("all done"))

    llm.responder = responder
    h = await harness(doemu_harness, llm)
    writer = Session(h, "cmp-async", default_agent="writer")
    await writer.start("delegate")
    assert (await writer.wait("completed"))["output"] == "all done"
    parts = (await writer.messages())[-1]["parts"]
    out = {p["toolCallId"]: p for p in parts if p.get("toolCallId")}
    spawned = out["t0"]["output"]
    assert spawned["status"] == "running" and spawned["childSessionId"] == "cmp-async-child-h1"
    assert out["t1"]["output"]["status"] == "completed"
    assert out["t1"]["output"]["output"] == "helped you"
    listed = out["t2"]["output"]["children"]
    assert listed == [{"name": "h1", "agentType": "helper",
                       "childSessionId": "cmp-async-child-h1", "status": "completed"}]  # fmt: skip
    assert out["t3"]["output"]["status"] == "completed"
    assert out["t4"]["state"] == "output-error" and "spawn it first" in out["t4"]["errorText"]
    assert out["t5"]["output"]["terminated"] is False  # nothing left to stop
    assert out["t6"]["state"] == "output-error" and "agentType" in out["t6"]["errorText"]
    kinds = [c["chunk"]["type"] for c in await writer.history()]
    assert "subagent_start" not in kinds  # a non-blocking child streams on its own
    child = Session(h, "cmp-async-child-h1")
    assert (await child.status())["output"] == "helped you"


async def test_terminate_stops_a_running_child(doemu_harness: HarnessFactory, llm: FakeLLM) -> None:
    def responder(api: str, body: dict[str, Any]) -> Reply:
        if "Help." in _system(body):
            return Reply(Text("working "), stall_after=1)  # never ends by itself
        step = _tool_messages(body)
        if step == 0:
            return Reply(ToolUse("companion__spawnAgent", {"agentType": "helper", "name": "h",
                         "message": "go", "blocking": False}, id="s"))  # fmt: skip
        if step == 1:
            return Reply(ToolUse("companion__terminateChild", {"name": "h", "reason": "enough"},
                                 id="k"))  # fmt: skip
        return Reply(Text("stopped it"))

    llm.responder = responder
    h = await harness(doemu_harness, llm)
    writer = Session(h, "cmp-kill", default_agent="writer")
    await writer.start("go")
    assert (await writer.wait("completed"))["output"] == "stopped it"
    child = await Session(h, "cmp-kill-child-h").wait("failed")
    assert child["error"] == "aborted: enough"
    parts = (await writer.messages())[-1]["parts"]
    killed = next(p for p in parts if p.get("toolCallId") == "k")
    assert killed["output"]["terminated"] is True
