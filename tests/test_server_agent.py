"""The agent server in process: a run end to end on a real runtime against the fakes, every
endpoint's answer, bad input refused with state untouched, hooks and custom endpoints, snapshots
mid-run, a new message superseding the run in progress, and usage as a lower bound.

SIGKILL paths are in ``e2e/test_agent_server.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from agents.server import ServerHooks, create_agent_server
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from doemu.testing.plugin import HarnessFactory

from .agent_server_app import (
    COMPLETED,
    LOOKUPS,
    _deltas,
    _has_delta,
    fresh_llm,
    harness,
    llm_adapter,
    registry,
)
from .agent_server_steps import Session
from .polling import eventually


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with fresh_llm() as server:
        yield server


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
