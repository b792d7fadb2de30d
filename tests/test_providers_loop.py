"""The model loop on each provider adapter, against the local wire-format fakes.

The agents run in-process on a real doemu runtime (real SQLite); the providers are
:class:`~doemu.testing.fake_providers.FakeLLM`, a real HTTP server speaking OpenAI's and
Anthropic's formats, reached through ``workers.fetch``. Kill-and-recover paths are in
``e2e/test_providers.py``; here: streaming, tools through the ledger, client tools, errors in
the provider's words, usage, both context-overflow layers, keys, closing the upstream.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

import agents.providers as providers
from agents import observability as obs
from agents.chat import AIChatAgent, ChatMessageOptions
from agents.chat.overflow import default_context_overflow_classifier
from agents.providers import (
    CONTINUE_INSTRUCTION,
    AnthropicMessages,
    OpenAIChatCompletions,
    OpenAIResponses,
    ProviderConfigError,
    Tool,
    anthropic_messages,
    chat_messages,
    items_from_messages,
    model_reply,
    responses_input,
)
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from doemu.testing.plugin import HarnessFactory

from .polling import eventually
from .test_chat_agent import Client, connect, request

PROVIDERS = {
    "responses": lambda env: OpenAIResponses.from_env(env, model="m"),
    "anthropic": lambda env: AnthropicMessages.from_env(env, model="m"),
    "chat": lambda env: OpenAIChatCompletions.from_env(env, model="m"),
}
API = {"responses": "responses", "anthropic": "messages", "chat": "chat"}
LOOKUPS: list[dict[str, Any]] = []


async def lookup(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    LOOKUPS.append({"args": args, "key": ctx.idempotency_key, "env": ctx.env})
    return {"hits": 3}


TOOLS = [
    Tool("lookup", "Look something up.", {"type": "object"}, execute=lookup),
    Tool("ask_user", "Ask the user (answered in the browser)."),
]


class LoopChat(AIChatAgent):
    kind: ClassVar[str] = "responses"
    model_prices: ClassVar[Any] = {"m": (1.0, 2.0)}
    errors: ClassVar[list[Any]] = []

    async def on_chat_error(self, ctx: Any) -> None:
        LoopChat.errors.append(ctx)

    async def usage_totals(self) -> dict[str, Any]:
        return self.usage().to_dict()

    async def ledger(self) -> list[dict[str, Any]]:
        return [op.to_dict() for op in self.operations()]

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        provider = PROVIDERS[self.kind](self.env)
        return model_reply(self, options, provider, tools=TOOLS, system="Be terse.")


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    LOOKUPS.clear()
    LoopChat.errors = []
    with FakeLLM(api_key="test-key") as server:
        yield server


def env_for(llm: FakeLLM, key: str = "test-key") -> dict[str, str]:
    return {"OPENAI_API_KEY": key, "OPENAI_BASE_URL": f"{llm.url}/v1",
            "ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": llm.url}  # fmt: skip


async def chat_of(
    doemu_harness: HarnessFactory, llm: FakeLLM, cls: type[LoopChat], key: str = "test-key"
) -> tuple[Any, Any, Client]:
    h = await doemu_harness({"CHAT": cls}, vars=env_for(llm, key))
    stub = h.env.CHAT.getByName("room")
    return h, stub, await connect(stub, "a")


async def stored(stub: Any) -> list[dict[str, Any]]:
    response = await stub.fetch("http://doemu/agents/chat/room/get-messages")
    messages: list[dict[str, Any]] = json.loads(await response.text())
    return messages


async def waiting_answered(stub: Any) -> bool:
    parts = (await stored(stub))[-1]["parts"]
    return any(p.get("state") == "output-available" for p in parts)


def text_of(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")


def kinds(kind: str) -> type[LoopChat]:
    return type(f"{kind.title()}Chat", (LoopChat,), {"kind": kind})


CALL_ARGS = json.dumps({"q": "cats"})
RESULT = json.dumps({"hits": 3})
#: The request after the tool call, to the byte (every body also passed the fake's check against
#: the SDK's request type and the API's rules across messages, or it would have been a 400).
FOLLOW_UP: dict[str, dict[str, Any]] = {
    "responses": {
        "model": "m",
        "input": [
            {"role": "user", "content": "cats?"},
            {"role": "assistant", "content": "let me look"},
            {"type": "function_call", "call_id": "call_1", "name": "lookup",
             "arguments": CALL_ARGS},
            {"type": "function_call_output", "call_id": "call_1", "output": RESULT},
        ],
        "stream": True, "store": True, "background": True, "instructions": "Be terse.",
    },
    "chat": {
        "model": "m",
        "messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "cats?"},
            {"role": "assistant", "content": "let me look", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "lookup", "arguments": CALL_ARGS}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": RESULT},
        ],
        "stream": True, "stream_options": {"include_usage": True},
    },
    "anthropic": {
        "model": "m", "max_tokens": 4096, "stream": True, "system": "Be terse.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "cats?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "let me look"},
                {"type": "tool_use", "id": "call_1", "name": "lookup", "input": {"q": "cats"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": RESULT}]},
        ],
    },
}  # fmt: skip
ASK = {"type": "object", "properties": {}}
TOOL_SPECS: dict[str, list[dict[str, Any]]] = {
    "responses": [
        {"type": "function", "name": "lookup", "description": "Look something up.",
         "parameters": {"type": "object"}, "strict": False},
        {"type": "function", "name": "ask_user",
         "description": "Ask the user (answered in the browser).", "parameters": ASK,
         "strict": False},
    ],
    "chat": [
        {"type": "function", "function": {"name": "lookup", "description": "Look something up.",
                                          "parameters": {"type": "object"}}},
        {"type": "function", "function": {
            "name": "ask_user", "description": "Ask the user (answered in the browser).",
            "parameters": ASK}},
    ],
    "anthropic": [
        {"name": "lookup", "description": "Look something up.",
         "input_schema": {"type": "object"}},
        {"name": "ask_user", "description": "Ask the user (answered in the browser).",
         "input_schema": ASK},
    ],
}  # fmt: skip


@pytest.mark.parametrize("kind", list(PROVIDERS))
async def test_text_and_a_server_tool_over_two_steps(
    doemu_harness: HarnessFactory, llm: FakeLLM, kind: str
) -> None:
    llm.script(Reply(Text("let me ", "look"), ToolUse("lookup", {"q": "cats"}, id="call_1")))
    llm.script(Reply(Text("found ", "three")))
    _, stub, a = await chat_of(doemu_harness, llm, kinds(kind))
    a.send(request("r1", "cats?", "u1"))
    await eventually(lambda: a.done("r1"), what="the turn's end")
    assert not a.done("r1").get("error")  # type: ignore[union-attr]
    (_, reply) = await stored(stub)
    assert [p["type"] for p in reply["parts"]] == [
        "step-start", "text", "tool-lookup", "step-start", "text"]  # fmt: skip
    assert text_of(reply) == "let me lookfound three"
    tool = reply["parts"][2]
    assert tool["state"] == "output-available" and tool["output"] == {"hits": 3}
    (call,) = LOOKUPS
    assert call["args"] == {"q": "cats"} and call["key"].startswith("op_")
    assert call["env"].OPENAI_BASE_URL == f"{llm.url}/v1"  # the tool's ctx.env is the agent's
    first, second = llm.requests(API[kind])
    assert {k: v for k, v in second.items() if k != "tools"} == FOLLOW_UP[kind]
    assert first["tools"] == second["tools"] == TOOL_SPECS[kind]
    finish = [c for c in a.chunks("r1") if c["type"] == "finish"]
    assert finish[-1]["messageMetadata"] == {"finishReason": "stop"}
    stats = llm.stats
    totals = await stub.usage_totals()
    assert (totals["input_tokens"], totals["output_tokens"]) == (
        stats.billed_input_tokens, stats.billed_output_tokens)  # fmt: skip
    assert totals["calls"] == 2
    assert totals["cost"] == pytest.approx(
        (stats.billed_input_tokens + 2 * stats.billed_output_tokens) / 1e6)  # fmt: skip
    ops = {op["kind"]: op["status"] for op in await stub.ledger()}
    assert ops == {f"llm:{PROVIDERS[kind](env_for(llm)).name}": "completed",
                   "tool:lookup": "completed"}  # fmt: skip


async def test_a_client_tool_ends_the_reply_and_its_answer_continues_the_message(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(ToolUse("ask_user", {"question": "sure?"}, id="call_ask")))
    llm.script(Reply(Text("thanks")))
    h, stub, a = await chat_of(doemu_harness, llm, kinds("anthropic"))
    a.send(request("r1", "do it", "u1"))
    await eventually(lambda: a.done("r1"), what="the reply waiting for the browser")
    finish = [c for c in a.chunks("r1") if c["type"] == "finish"]
    assert finish[-1]["messageMetadata"] == {"finishReason": "tool-calls"}
    (_, waiting) = await stored(stub)
    a.send({"type": "cf_agent_tool_result", "toolCallId": "call_ask", "toolName": "ask_user",
            "output": {"answer": "yes"}, "autoContinue": True})  # fmt: skip
    await eventually(lambda: waiting_answered(stub), what="the answer applied")
    await h.advance(50)  # the auto-continuation's coalescing window

    async def answered() -> bool:
        messages = await stored(stub)
        return len(messages) == 2 and text_of(messages[1]) == "thanks"

    await eventually(answered, what="the continuation")
    (_, reply) = await stored(stub)
    assert reply["id"] == waiting["id"]  # one message: the continuation appended to it
    assert [p["type"] for p in reply["parts"]] == ["step-start", "tool-ask_user", "step-start",
                                                   "text"]  # fmt: skip
    second = llm.requests("messages")[1]["messages"]
    assert second == [
        {"role": "user", "content": [{"type": "text", "text": "do it"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "call_ask",
                                           "name": "ask_user", "input": {"question": "sure?"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_ask",
                                      "content": json.dumps({"answer": "yes"})}]},
    ]  # fmt: skip
    assert LOOKUPS == []


@pytest.mark.parametrize("kind", list(PROVIDERS))
async def test_a_provider_error_ends_the_turn_in_the_providers_words(
    doemu_harness: HarnessFactory, llm: FakeLLM, kind: str
) -> None:
    llm.script(Reply(fail=(429, "rate limited: slow down")))
    _, stub, a = await chat_of(doemu_harness, llm, kinds(kind))
    a.send(request("r1", "hi", "u1"))
    await eventually(lambda: a.done("r1"), what="the turn's end")
    # As streamText: the refusal is an in-band error, then done with outcome "error"; only the
    # user's message is saved (no empty assistant message).
    done = a.done("r1")
    assert done is not None and done.get("outcome") == "error" and not done.get("error")
    (error,) = [f for f in a.of("cf_agent_use_chat_response") if f.get("error")]
    assert "HTTP 429" in error["body"] and "rate limited: slow down" in error["body"]
    assert [m["role"] for m in await stored(stub)] == ["user"]
    (ctx,) = LoopChat.errors
    assert "rate limited" in str(ctx["error"])
    assert (await stub.usage_totals())["calls"] == 0  # nothing was billed, nothing recorded


async def test_a_wrong_key_is_refused_by_the_provider_and_a_missing_one_by_name(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    _, _, a = await chat_of(doemu_harness, llm, kinds("chat"), key="wrong-key")
    a.send(request("r1", "hi", "u1"))
    await eventually(lambda: a.done("r1"), what="the turn's end")
    (error,) = [f for f in a.of("cf_agent_use_chat_response") if f.get("error")]
    assert "HTTP 401" in error["body"] and "wrong-key" not in error["body"]
    with pytest.raises(ProviderConfigError, match="OPENAI_API_KEY"):
        OpenAIResponses.from_env({}, model="m")
    provider = AnthropicMessages(api_key="sk-secret-value", model="m")
    assert "sk-secret" not in repr(provider)


SUMMARY = {"id": "summary", "role": "user", "parts": [{"type": "text", "text": "(summary)"}]}


def history(n: int) -> list[dict[str, Any]]:
    return [{"id": f"h{i}", "role": "user" if i % 2 == 0 else "assistant",
             "parts": [{"type": "text", "text": " ".join(["old"] * 50)}]}
            for i in range(n)]  # fmt: skip


class Compacting(LoopChat):
    kind = "chat"
    classify_chat_error = staticmethod(default_context_overflow_classifier)  # type: ignore[assignment]

    async def compact_messages(self, messages: list[Any]) -> list[Any] | None:
        return [SUMMARY, *[m for m in messages if not str(m["id"]).startswith("h")]]


class Reactive(Compacting):
    context_overflow: ClassVar[Any] = True


class Proactive(Compacting):
    context_overflow: ClassVar[Any] = {"proactive": {"max_input_tokens": 150, "headroom": 0.5}}


async def seeded(doemu_harness: HarnessFactory, llm: FakeLLM, cls: type[LoopChat]) -> Any:
    _, stub, a = await chat_of(doemu_harness, llm, cls)
    a.send({"type": "cf_agent_chat_messages", "messages": history(4)})

    async def seeded() -> bool:
        return len(await stored(stub)) == 4

    await eventually(seeded, what="the long history")
    return stub, a


async def test_a_prompt_too_long_is_compacted_and_run_again(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(fail=(400, "This model's maximum context length is 100 tokens")))
    llm.script(Reply(Text("short")))
    stub, a = await seeded(doemu_harness, llm, Reactive)
    a.send(request("r1", "now", "u1"))
    await eventually(lambda: a.done("r1"), what="the turn's end")
    assert not a.done("r1").get("error")  # type: ignore[union-attr]
    messages = await stored(stub)
    assert [m["id"] for m in messages[:2]] == ["summary", "u1"] and text_of(messages[2]) == "short"
    first, second = llm.requests("chat")
    assert len(json.dumps(second)) < len(json.dumps(first)) / 2


async def test_the_proactive_guard_compacts_before_a_step_over_the_threshold(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    seen: list[Any] = []
    unsubscribe = obs.subscribe("chat", seen.append)
    try:
        llm.script(Reply(ToolUse("lookup", {"q": "x"}, id="call_1")))
        llm.script(Reply(Text("done")))
        stub, a = await seeded(doemu_harness, llm, Proactive)
        a.send(request("r1", "now", "u1"))
        await eventually(lambda: a.done("r1"), what="the turn's end")
    finally:
        unsubscribe()
    assert not a.done("r1").get("error")  # type: ignore[union-attr]
    first, second = llm.stats.generations[:2]
    assert first.input_tokens >= 75  # over 150 × 0.5: the next step starts compacted
    assert second.input_tokens < first.input_tokens
    (compacted,) = [e for e in seen if e["type"] == "chat:context:compacted"]
    assert compacted["payload"]["reason"] == "proactive"
    messages = await stored(stub)
    assert [m["id"] for m in messages[:2]] == ["summary", "u1"]
    assert text_of(messages[-1]) == "done"
    assert [p["type"] for p in messages[-1]["parts"]][:2] == ["step-start", "tool-lookup"]


def test_a_partial_is_continued_as_the_last_message_unless_an_instruction_is_asked_for() -> None:
    """Chat completions' continuation prompt is the AI SDK's — the conversation with the partial
    answer last — and ``prefill_instruction`` adds a user message after it, opt-in."""
    items = [providers.Text("user", "tell me"), providers.Text("assistant", "Once upon")]
    partial = {"role": "assistant", "content": "Once upon"}
    assert chat_messages(items) == [{"role": "user", "content": "tell me"}, partial]
    assert chat_messages(items, "Be terse.", CONTINUE_INSTRUCTION)[1:] == [
        {"role": "user", "content": "tell me"}, partial,
        {"role": "user", "content": CONTINUE_INSTRUCTION},
    ]  # fmt: skip
    assert OpenAIChatCompletions(api_key="k", model="m").prefill_instruction is None


def test_ui_messages_become_items_and_each_wire_format() -> None:
    """What a user calling a model by hand needs: the counterpart of ``convertToModelMessages``
    and each adapter's wire format, exported from ``agents.providers``."""
    ui = [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "cats?"}]},
        {"id": "a1", "role": "assistant", "parts": [
            {"type": "step-start"}, {"type": "text", "text": "let me look"},
            {"type": "tool-lookup", "toolCallId": "call_1", "state": "output-available",
             "input": {"q": "cats"}, "output": {"hits": 3}},
            {"type": "data-progress", "data": {"pct": 50}},
        ]},
    ]  # fmt: skip
    items = items_from_messages(ui)
    assert items == [
        providers.Text("user", "cats?"), providers.Text("assistant", "let me look"),
        providers.ToolCall("call_1", "lookup", {"q": "cats"}),
        providers.ToolResult("call_1", "lookup", {"hits": 3}),
    ]  # fmt: skip
    assert [{k: v for k, v in m.items() if k != "tool_calls"} for m in chat_messages(items)] == [
        {"role": "user", "content": "cats?"}, {"role": "assistant", "content": "let me look"},
        {"role": "tool", "tool_call_id": "call_1", "content": RESULT},
    ]  # fmt: skip
    assert responses_input(items) == FOLLOW_UP["responses"]["input"]
    assert anthropic_messages(items) == (FOLLOW_UP["anthropic"]["messages"], "")
