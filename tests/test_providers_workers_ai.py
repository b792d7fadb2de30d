"""A chat agent written for Workers AI: :class:`~agents.providers.WorkersAI` over ``env.AI``.

The agent runs in process on a real runtime; ``env.AI`` is doemu's binding, served by
:class:`~doemu.testing.fake_providers.FakeLLM`'s chat completions (a real HTTP server that can
cut a stream mid-reply). The same loop, tools, ledger and bounded recovery as the other
adapters: a cut reply is continued by asking again (strategy ``retry``), a tool runs once
between two steps, a refusal ends the turn in the endpoint's words.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from agents.chat import AIChatAgent, ChatMessageOptions
from agents.chat.recovery import ChatRecoveryConfig
from agents.providers import ProviderConfigError, Tool, WorkersAI, model_reply
from doemu.config.ai import AiSettings
from doemu.config.bindings import AiBinding, WorkerResources
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from doemu.testing.plugin import HarnessFactory

from .polling import eventually
from .test_chat_agent import connect, request
from .test_providers_loop import stored, text_of

LLAMA = "@cf/meta/llama-3.1-8b-instruct"
LOOKUPS: list[dict[str, Any]] = []


async def lookup(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    LOOKUPS.append(args)
    return {"hits": 3}


class WorkersAIChat(AIChatAgent):
    chat_recovery = ChatRecoveryConfig(max_attempts=3)
    errors: ClassVar[list[Any]] = []

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        provider = WorkersAI.from_env(self.env, model=LLAMA)
        tools = [Tool("lookup", "Look something up.", {"type": "object"}, execute=lookup)]
        return model_reply(self, options, provider, tools=tools, system="Be terse.")

    async def on_chat_error(self, ctx: Any) -> None:
        WorkersAIChat.errors.append(ctx)

    async def ledger(self) -> list[dict[str, Any]]:
        return [op.to_dict() for op in self.operations()]


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    LOOKUPS.clear()
    WorkersAIChat.errors = []
    with FakeLLM(api_key="test-key") as server:
        yield server


async def chat(doemu_harness: HarnessFactory, llm: FakeLLM) -> tuple[Any, Any, Any]:
    h = await doemu_harness(
        {"CHAT": WorkersAIChat},
        resources=WorkerResources(ai=AiBinding("AI")),
        ai=AiSettings(f"{llm.url}/v1", {LLAMA: "local-llama"}),
        vars={"DOEMU_AI_API_KEY": "test-key"},
    )
    stub = h.env.CHAT.getByName("room")
    return h, stub, await connect(stub, "a")


async def test_a_reply_cut_mid_stream_is_continued_by_retry_within_the_budget(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(Text("one ", "two ", "three ", "four "), die_after=3), Reply(Text("four")))
    h, stub, a = await chat(doemu_harness, llm)
    a.send(request("r1", "count to four", "u1"))
    await eventually(lambda: a.done("r1"), what="the cut turn's end")
    done = a.done("r1")
    assert done is not None and done.get("outcome") == "recovering" and not done.get("error")
    await h.advance(1_000)  # the first transient retry waits 2^0 s

    async def continued() -> bool:
        messages = await stored(stub)
        return len(messages) == 2 and text_of(messages[1]) == "one two three four"

    await eventually(continued, what="the continued reply")
    cut, again = llm.requests("chat")
    assert cut["model"] == again["model"] == "local-llama"
    # Asked again with the partial as the last, assistant, message (chat completions' retry).
    assert again["messages"][-1] == {"role": "assistant", "content": "one two three "}
    assert again["messages"][0] == {"role": "system", "content": "Be terse."}
    ops = [op["status"] for op in await stub.ledger() if op["kind"] == "llm:workers-ai"]
    assert sorted(ops) == ["completed", "failed"], ops


async def test_a_tool_runs_once_between_two_steps(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(
        Reply(Text("let me ", "look"), ToolUse("lookup", {"q": "cats"}, id="call_1")),
        Reply(Text("found ", "three")),
    )
    _, stub, a = await chat(doemu_harness, llm)
    a.send(request("r1", "cats?", "u1"))
    await eventually(lambda: a.done("r1"), what="the turn's end")
    assert not a.done("r1").get("error")  # type: ignore[union-attr]
    (_, reply) = await stored(stub)
    assert text_of(reply) == "let me lookfound three"
    tool = reply["parts"][2]
    assert tool["type"] == "tool-lookup" and tool["output"] == {"hits": 3}
    assert LOOKUPS == [{"q": "cats"}]
    first, second = llm.requests("chat")
    assert first["tools"][0]["function"]["name"] == "lookup"
    assert second["messages"][2]["tool_calls"][0]["id"] == "call_1"
    assert second["messages"][3] == {"role": "tool", "tool_call_id": "call_1",
                                     "content": '{"hits": 3}'}  # fmt: skip


async def test_a_refusal_ends_the_turn_in_the_endpoints_words(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(fail=(400, "the context is too long for this model")))
    _, stub, a = await chat(doemu_harness, llm)
    a.send(request("r1", "hi", "u1"))
    await eventually(lambda: a.done("r1"), what="the turn's end")
    (error,) = [f for f in a.of("cf_agent_use_chat_response") if f.get("error")]
    assert "workers-ai returned HTTP 400" in error["body"]
    assert "the context is too long for this model" in error["body"]
    assert [m["role"] for m in await stored(stub)] == ["user"]


def test_from_env_refuses_a_worker_without_the_binding_by_name() -> None:
    with pytest.raises(ProviderConfigError, match=r'add \[ai\] binding = "AI"'):
        WorkersAI.from_env({}, model=LLAMA)
    adapter = WorkersAI.from_env({"BRAIN": object()}, model=LLAMA, binding="BRAIN")
    assert adapter.strategy == "retry" and adapter.name == "workers-ai"
    assert not adapter.honours_idempotency
