"""The agent server's sub-agents in process: each in a sibling object with usage rolled up, a
persistent child keeping its session, a child waiting for its client suspending the parent, and
aborting a parent aborting its running child."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from doemu.testing.plugin import HarnessFactory

from .agent_server_app import _deltas, fresh_llm, harness
from .agent_server_steps import Session
from .polling import eventually


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with fresh_llm() as server:
        yield server


async def test_a_sub_agent_runs_in_a_sibling_object_and_usage_rolls_up(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(ToolUse("analyzer", {"message": "analyze this"}, id="sub1")))
    llm.script(Reply(Text("positive ", "tone")))  # the child
    llm.script(Reply(Text("it is positive")))  # the parent's next step
    h = await harness(doemu_harness, llm)
    s = Session(h, "parent")
    await s.start("analyze")
    done = await s.wait("completed")
    assert done["output"] == "it is positive"
    child = Session(h, "parent-remote-sub1")
    child_status = await child.status()
    assert child_status["status"] == "completed" and child_status["output"] == "positive tone"
    kinds = [c["chunk"]["type"] for c in await s.history()]
    start, end = kinds.index("subagent_start"), kinds.index("subagent_end")
    between = [c["chunk"] for c in (await s.history())[start + 1 : end]]
    assert "".join(c.get("delta", "") for c in between) == "positive tone"
    assert all(c["agentId"] == "parent-remote-sub1" for c in between)
    _, mine = await s.call("/usage")
    _, rolled = await s.call("/usage?mode=rollup")
    stats = llm.stats
    assert rolled["tokensIncludingSubAgents"]["prompt"] == stats.billed_input_tokens
    assert rolled["tokensIncludingSubAgents"]["completion"] == stats.billed_output_tokens
    assert mine["tokens"]["prompt"] < stats.billed_input_tokens
    assert rolled["subAgentStats"]["byType"]["analyzer"]["successfulCalls"] == 1


async def test_a_persistent_child_keeps_its_session(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    for answer in ("first", "second"):
        llm.script(Reply(ToolUse("critic", {"message": f"critique {answer}"}, id=f"k-{answer}")))
        llm.script(Reply(Text(f"critique {answer}")))
        llm.script(Reply(Text(f"done {answer}")))
    h = await harness(doemu_harness, llm)
    s = Session(h, "p2")
    await s.start("one")
    await s.wait("completed")
    await s.start("two")
    await s.wait("completed")
    critic = Session(h, "p2-child-critic")
    _, messages = await critic.call("/messages")
    assert [m["role"] for m in messages["messages"]] == ["user", "assistant", "user", "assistant"]


async def test_a_child_waiting_for_its_client_suspends_the_parent_until_it_is_answered(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(ToolUse("checker", {"message": "check it"}, id="sub2")))  # the parent
    llm.script(Reply(ToolUse("approve", {"what": "it"}, id="ask-child")))  # the child
    h = await harness(doemu_harness, llm)
    parent = Session(h, "cascade")
    child = Session(h, "cascade-remote-sub2")
    await parent.start("check")
    await child.wait("suspended_client_tool")
    await parent.wait("suspended_awaiting_children")
    _, snapshot = await parent.call("/snapshot")
    assert snapshot["awaitingChildren"] == [child.id]
    _, child_snapshot = await child.call("/snapshot")
    assert list(child_snapshot["pendingClientToolCalls"]) == ["ask-child"]
    llm.script(Reply(Text("checked ", "ok")))  # the child, once answered
    llm.script(Reply(Text("all ", "checked")))  # the parent, once the child is done
    status, body = await child.call(
        "/chat/cascade-remote-sub2/submit-tool-result",
        {"toolCallId": "ask-child", "result": {"approved": True}},
    )
    assert status == 200 and body["accepted"] is True
    assert (await child.wait("completed"))["output"] == "checked ok"
    assert (await parent.wait("completed"))["output"] == "all checked"
    kinds = [c["chunk"]["type"] for c in await parent.history()]
    assert kinds.count("subagent_start") == 1 and kinds.count("subagent_end") == 1
    copied = [c["chunk"] for c in await parent.history() if c["chunk"].get("agentId") == child.id]
    assert "".join(c.get("delta", "") for c in copied) == "checked ok"


async def test_aborting_a_parent_aborts_its_running_child(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(ToolUse("analyzer", {"message": "long job"}, id="sub9")))
    llm.script(Reply(Text("working "), stall_after=1))  # the child never finishes by itself
    h = await harness(doemu_harness, llm)
    parent = Session(h, "boss")
    child = Session(h, "boss-remote-sub9")
    await parent.start("delegate")
    await eventually(lambda: _deltas(child, 1), what="the child streaming")
    status, body = await parent.call("/abort", {"reason": "cancelled by user"})
    assert status == 200, body
    assert (await parent.wait("failed"))["error"] == "aborted: cancelled by user"
    stopped = await child.wait("failed")
    assert stopped["error"] == "aborted: parent aborted: cancelled by user"
