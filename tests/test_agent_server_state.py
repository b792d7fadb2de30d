"""The agent's state across runs and resumes (issue 26, item 3): ``input.state`` on ``/start``,
the seed's ``modifyState`` on ``/resume`` (a merge patch over HTTP, a function in process),
applied before the run goes on and durable with the resume; ``/snapshot``'s ``state``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from agents.providers import OpenAIChatCompletions, Tool
from agents.server import (
    AgentRegistry,
    EndpointContext,
    ServerToolContext,
    SessionWorkspaces,
    create_agent_server,
    define_agent,
    session_object_name,
)
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from doemu.testing.plugin import HarnessFactory

from .agent_server_steps import Session

SEEN_STATES: list[Any] = []


async def read_state(args: dict[str, Any], ctx: ServerToolContext) -> Any:
    SEEN_STATES.append(ctx.agent.state)
    return {"state": ctx.agent.state}


async def _resume_doubling(request: Any, ctx: EndpointContext) -> Any:
    from workers import Response

    def double(state: Any) -> Any:
        return {**state, "count": state["count"] * 2}

    answer = await ctx.server.resume(modify_state=double)
    return Response(json.dumps(answer))


def registry() -> AgentRegistry:
    agents = AgentRegistry()
    tool = Tool("read_state", "Read the state.", {"type": "object"}, execute=read_state)
    agents.register(define_agent("stateful", tools=[tool]))
    return agents


Server = create_agent_server(
    agents=registry(),
    llm_adapter=lambda env, ctx: OpenAIChatCompletions.from_env(env, model="m"),
    endpoints={"/resume-doubling": _resume_doubling},
    name="StatefulServer",
)


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    SEEN_STATES.clear()
    with FakeLLM(api_key="k") as server:
        yield server


async def harness(doemu_harness: HarnessFactory, llm: FakeLLM) -> Any:
    return await doemu_harness(
        {"AGENTS": Server}, vars={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": f"{llm.url}/v1"}
    )


async def _crash_mid_answer(h: Any, s: Session, llm: FakeLLM) -> None:
    await llm.await_held(timeout=10)
    h.reset("AGENTS", session_object_name(s.id), "simulated crash")
    llm.release()
    await s.wait("interrupted")


async def test_modify_state_patches_the_state_before_the_run_goes_on(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(Text("a ", "b ", "c"), hold_after=1))
    h = await harness(doemu_harness, llm)
    s = Session(h, "st-patch", default_agent="stateful")
    await s.start("go", input={"message": "go", "state": {"count": 1, "mode": "draft"}})
    _, snapshot = await s.call("/snapshot")
    assert snapshot["state"] == {"count": 1, "mode": "draft"}
    await _crash_mid_answer(h, s, llm)
    status, body = await s.call("/resume", {"options": {"modifyState": [1, 2]}})
    assert status == 400 and body["field"] == "options.modifyState"  # a patch is an object
    llm.script(Reply(ToolUse("read_state", {}, id="r1")))
    llm.script(Reply(Text("c")))
    patch = {"count": 2, "mode": None, "extra": {"a": 1}}
    resume = {"options": {"mode": "continue", "modifyState": patch}}
    status, body = await s.call("/resume", resume)
    assert status == 200, body
    await s.wait("completed")
    expected = {"count": 2, "extra": {"a": 1}}
    assert SEEN_STATES == [expected]  # the continued run saw the patched state
    _, snapshot = await s.call("/snapshot")
    assert snapshot["state"] == expected
    status, again = await s.call("/resume", resume)  # a duplicate: not applied twice
    assert status == 200 and again["duplicate"] is True
    assert (await s.call("/snapshot"))[1]["state"] == expected
    assert await h.evict("AGENTS", session_object_name("st-patch"))
    assert (await s.call("/snapshot"))[1]["state"] == expected  # durable


async def test_modify_state_in_process_takes_a_function(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(Text("a ", "b"), hold_after=1))
    h = await harness(doemu_harness, llm)
    s = Session(h, "st-fn", default_agent="stateful")
    await s.start("go", input={"message": "go", "state": {"count": 21}})
    await _crash_mid_answer(h, s, llm)
    llm.script(Reply(Text("b")))
    status, body = await s.call("/resume-doubling", {})
    assert status == 200 and body["status"] == "resumed", body
    await s.wait("completed")
    assert (await s.call("/snapshot"))[1]["state"] == {"count": 42}
    status, body = await s.call("/start", {"agentType": "stateful", "sessionId": "st-fn",
                                           "input": {"message": "x", "state": "no"}})  # fmt: skip
    assert status == 400 and body["field"] == "input.state"


async def open_workspace(args: dict[str, Any], ctx: ServerToolContext) -> Any:
    ctx.agent.workspaces.register("ws-1", "in-memory", capabilities=["fs"],
                                  metadata={"root": "/"})  # fmt: skip
    return {"opened": "ws-1"}


def workspace_registry() -> AgentRegistry:
    agents = AgentRegistry()
    tool = Tool("open_workspace", "Open one.", {"type": "object"}, execute=open_workspace)
    agents.register(define_agent("builder", tools=[tool]))
    return agents


WithWorkspaces = create_agent_server(
    agents=workspace_registry(),
    llm_adapter=lambda env, ctx: OpenAIChatCompletions.from_env(env, model="m"),
    workspaces=SessionWorkspaces,
    name="WorkspaceServer",
)


async def test_workspace_answers_the_registry_with_the_seeds_two_404s(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    """Issue 26 (5): ``/workspace`` is 404 ``RUNTIME_NO_WORKSPACE_SUPPORT`` on a server
    without workspaces, 404 ``WORKSPACES_NOT_FOUND`` for a session with none, else the
    registry's snapshot."""
    h = await doemu_harness({"AGENTS": Server, "BUILDERS": WithWorkspaces},
                            vars={"OPENAI_API_KEY": "k",
                                  "OPENAI_BASE_URL": f"{llm.url}/v1"})  # fmt: skip
    plain = Session(h, "ws-plain", default_agent="stateful")
    status, body = await plain.call("/workspace")
    assert status == 404 and body["code"] == "RUNTIME_NO_WORKSPACE_SUPPORT", body
    namespace = h.env.BUILDERS
    s = Session(h, "ws-builder", default_agent="builder")
    s.stub = namespace.get(namespace.idFromName(session_object_name("ws-builder")))
    status, body = await s.call("/workspace")
    assert status == 404 and body["code"] == "WORKSPACES_NOT_FOUND", body
    llm.script(Reply(ToolUse("open_workspace", {}, id="w1")))
    llm.script(Reply(Text("opened")))
    await s.start("open one")
    await s.wait("completed")
    status, body = await s.call("/workspace")
    assert status == 200 and body["sessionId"] == "ws-builder"
    (workspace,) = body["workspaces"]
    assert workspace["id"] == "ws-1" and workspace["kind"] == "in-memory"
    assert workspace["status"] == "active" and workspace["capabilities"] == ["fs"]
    status, body = await s.call("/workspace", {"x": 1})
    assert status == 405
