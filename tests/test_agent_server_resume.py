"""The agent server's run control in process: client tools suspending a run across an eviction,
interrupt and resume, abort, resume's retry and branch, refused and repeated resumes, and
``auto_resume`` continuing a crashed run with no request.

SIGKILL paths are in ``e2e/test_agent_server.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from agents.server import create_agent_server, session_object_name
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from doemu.testing.plugin import HarnessFactory

from .agent_server_app import (
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
