"""Edges of recovery in the model loop and the agent server, each a bug a review found:
a kill during a server tool (no longer taken for a client waiting), two kills in one step (no
duplicated text, one step-start), an abort of a suspended run, malformed tool arguments from a
provider, and a malformed ``files`` value."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from agents.providers import OpenAIChatCompletions, Tool
from agents.server import AgentRegistry, create_agent_server, define_agent, session_object_name
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from doemu.testing.plugin import HarnessFactory

from .agent_server_steps import Session as _Session
from .polling import eventually


def Session(h: Any, session_id: str) -> _Session:
    return _Session(h, session_id, default_agent="worker")


# -- a server with a slow server tool, a client tool and a scripted fetch ----------------------

GATE: dict[str, Any] = {}


async def slow(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    GATE["entered"] = True
    GATE["runs"] = GATE.get("runs", 0) + 1
    await GATE["release"].wait()
    return {"slow": "done"}


def registry() -> AgentRegistry:
    agents = AgentRegistry()
    agents.register(
        define_agent(
            "worker",
            system_prompt="Work.",
            tools=[
                Tool("slow", "A slow server tool.", {"type": "object"}, execute=slow),
                Tool("approve", "Ask the user to approve."),
            ],
        )
    )
    return agents


def llm_adapter(env: Any, ctx: Any) -> Any:
    fetch = RAW.get("fetch")
    if fetch is not None:
        return OpenAIChatCompletions(api_key="k", model="m", base_url="http://raw/v1", fetch=fetch)
    return OpenAIChatCompletions.from_env(env, model="m")


RAW: dict[str, Any] = {}
Server = create_agent_server(agents=registry(), llm_adapter=llm_adapter, name="ReviewServer")
AutoServer = create_agent_server(
    agents=registry(), llm_adapter=llm_adapter, auto_resume=True, name="ReviewAutoServer"
)


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    GATE.clear()
    GATE["release"] = asyncio.Event()
    RAW.clear()
    with FakeLLM(api_key="k") as server:
        yield server


async def harness(doemu_harness: HarnessFactory, llm: FakeLLM, cls: Any = Server) -> Any:
    return await doemu_harness(
        {"AGENTS": cls}, vars={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": f"{llm.url}/v1"}
    )


class _Body:
    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces

    async def __aiter__(self) -> Any:
        for piece in self.pieces:
            yield piece


class _Response:
    def __init__(self, pieces: list[bytes], status: int = 200) -> None:
        self.ok = status < 400
        self.status = status
        self.body = _Body(pieces)

    async def text(self) -> str:
        return b"".join(self.body.pieces).decode()


def chat_sse(*events: Any) -> list[bytes]:
    return [
        (f"data: {json.dumps(e)}\n\n" if not isinstance(e, str) else f"data: {e}\n\n").encode()
        for e in events
    ]


# -- findings ------------------------------------------------------------------------------------


async def test_a_kill_during_a_server_tool_completes_an_auto_resume_session(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(Text("checking "), ToolUse("slow", {"q": 1}, id="s1")))
    llm.script(Reply(Text("done")))
    h = await harness(doemu_harness, llm, AutoServer)
    s = Session(h, "wedge")
    await s.start("go")
    await eventually(lambda: GATE.get("entered"), what="the server tool running")
    h.reset("AGENTS", session_object_name("wedge"), "simulated crash mid-tool")
    await s.status()  # wakes it: recovery
    for _ in range(3):
        await h.advance(1_000)

    # The recovery finishes the run: the tool (not idempotent) is not run again but reported
    # as possibly executed, and the model's next step answers.
    done = await s.wait("completed")
    assert done["output"] == "checking done", done
    assert GATE["runs"] == 1
    reply = (await s.messages())[-1]
    tool = [p for p in reply["parts"] if p["type"] == "tool-slow"]
    assert len(tool) == 1, reply["parts"]
    assert tool[0]["toolCallId"] == "s1" and tool[0]["state"] == "output-error", tool
    assert tool[0]["errorText"].endswith("(tool:slow) may have executed; verify before retrying")
    assert [p["type"] for p in reply["parts"]] == [
        "step-start", "text", "tool-slow", "step-start", "text"
    ]  # fmt: skip


async def test_two_kills_duplicate_the_text_of_a_recovered_step(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    words = [f"w{i} " for i in range(12)]
    llm.script(Reply(Text(*words), hold_after=4))
    h = await harness(doemu_harness, llm)
    s = Session(h, "dup")
    await s.start("count")
    await llm.await_held(timeout=10)

    async def stored(n: int) -> bool:
        return sum(c["chunk"]["type"] == "text_delta" for c in await s.history()) >= n

    await eventually(lambda: stored(4), what="four deltas stored")
    h.reset("AGENTS", session_object_name("dup"), "crash 1: mid-text")
    llm.release()
    await s.wait("interrupted")
    llm.script(Reply(Text("more ", "text "), ToolUse("slow", {"q": 1}, id="s1")))
    llm.script(Reply(Text("end")))
    assert (await s.call("/resume", {}))[0] == 200
    await eventually(lambda: GATE.get("entered"), what="the server tool running")
    h.reset("AGENTS", session_object_name("dup"), "crash 2: mid-tool")
    await s.wait("interrupted")
    assert (await s.call("/resume", {}))[0] == 200
    done = await s.wait("completed", "failed")
    assert done["output"].count("more text") == 1, done["output"]


async def test_a_recovered_step_keeps_its_text_once(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    words = [f"w{i} " for i in range(12)]
    llm.script(Reply(Text(*words), hold_after=4))
    h = await harness(doemu_harness, llm, AutoServer)
    s = Session(h, "auto")
    await s.start("count")
    await llm.await_held(timeout=10)

    async def stored() -> bool:
        return sum(c["chunk"]["type"] == "text_delta" for c in await s.history()) >= 4

    await eventually(stored, what="four deltas stored")
    h.reset("AGENTS", session_object_name("auto"), "simulated crash")
    llm.release()
    kept = "".join(c["chunk"].get("delta", "") for c in await s.history())
    llm.script(Reply(Text(*words[len(kept.split()) :])))
    await h.advance(1_000)
    done = await s.wait("completed")
    assert done["output"] == "".join(words)
    parts = (await s.messages())[-1]["parts"]
    # the continuation is a model call of its own and opens a step, as streamText's do in the
    # published AIChatAgent (issue 28.7): one text part, and the package's trailing step-start
    assert [p["type"] for p in parts] == ["step-start", "text", "step-start"]


async def test_aborting_a_suspended_session_answers_200(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(ToolUse("approve", {"a": 1}, id="ask1")))
    h = await harness(doemu_harness, llm)
    s = Session(h, "ab")
    await s.start("go")
    await s.wait("suspended_client_tool")
    status, body = await s.call("/chat/ab/abort", {"reason": "user"})
    assert status == 200 and body == {"aborted": True, "status": "failed"}, (status, body)
    last = (await s.call("/history?fromSequence=0"))[1]
    assert last is not None


async def test_files_that_are_not_a_list_are_a_400(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    h = await harness(doemu_harness, llm)
    s = Session(h, "f")
    body = {"agentType": "worker", "sessionId": "f",
            "input": {"message": [{"role": "user", "content": "x", "files": 5}]}}  # fmt: skip
    status, answer = await s.call("/start", body)
    assert status == 400, (status, answer)
    assert (await s.status())["status"] == "idle"


async def test_malformed_tool_arguments_fail_with_a_clear_error(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    pieces = chat_sse(
        {"choices": [{"delta": {"content": "hi "}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {
            "name": "slow", "arguments": '{"q": "tru'}}]}, "finish_reason": "length"}]},
        {"usage": {"prompt_tokens": 3, "completion_tokens": 4}, "choices": []},
        "[DONE]",
    )  # fmt: skip

    async def fetch(url: str, **options: Any) -> Any:
        return _Response(pieces)

    RAW["fetch"] = fetch
    h = await harness(doemu_harness, llm)
    s = Session(h, "bj")
    await s.start("go")
    done = await s.wait("failed", "completed")
    assert done["status"] == "failed"
    assert "openai-chat" in done["error"] and "slow" in done["error"], done["error"]


async def test_a_result_for_a_call_of_the_run_still_streaming_is_a_409_then_accepted(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(ToolUse("approve", {"x": 1}, id="a1"), ToolUse("slow", {}, id="s1")))
    llm.script(Reply(Text("done")))
    h = await harness(doemu_harness, llm)
    s = Session(h, "race")
    await s.start("go")
    await eventually(lambda: GATE.get("entered"), what="the slow tool running")
    status, body = await s.call("/chat/race/submit-tool-result", {"toolCallId": "a1", "result": 1})
    assert status == 409 and body["code"] == "RUN_STILL_STREAMING", body
    GATE["release"].set()
    await s.wait("suspended_step_partial")  # the batch mixed a server and a client call
    status, body = await s.call("/chat/race/submit-tool-result", {"toolCallId": "a1", "result": 1})
    assert status == 200 and body["accepted"] is True
    assert (await s.wait("completed"))["output"] == "done"


async def test_a_mixed_batch_runs_its_server_tools_then_suspends_step_partial(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    """Issue 26 (2): a step that calls a server and a client tool runs the server one, stores
    its result and suspends as ``suspended_step_partial`` (``run_suspended`` reason
    ``step_partial``, the SSE response closed at the boundary); the client's result completes
    the step without running the server tool again."""
    GATE["release"].set()
    llm.script(Reply(ToolUse("slow", {"q": 1}, id="s1"), ToolUse("approve", {"x": 1}, id="a1")))
    llm.script(Reply(Text("both done")))
    h = await harness(doemu_harness, llm)
    s = Session(h, "partial")
    await s.start("go")
    await s.wait("suspended_step_partial")
    chunks = [c["chunk"] for c in await s.history()]
    suspended = [c for c in chunks if c["type"] == "run_suspended"]
    assert [c["reason"] for c in suspended] == ["step_partial"]
    assert list(suspended[0]["toolCalls"]) == ["a1"]
    parts = (await s.messages())[-1]["parts"]
    slow = next(p for p in parts if p.get("toolCallId") == "s1")
    assert slow["state"] == "output-available" and slow["output"] == {"slow": "done"}
    _, sse = await s.call("/sse?fromSequence=0")  # a pause ends the response: it returns
    assert '"type":"suspended"' in sse and '"reason":"step_partial"' in sse
    _, snapshot = await s.call("/snapshot")
    assert list(snapshot["pendingClientToolCalls"]) == ["a1"] and snapshot["status"] == "paused"
    GATE["entered"] = False
    assert await h.evict("AGENTS", session_object_name("partial"))
    status, body = await s.call("/chat/partial/submit-tool-result",
                                {"toolCallId": "a1", "result": {"ok": True}})  # fmt: skip
    assert status == 200 and body["accepted"] is True
    assert (await s.wait("completed"))["output"] == "both done"
    assert GATE["entered"] is False  # the server tool did not run again
    second = llm.requests("chat")[1]["messages"]
    tool_results = {m["tool_call_id"]: m["content"] for m in second if m["role"] == "tool"}
    assert set(tool_results) == {"s1", "a1"} and "done" in tool_results["s1"]
