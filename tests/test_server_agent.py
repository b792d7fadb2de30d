"""The agent server in process: the seed's endpoints on a real runtime, against the fakes.

Each session is one object (``idFromName("session:<id>")``); the provider is
:class:`~doemu.testing.fake_providers.FakeLLM` reached through ``workers.fetch``. SIGKILL paths
are in ``e2e/test_agent_server.py``; here: a run end to end, every endpoint's answer, bad input
refused with state untouched, client tools across an eviction, interrupt and abort, sub-agents
in sibling objects with usage rolled up across them, hooks and custom endpoints.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from agents.providers import OpenAIChatCompletions, Tool
from agents.server import (
    AgentRegistry,
    ServerHooks,
    create_agent_server,
    define_agent,
    session_object_name,
    sub_agent_tool,
)
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from doemu.testing.plugin import HarnessFactory

from .agent_server_steps import Session
from .polling import eventually

LOOKUPS: list[Any] = []


async def lookup(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    LOOKUPS.append(args)
    return {"found": args.get("q")}


def registry() -> AgentRegistry:
    agents = AgentRegistry()
    agents.register(
        define_agent(
            "researcher",
            system_prompt="Research.",
            tools=[
                Tool("lookup", "Look up.", {"type": "object"}, execute=lookup),
                Tool("approve", "Ask the user to approve."),
                sub_agent_tool("analyzer", description="Analyze a text."),
                sub_agent_tool("critic", name="critic", persistent=True),
                sub_agent_tool("checker"),
            ],
        )
    )
    agents.register(define_agent("analyzer", system_prompt="Analyze.", max_steps=3))
    agents.register(define_agent("critic", system_prompt="Criticize.", max_steps=2))
    agents.register(
        define_agent(
            "checker",
            system_prompt="Check with the user.",
            tools=[Tool("approve", "Ask the user to approve.")],
        )
    )
    return agents


def llm_adapter(env: Any, ctx: Any) -> Any:
    return OpenAIChatCompletions.from_env(env, model="m")


def seen(_ctx: Any) -> None:
    COMPLETED.append(_ctx)


COMPLETED: list[Any] = []
Server = create_agent_server(
    agents=registry(),
    llm_adapter=llm_adapter,
    sub_agent_namespace=lambda env: env.AGENTS,
    hooks=ServerHooks(on_complete=seen),
    endpoints={"/health": lambda request, ctx: _health(ctx)},
    name="Server",
)


async def _health(ctx: Any) -> Any:
    from workers import Response

    return Response(
        json.dumps({"status": "healthy", "isExecuting": ctx.execution_state.is_executing})
    )


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    LOOKUPS.clear()
    COMPLETED.clear()
    with FakeLLM(api_key="k") as server:
        yield server


async def harness(doemu_harness: HarnessFactory, llm: FakeLLM) -> Any:
    return await doemu_harness(
        {"AGENTS": Server}, vars={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": f"{llm.url}/v1"}
    )


async def test_a_run_end_to_end(doemu_harness: HarnessFactory, llm: FakeLLM) -> None:
    llm.script(Reply(Text("let me "), ToolUse("lookup", {"q": "cats"}, id="c1")))
    llm.script(Reply(Text("cats ", "found")))
    h = await harness(doemu_harness, llm)
    s = Session(h, "s1")
    started = await s.start("find cats", userId="u1", tags=["t"], metadata={"k": "v"})
    assert started["sessionId"] == "s1" and started["status"] == "started"
    done = await s.wait("completed")
    assert done["output"] == "let me cats found" and done["stepCount"] == 2
    assert done["checkpointId"] and LOOKUPS == [{"q": "cats"}]
    chunks = await s.history()
    assert [c["sequence"] for c in chunks] == list(range(len(chunks)))  # no gap
    kinds = [c["chunk"]["type"] for c in chunks]
    assert kinds[0] == "run_started" and kinds[-1] == "run_completed"
    assert (
        "tool_call_start" in kinds and "tool_result" in kinds and kinds.count("step_completed") == 2
    )
    deltas = "".join(c["chunk"].get("delta", "") for c in chunks)
    assert deltas == "let me cats found"
    _, messages = await s.call("/messages?offset=0&limit=10")
    assert messages["total"] == 2 and [m["role"] for m in messages["messages"]] == [
        "user",
        "assistant",
    ]
    _, snapshot = await s.call("/snapshot")
    assert snapshot["status"] == "ended" and snapshot["streamSequence"] == chunks[-1]["sequence"]
    assert snapshot["messages"] == messages["messages"] and snapshot["agentType"] == "researcher"
    _, usage = await s.call("/usage")
    stats = llm.stats
    assert usage["tokens"]["prompt"] == stats.billed_input_tokens
    assert usage["tokens"]["completion"] == stats.billed_output_tokens
    assert usage["toolStats"]["byTool"]["lookup"]["successfulCalls"] == 1
    assert COMPLETED and COMPLETED[-1].status == "completed"
    _, health = await s.call("/health")
    assert health == {"status": "healthy", "isExecuting": False}


async def test_bad_input_is_a_clear_4xx_and_changes_nothing(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    h = await harness(doemu_harness, llm)
    s = Session(h, "bad")
    status, body = await s.call(
        "/start", {"agentType": "nope", "sessionId": "bad", "input": {"message": "x"}}
    )
    assert status == 404 and body["code"] == "AGENT_NOT_FOUND"
    assert body["availableTypes"] == ["analyzer", "checker", "critic", "researcher"]
    for bad in (
        {"sessionId": "bad", "input": {"message": "x"}},
        {"agentType": "researcher", "sessionId": "bad", "input": {"message": ""}},
        {"agentType": "researcher", "sessionId": "bad", "input": {"message": [{"role": "bot"}]}},
        "{not json",
        ["a list"],
    ):
        status, body = await s.call("/start", bad)
        assert status == 400 and body["error"], bad
    assert (await s.status())["status"] == "idle"
    status, body = await s.call("/history?fromSequence=5")
    assert status in (400, 416) and "fromSequence" in body["error"]
    status, body = await s.call("/chat/bad/submit-tool-result", {"toolCallId": "nope", "result": 1})
    assert status == 404
    status, body = await s.call("/status", {"x": 1})
    assert status == 405
    status, body = await s.call("/nowhere")
    assert status == 404 and body["code"] == "NOT_FOUND"
    llm.script(Reply(Text("slow"), hold_after=0))
    await s.start("go")
    await llm.await_held(timeout=10)
    status, body = await s.call(
        "/start", {"agentType": "researcher", "sessionId": "bad", "input": {"message": "again"}}
    )
    assert status == 409 and body["code"] == "RUN_IN_PROGRESS"
    status, body = await s.call(
        "/start", {"agentType": "researcher", "sessionId": "other", "input": {"message": "x"}}
    )
    assert status == 409 and body["code"] == "SESSION_MISMATCH"
    llm.release()
    await s.wait("completed")
    _, messages = await s.call("/messages")
    assert [m["role"] for m in messages["messages"]] == ["user", "assistant"]  # nothing leaked in


async def test_a_client_tool_suspends_the_run_and_its_result_continues_it_after_eviction(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(ToolUse("approve", {"action": "buy"}, id="ask1")))
    llm.script(Reply(Text("approved, ", "buying")))
    h = await harness(doemu_harness, llm)
    s = Session(h, "hitl")
    await s.start("buy it")
    await s.wait("suspended_client_tool")
    _, snapshot = await s.call("/snapshot")
    assert snapshot["pendingClientToolCalls"] == {
        "ask1": {"toolName": "approve", "input": {"action": "buy"}}
    }
    assert await h.evict("AGENTS", session_object_name("hitl"))
    status, body = await s.call(
        "/chat/hitl/submit-tool-result", {"toolCallId": "ask1", "result": {"approved": True}}
    )
    assert status == 200 and body["accepted"] is True
    done = await s.wait("completed")
    assert done["output"].endswith("approved, buying")
    status, body = await s.call(
        "/chat/hitl/submit-tool-result", {"toolCallId": "ask1", "result": {"approved": False}}
    )
    assert status == 200 and body["accepted"] is False  # idempotent: the first answer stands
    second = llm.requests("chat")[1]["messages"]
    assert any(m["role"] == "tool" and "approved" in m["content"] for m in second)


async def test_interrupt_is_observed_then_resume_continues(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(
        Reply(
            Text("a ", "b ", "c ", "d ", "e"), ToolUse("lookup", {"q": "x"}, id="c1"), hold_after=2
        )
    )
    llm.script(Reply(Text("resumed")))
    h = await harness(doemu_harness, llm)
    s = Session(h, "int")
    await s.start("go")
    await llm.await_held(timeout=10)

    async def interrupt() -> tuple[int, Any]:
        return await s.call("/chat/int/interrupt", {"reason": "user"})

    pending = asyncio.ensure_future(interrupt())
    # A hang guard, not a timing claim: under load the request can take seconds to arrive.
    await eventually(lambda: _flag(s, pending), within=60, what="the durable interrupt flag")
    llm.release()
    status, body = await pending
    assert status == 202 and body["observed"] is True
    stopped = await s.wait("interrupted")
    assert stopped["stepCount"] == 1  # the step that was running finished, nothing after it
    status, body = await s.call(
        "/resume", {"agentType": "researcher", "options": {"mode": "continue"}}
    )
    assert status == 200 and body["status"] == "resumed"
    done = await s.wait("completed")
    assert done["output"].endswith("resumed")
    chunks = await s.history()
    assert [c["sequence"] for c in chunks] == list(range(len(chunks)))
    kinds = [c["chunk"]["type"] for c in chunks]
    assert "run_interrupted" in kinds and "run_resumed" in kinds


async def _flag(s: Session, pending: asyncio.Future[Any]) -> bool:
    """The interrupt was written (or already observed: a chunk still in flight when the model
    was held can reach the loop first, which clears the flag and answers the request)."""
    return pending.done() or bool((await s.status())["interruptRequested"])


async def test_abort_stops_the_run_at_once(doemu_harness: HarnessFactory, llm: FakeLLM) -> None:
    llm.script(Reply(Text("a ", "b"), stall_after=1))
    h = await harness(doemu_harness, llm)
    s = Session(h, "abort")
    await s.start("go")
    await eventually(lambda: _has_delta(s), what="the first delta")
    status, body = await s.call("/abort", {"reason": "timeout"})
    assert status == 200 and body["aborted"] is True
    failed = await s.wait("failed")
    assert failed["error"] == "aborted: timeout"
    status, body = await s.call("/abort", {})
    assert status == 409


async def _has_delta(s: Session) -> bool:
    return any(c["chunk"]["type"] == "text_delta" for c in await s.history())


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


async def test_hooks_can_refuse_and_transform(doemu_harness: HarnessFactory, llm: FakeLLM) -> None:
    from workers import Response

    def before_start(ctx: Any) -> Any:
        if ctx.body.get("userId") is None:
            return {
                "abort": True,
                "response": Response(json.dumps({"error": "user id required"}), status=401),
            }
        return None

    def transform(raw: Any, env: Any) -> Any:
        return {
            "agentType": "analyzer",
            "input": {"message": raw["prompt"]},
            "sessionId": raw["conversationId"],
            "userId": raw.get("user"),
        }

    Guarded = create_agent_server(
        agents=registry(),
        llm_adapter=llm_adapter,
        name="Guarded",
        hooks=ServerHooks(before_start=before_start, transform_request=transform),
    )
    h = await doemu_harness(
        {"AGENTS": Guarded}, vars={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": f"{llm.url}/v1"}
    )
    s = Session(h, "c1")
    status, body = await s.call("/start", {"prompt": "hi", "conversationId": "c1"})
    assert status == 401 and (await s.status())["status"] == "idle"
    llm.script(Reply(Text("hello")))
    status, body = await s.call("/start", {"prompt": "hi", "conversationId": "c1", "user": "u"})
    assert status == 200 and body["sessionId"] == "c1"
    assert (await s.wait("completed"))["agentType"] == "analyzer"


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


AutoServer = create_agent_server(
    agents=registry(), llm_adapter=llm_adapter, auto_resume=True, name="AutoServer"
)


async def test_auto_resume_continues_a_crashed_run_with_no_request(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    words = [f"w{i} " for i in range(20)]
    llm.script(Reply(Text(*words), hold_after=8))
    h = await doemu_harness({"AGENTS": AutoServer}, vars={
        "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": f"{llm.url}/v1"})  # fmt: skip
    s = Session(h, "auto")
    await s.start("count")
    await llm.await_held(timeout=10)
    await eventually(lambda: _deltas(s, 8), what="the stored words")
    h.reset("AGENTS", session_object_name("auto"), "simulated crash")
    llm.release()
    kept = "".join(c["chunk"].get("delta", "") for c in await s.history())  # wakes it
    llm.script(Reply(Text(*words[len(kept.split()) :])))
    await h.advance(1_000)  # the recovery attempt's schedule
    done = await s.wait("completed")
    assert done["output"] == "".join(words)
    deltas = "".join(c["chunk"].get("delta", "") for c in await s.history())
    assert deltas == "".join(words)  # the stream holds each word once
    chunks = await s.history()
    assert [c["sequence"] for c in chunks] == list(range(len(chunks)))


async def _deltas(s: Session, n: int) -> bool:
    return sum(c["chunk"]["type"] == "text_delta" for c in await s.history()) >= n


async def test_a_snapshot_mid_run_holds_the_answer_so_far(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(Text("one ", "two ", "three ", "four"), hold_after=2))
    h = await harness(doemu_harness, llm)
    s = Session(h, "snap")
    await s.start("go")
    await llm.await_held(timeout=10)
    await eventually(lambda: _deltas(s, 2), what="two words stored")
    _, snapshot = await s.call("/snapshot")
    shown = "".join(p.get("text", "") for p in snapshot["messages"][-1]["parts"]
                    if p["type"] == "text")  # fmt: skip
    assert snapshot["messages"][-1]["role"] == "assistant" and shown == "one two "
    later = (await s.call(f"/history?fromSequence={snapshot['streamSequence'] + 1}"))[1]
    assert later["chunks"] == []  # nothing stored that the snapshot does not show
    llm.release()
    await s.wait("completed")


async def test_last_message_wins_when_before_start_aborts_the_run_in_progress(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    async def last_wins(ctx: Any) -> None:
        if ctx.execution_state.is_executing:
            await ctx.execution_state.abort("superseded")

    Superseding = create_agent_server(
        agents=registry(),
        llm_adapter=llm_adapter,
        hooks=ServerHooks(before_start=last_wins),
        name="Superseding",
    )
    h = await doemu_harness(
        {"AGENTS": Superseding}, vars={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": f"{llm.url}/v1"}
    )
    s = Session(h, "lmw")
    llm.script(Reply(Text("a ", "b"), stall_after=1))
    llm.script(Reply(Text("second ", "answer")))
    await s.start("first")
    await eventually(lambda: _has_delta(s), what="the first run streaming")
    started = await s.start("second")
    assert started["status"] == "started"
    done = await s.wait("completed")
    assert done["output"] == "second answer"
    kinds = [c["chunk"]["type"] for c in await s.history()]
    assert kinds.count("run_failed") == 1 and kinds.count("run_completed") == 1


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


async def test_resume_retry_answers_again_and_branch_restarts_from_a_checkpoint(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(Text("first answer")))
    h = await harness(doemu_harness, llm)
    s = Session(h, "again")
    await s.start("question")
    await s.wait("completed")
    for path, body in (("/resume", {"options": {"mode": "retry"}}), ("/retry", {})):
        status, answer = await s.call(path, body)
        assert status == 409 and answer["sessionStatus"] == "completed", answer  # it stands
    llm.script(Reply(fail=(400, "the model refused")))
    await s.start("question 2")
    assert "refused" in (await s.wait("failed"))["error"]
    llm.script(Reply(ToolUse("lookup", {"q": "y"}, id="c2")))
    llm.script(Reply(Text("second answer")))
    status, body = await s.call("/retry", {})
    assert status == 200 and body["mode"] == "retry", body
    done = await s.wait("completed")
    assert done["output"] == "second answer"  # answered again: the failed attempt is gone
    _, page = await s.call("/messages")
    assert [m["role"] for m in page["messages"]] == ["user", "assistant", "user", "assistant"]
    after_tool_step = done["checkpointId"].rsplit("-", 1)[0] + "-1"
    llm.script(Reply(Text("branched")))
    status, body = await s.call(
        "/resume", {"options": {"mode": "branch", "checkpointId": after_tool_step}}
    )
    assert status == 200, body  # a completed run is branched from a checkpoint it names
    assert (await s.wait("completed"))["output"] == "branched"
    _, page = await s.call("/messages")
    reply = page["messages"][-1]
    assert [p["type"] for p in reply["parts"]] == [
        "step-start",
        "tool-lookup",
        "step-start",
        "text",
    ]
    assert reply["parts"][1]["output"] == {"found": "y"}  # the step kept, its tool not run again
    assert LOOKUPS == [{"q": "y"}]
    status, body = await s.call("/resume", {"options": {"mode": "branch", "checkpointId": "nope"}})
    assert status == 404 and body["code"] == "CHECKPOINT_NOT_FOUND"


async def test_a_finished_or_aborted_run_is_not_resumed_and_a_repeated_resume_is_idempotent(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    """Issue 33 (1, 2): /resume of an aborted or a completed run is a 409 naming the status,
    with nothing changed; the same /resume twice after it succeeded is answered once."""
    llm.script(Reply(Text("Done.")))
    h = await harness(doemu_harness, llm)
    s = Session(h, "finished")
    await s.start("go")
    await s.wait("completed")
    before = await s.history()
    for mode in ("continue", "retry"):
        status, body = await s.call("/resume", {"options": {"mode": mode}})
        assert status == 409 and body["code"] == "NOT_RESUMABLE", body
        assert body["sessionStatus"] == "completed"
    assert await s.history() == before and (await s.status())["output"] == "Done."
    assert len(llm.requests("chat")) == 1  # nothing billed again

    llm.script(Reply(Text("a ", "b"), stall_after=1))
    await s.start("go on")
    await eventually(lambda: _has_delta_after(s, len(before)), what="the second run streaming")
    assert (await s.call("/abort", {"reason": "stop"}))[0] == 200
    await s.wait("failed")
    after_abort = await s.history()
    for path, body in (("/resume", {"options": {"mode": "continue"}}), ("/retry", {}),
                       ("/resume", {})):  # fmt: skip
        status, answer = await s.call(path, body)
        assert status == 409 and answer["code"] == "RUN_ABORTED", answer
        assert answer["sessionStatus"] == "failed"
    assert await s.history() == after_abort and len(llm.requests("chat")) == 2

    llm.script(Reply(Text("x ", "y ", "z"), hold_after=1))
    await s.start("third")
    await llm.await_held(timeout=10)
    interrupting = asyncio.ensure_future(s.call("/chat/finished/interrupt", {"reason": "u"}))
    await eventually(lambda: _flag(s, interrupting), what="the interrupt flag")
    llm.release()
    assert (await interrupting)[0] == 202
    await s.wait("interrupted")
    llm.script(Reply(Text("resumed")))
    resume = {"agentType": "researcher", "options": {"mode": "continue"}}
    status, first = await s.call("/resume", resume)
    assert status == 200 and first["status"] == "resumed"
    status, again = await s.call("/resume", resume)  # the answer was lost: sent again at once
    assert status == 200 and again["duplicate"] is True
    assert {k: v for k, v in again.items() if k != "duplicate"} == first
    await s.wait("completed")
    status, later = await s.call("/resume", resume)  # and again after the run finished
    assert status == 200 and later["duplicate"] is True
    kinds = [c["chunk"]["type"] for c in await s.history()]
    assert kinds.count("run_resumed") == 1 and len(llm.requests("chat")) == 4
    status, other = await s.call("/resume", {"options": {"mode": "continue"}})  # another body
    assert status == 409 and other["sessionStatus"] == "completed"


async def _has_delta_after(s: Session, n: int) -> bool:
    return any(c["chunk"]["type"] == "text_delta" for c in (await s.history())[n:])


async def test_auto_resume_starts_recovery_after_a_crash_by_itself(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    """Issue 33 (5): after a crash an auto_resume session is woken by its own alarm (within
    ``auto_resume_wake_ms``), not by the next request, nor the 30 s keep-alive heartbeat."""
    words = [f"w{i} " for i in range(12)]
    llm.script(Reply(Text(*words), hold_after=4))
    h = await doemu_harness({"AGENTS": AutoServer}, vars={
        "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": f"{llm.url}/v1"})  # fmt: skip
    s = Session(h, "auto-wake")
    name = session_object_name("auto-wake")
    await s.start("count")
    await llm.await_held(timeout=10)
    await eventually(lambda: _deltas(s, 4), what="the stored words")
    alarm = await h.get_alarm("AGENTS", name)
    assert alarm is not None and alarm - h.clock.now() <= 1_000  # auto_resume_wake_ms
    kept = "".join(c["chunk"].get("delta", "") for c in await s.history())
    h.reset("AGENTS", name, "simulated crash")
    llm.release()
    llm.script(Reply(Text(*words[len(kept.split()) :])))
    requests = len(llm.requests("chat"))

    async def recovered() -> bool:  # no request to the object: only time passes
        if len(llm.requests("chat")) > requests:
            return True
        await h.advance(500)
        return False

    await eventually(recovered, what="the recovery's model request, with no request sent")
    done = await s.wait("completed")
    assert done["output"] == "".join(words)


async def test_usage_says_when_a_cut_request_makes_the_totals_a_lower_bound(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    """A request cut mid-stream is recorded with what was known (partial); the session's usage
    says its totals are then lower bounds of what was billed."""
    llm.script(Reply(Text("one ", "two ", "three ", "four "), die_after=3))
    h = await harness(doemu_harness, llm)
    s = Session(h, "cut-usage")
    await s.start("count")
    await s.wait("failed")  # the connection dropped mid-reply
    _, usage = await s.call("/usage?mode=rollup")
    assert usage["partialCalls"] == 1 and usage["tokensLowerBound"] is True
    assert usage["tokensIncludingSubAgentsLowerBound"] is True
    assert usage["tokens"]["completion"] == 3  # the deltas that arrived before the cut
    _, entries = await s.call("/usage?mode=entries")
    tokens = [e for e in entries["entries"] if e["kind"] == "tokens"]
    assert [e["partial"] for e in tokens] == [True]
