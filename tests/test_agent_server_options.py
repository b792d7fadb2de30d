"""The seed's server options and what hooks, endpoints and tools are handed (issue 33, items
4-5): typed hook contexts with the seed's fields, ``logger``, ``usage_store`` and
``chat_handler``, tools that see ``env`` and record custom metrics."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import pytest

from agents.providers import OpenAIChatCompletions, Tool
from agents.server import (
    AfterResumeContext,
    AfterStartContext,
    AgentRegistry,
    BeforeResumeContext,
    BeforeStartContext,
    ChatContext,
    CompleteContext,
    EndpointContext,
    ServerHooks,
    ServerToolContext,
    UsageStoreContext,
    create_agent_server,
    define_agent,
    session_object_name,
    sub_agent_tool,
)
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from doemu.testing.plugin import HarnessFactory

from .agent_server_steps import Session

SEEN: list[Any] = []


async def lookup(args: dict[str, Any], ctx: ServerToolContext) -> dict[str, Any]:
    SEEN.append(ctx)
    ctx.record_metric("api_calls", "search", 1)
    ctx.record_metric("bytes", "input", 512)
    return {"found": args.get("q"), "region": ctx.env.REGION}


def registry() -> AgentRegistry:
    agents = AgentRegistry()
    tool = Tool("lookup", "Look up.", {"type": "object"}, execute=lookup)
    agents.register(define_agent("researcher", tools=[tool]))
    return agents


def llm_adapter(env: Any, ctx: Any) -> Any:
    return OpenAIChatCompletions.from_env(env, model="m")


class Recorder:
    """A logger with the seed's four methods."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, Any]] = []

    def debug(self, message: str, meta: Any = None) -> None:
        self.lines.append(("debug", message, meta))

    def info(self, message: str, meta: Any = None) -> None:
        self.lines.append(("info", message, meta))

    def warn(self, message: str, meta: Any = None) -> None:
        self.lines.append(("warn", message, meta))

    def error(self, message: str, meta: Any = None) -> None:
        self.lines.append(("error", message, meta))


LOG = Recorder()


class MemoryStore:
    """A custom usage store: every entry in a list, its own roll-up."""

    made: ClassVar[list[UsageStoreContext]] = []
    entries: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, env: Any, ctx: UsageStoreContext) -> None:
        MemoryStore.made.append(ctx)

    async def record_entry(self, entry: Mapping[str, Any]) -> None:
        MemoryStore.entries.append(dict(entry))

    def get_entries(self, session_id: str) -> list[dict[str, Any]]:
        return [e for e in MemoryStore.entries if e["sessionId"] == session_id]

    def get_rollup(self, session_id: str) -> dict[str, Any]:
        tokens = [e for e in self.get_entries(session_id) if e["kind"] == "tokens"]
        prompt = sum(e["inputTokens"] for e in tokens)
        completion = sum(e["outputTokens"] for e in tokens)
        total = prompt + completion
        return {
            "tokens": {"prompt": prompt, "completion": completion, "total": total},
            "custom": {"store": {"memory": 1}},
        }


async def _custom_chat(request: Any, ctx: ChatContext) -> Any:
    from workers import Response

    body = {"handled": True, "sessionId": ctx.session_id, "action": ctx.action,
            "status": ctx.execution_state.status}  # fmt: skip
    return Response(json.dumps(body), headers={"content-type": "application/json"})


async def _whoami(request: Any, ctx: EndpointContext) -> Any:
    from workers import Response

    ctx.logger.info("whoami asked", {"status": ctx.execution_state.status})
    return Response(json.dumps({"status": ctx.execution_state.status}))


def hooks() -> ServerHooks:
    def before_start(ctx: BeforeStartContext) -> None:
        SEEN.append(ctx)

    def after_start(ctx: AfterStartContext) -> None:
        SEEN.append(ctx)
        ctx.record_metric("runs", "started", 1)

    def before_resume(ctx: BeforeResumeContext) -> None:
        SEEN.append(ctx)

    def after_resume(ctx: AfterResumeContext) -> None:
        SEEN.append(ctx)

    def on_complete(ctx: CompleteContext) -> None:
        SEEN.append(ctx)

    return ServerHooks(before_start=before_start, after_start=after_start,
                       before_resume=before_resume, after_resume=after_resume,
                       on_complete=on_complete)  # fmt: skip


Server = create_agent_server(
    agents=registry(),
    llm_adapter=llm_adapter,
    hooks=hooks(),
    endpoints={"/whoami": _whoami},
    logger=LOG,
    name="OptionsServer",
)
Stored = create_agent_server(
    agents=registry(),
    llm_adapter=llm_adapter,
    usage_store=MemoryStore,
    chat_handler=_custom_chat,
    name="StoredServer",
)


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    SEEN.clear()
    LOG.lines.clear()
    MemoryStore.made.clear()
    MemoryStore.entries.clear()
    with FakeLLM(api_key="k") as server:
        yield server


async def harness(doemu_harness: HarnessFactory, llm: FakeLLM, cls: Any = Server) -> Any:
    env = {"OPENAI_API_KEY": "k", "REGION": "eu", "OPENAI_BASE_URL": f"{llm.url}/v1"}
    return await doemu_harness({"AGENTS": cls}, vars=env)


def _of(kind: type) -> list[Any]:
    return [c for c in SEEN if isinstance(c, kind)]


async def test_hooks_get_typed_contexts_and_tools_get_env_and_record_metrics(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(ToolUse("lookup", {"q": "otters"}, id="c1")))
    llm.script(Reply(Text("otters found")))
    h = await harness(doemu_harness, llm)
    s = Session(h, "opt-hooks")
    started = await s.start("find otters", userId="u-7")
    done = await s.wait("completed")
    (before,) = _of(BeforeStartContext)
    assert before.body["agentType"] == "researcher" and before.body["userId"] == "u-7"
    assert before.body["input"] == {"message": "find otters"}  # the seed's shape, camelCase
    assert before.start.user_id == "u-7" and before.start.session_id == "opt-hooks"
    assert before.request is not None
    (after,) = _of(AfterStartContext)
    assert (after.session_id, after.run_id, after.agent_type) == (
        "opt-hooks", started["streamId"], "researcher")  # fmt: skip
    (tool_ctx,) = _of(ServerToolContext)
    assert tool_ctx.env.REGION == "eu" and tool_ctx.session_id == "opt-hooks"
    assert tool_ctx.run_id == started["streamId"] and tool_ctx.agent_type == "researcher"
    assert tool_ctx.call_id == "c1" and tool_ctx.idempotency_key.startswith("op_")
    (complete,) = _of(CompleteContext)
    assert complete.status == "completed" and complete.result == done["output"]
    assert complete.run_id == started["streamId"] and complete.agent_type == "researcher"
    _, usage = await s.call("/usage")
    assert usage["custom"] == {"api_calls": {"search": 1}, "bytes": {"input": 512},
                               "runs": {"started": 1}}  # fmt: skip
    assert usage["customIncludingSubAgents"] == usage["custom"]
    stats = usage["toolStats"]["byTool"]["lookup"]
    assert stats["calls"] == 1 and stats["successfulCalls"] == 1
    _, entries = await s.call("/usage?mode=entries")
    kinds = sorted({e["kind"] for e in entries["entries"]})
    assert kinds == ["custom", "tokens"]
    _, whoami = await s.call("/whoami")
    assert whoami == {"status": "completed"}
    assert ("info", "whoami asked", {"status": "completed"}) in LOG.lines  # the seed's logger


async def test_resume_hooks_name_the_run_they_continue(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(Text("a ", "b ", "c"), hold_after=1))
    h = await harness(doemu_harness, llm)
    s = Session(h, "opt-resume")
    started = await s.start("go")
    await llm.await_held(timeout=10)
    h.reset("AGENTS", session_object_name("opt-resume"), "crash")
    llm.release()
    await s.wait("interrupted")
    llm.script(Reply(Text("c")))
    status, resumed = await s.call("/resume", {"agentType": "researcher",
                                               "options": {"mode": "continue"}})  # fmt: skip
    assert status == 200, resumed
    (before,) = _of(BeforeResumeContext)
    assert before.mode == "continue" and before.body["options"] == {"mode": "continue"}
    assert before.resume.mode == "continue"
    (after,) = _of(AfterResumeContext)
    assert after.previous_run_id == started["streamId"] and after.run_id == resumed["runId"]
    await s.wait("completed")


async def test_a_usage_store_gets_every_entry_and_answers_usage_and_a_chat_handler_the_routes(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(ToolUse("lookup", {"q": "x"}, id="c9")))
    llm.script(Reply(Text("done")))
    h = await harness(doemu_harness, llm, Stored)
    s = Session(h, "opt-store")
    await s.start("go")
    await s.wait("completed")
    kinds = [e["kind"] for e in MemoryStore.entries]
    assert kinds.count("tokens") == 2 and kinds.count("tool") == 1 and kinds.count("custom") == 2
    tool = next(e for e in MemoryStore.entries if e["kind"] == "tool")
    assert tool["toolName"] == "lookup" and tool["success"] is True
    assert all(e["sessionId"] == "opt-store" for e in MemoryStore.entries)
    assert MemoryStore.made[0].session_id == "opt-store"
    _, usage = await s.call("/usage")
    assert usage["tokens"]["prompt"] == llm.stats.billed_input_tokens
    assert usage["custom"] == {"store": {"memory": 1}}  # read from the store
    _, entries = await s.call("/usage?mode=entries")
    assert len(entries["entries"]) == len(MemoryStore.entries)
    status, chat = await s.call("/chat/opt-store/stream")
    assert status == 200 and chat == {"handled": True, "sessionId": "opt-store",
                                      "action": "stream", "status": "completed"}  # fmt: skip
    status, chat = await s.call("/chat", {"mode": "attach"})
    assert chat["sessionId"] is None and chat["action"] == "chat"


ANALYZER = define_agent("analyzer", system_prompt="Analyze.", description="Analyze a text.")


def schema_registry() -> AgentRegistry:
    text = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    agents = AgentRegistry()
    agents.register(define_agent("lead", tools=[
        sub_agent_tool(ANALYZER, text, timeout_ms=60_000),
        sub_agent_tool("slowpoke", name="slow", timeout_ms=300),
    ]))  # fmt: skip
    agents.register(ANALYZER)
    agents.register(define_agent("slowpoke"))
    return agents


Schemed = create_agent_server(
    agents=schema_registry(),
    llm_adapter=llm_adapter,
    sub_agent_namespace=lambda env: env.AGENTS,
    name="SchemedServer",
)


async def test_a_sub_agent_tool_takes_an_input_schema_and_a_timeout(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    """``sub_agent_tool(definition, input_schema, timeout_ms=…)`` as the seed's
    ``createSubAgentTool``: the model sees the schema, a call that does not fit it starts no
    child, the child is asked the input, and a child past its timeout is aborted."""
    llm.script(Reply(ToolUse("analyzer", {"text": 5}, id="bad")))  # does not fit: no child
    llm.script(Reply(ToolUse("analyzer", {"text": "great news"}, id="good")))
    llm.script(Reply(Text("positive")))  # the child
    llm.script(Reply(ToolUse("slow", {"message": "take ages"}, id="late")))
    llm.script(Reply(Text("never "), stall_after=1))  # the slow child
    llm.script(Reply(Text("done")))
    h = await harness(doemu_harness, llm, Schemed)
    s = Session(h, "schemed", default_agent="lead")
    await s.start("analyze")
    assert (await s.wait("completed"))["output"] == "done"
    tools = {t["function"]["name"]: t["function"] for t in llm.requests("chat")[0]["tools"]}
    assert tools["analyzer"]["parameters"]["required"] == ["text"]
    assert tools["analyzer"]["description"] == "Analyze a text."
    parts = (await s.messages())[-1]["parts"]
    results = {p["toolCallId"]: p for p in parts if p.get("toolCallId")}
    assert results["bad"]["state"] == "output-error" and "text" in results["bad"]["errorText"]
    assert results["good"]["output"] == "positive"
    assert results["late"]["state"] == "output-error"
    assert "timed out after 300 ms" in results["late"]["errorText"]
    assert (await Session(h, "schemed-remote-bad").status())["status"] == "idle"
    child = Session(h, "schemed-remote-good")
    asked = (await child.messages())[0]["parts"][0]["text"]
    assert json.loads(asked) == {"text": "great news"}
    slow = await Session(h, "schemed-remote-late").wait("failed")
    assert "timed out" in slow["error"]
