"""Reactive context-overflow recovery: an overflowing turn compacts the history and runs again,
within ``max_retries``; an overflow that compaction cannot fix surfaces, never loops."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest

from agents import observability as obs
from agents.chat import AIChatAgent, ChatMessageOptions
from agents.chat.recovery.overflow import (
    ContextOverflowConfigError,
    default_context_overflow_classifier,
    resolve_context_overflow,
)
from doemu.testing.plugin import HarnessFactory

from .polling import eventually
from .test_chat_agent import connect, request

SUMMARY = {"id": "summary", "role": "user", "parts": [{"type": "text", "text": "(earlier: hi)"}]}


def history(n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"h{i}", "role": "user" if i % 2 == 0 else "assistant",
         "parts": [{"type": "text", "text": f"old {i}"}]}
        for i in range(n)
    ]  # fmt: skip


class Overflowing(AIChatAgent):
    """The "model" refuses any transcript longer than 3 messages: as an exception, or as an
    in-band error after a few words (``body.inBand``)."""

    context_overflow: ClassVar[Any] = True
    classify_chat_error = staticmethod(default_context_overflow_classifier)  # type: ignore[assignment]
    errors: ClassVar[list[Any]] = []
    shrink: ClassVar[bool] = True
    calls: ClassVar[int] = 0

    async def compact_messages(self, messages: list[Any]) -> list[Any] | None:
        if not Overflowing.shrink:
            return list(messages)  # nothing shorter
        return [SUMMARY, messages[-1]]

    async def on_chat_error(self, ctx: Any) -> None:
        Overflowing.errors.append(ctx)

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        Overflowing.calls += 1
        too_long = len(self.messages) > 3
        in_band = bool((options.body or {}).get("inBand"))
        if too_long and not in_band:
            raise RuntimeError("400 prompt is too long: 210000 tokens > 200000 maximum")

        async def chunks() -> Any:
            yield {"type": "start"}
            yield {"type": "text-start", "id": "t"}
            yield {"type": "text-delta", "id": "t", "delta": "partial "}
            if too_long:
                yield {"type": "error", "errorText": "context_length_exceeded"}
                return
            yield {"type": "text-delta", "id": "t", "delta": f"answer to {len(self.messages)}"}
            yield {"type": "text-end", "id": "t"}
            yield {"type": "finish"}

        return chunks()


@pytest.fixture(autouse=True)
def _reset() -> None:
    Overflowing.errors, Overflowing.shrink, Overflowing.calls = [], True, 0


async def stored(stub: Any) -> list[dict[str, Any]]:
    response = await stub.fetch("http://doemu/agents/chat/room/get-messages")
    messages: list[dict[str, Any]] = json.loads(await response.text())
    return messages


async def seeded(h: Any) -> tuple[Any, Any]:
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    a.send({"type": "cf_agent_chat_messages", "messages": history(4)})
    await eventually(lambda: _count(stub, 4), what="the long history")
    return stub, a


async def _count(stub: Any, n: int) -> bool:
    return len(await stored(stub)) == n


@pytest.mark.parametrize("in_band", [False, True])
async def test_an_overflow_compacts_and_runs_the_turn_again(
    doemu_harness: HarnessFactory, in_band: bool
) -> None:
    seen: list[Any] = []
    unsubscribe = obs.subscribe("chat", seen.append)
    try:
        h = await doemu_harness({"CHAT": Overflowing})
        stub, a = await seeded(h)
        a.send(request("r1", "now", "u9", inBand=in_band))
        await eventually(lambda: a.done("r1"), what="the turn's end")
    finally:
        unsubscribe()
    done = a.done("r1")
    assert done is not None and not done.get("error")
    messages = await stored(stub)
    assert [m["id"] for m in messages[:2]] == ["summary", "u9"]
    reply = "".join(p.get("text", "") for p in messages[2]["parts"] if p["type"] == "text")
    assert reply == "partial answer to 2" and len(messages) == 3  # no cut-off partial kept
    assert Overflowing.calls == 2 and Overflowing.errors == []
    (compacted,) = [e for e in seen if e["type"] == "chat:context:compacted"]
    assert compacted["payload"]["messagesBefore"] == 5
    assert compacted["payload"]["messagesAfter"] == 2


async def test_an_overflow_compaction_cannot_fix_surfaces_once(
    doemu_harness: HarnessFactory,
) -> None:
    Overflowing.shrink = False
    h = await doemu_harness({"CHAT": Overflowing})
    stub, a = await seeded(h)
    a.send(request("r1", "now", "u9"))
    await eventually(lambda: a.done("r1"), what="the turn's end")
    assert a.done("r1")["error"] is True  # type: ignore[index]
    assert Overflowing.calls == 1
    (ctx,) = Overflowing.errors
    assert ctx["classification"] == "context_overflow" and ctx["requestId"] == "r1"
    assert len(await stored(stub)) == 5  # the history is untouched


class NeverFits(Overflowing):
    async def compact_messages(self, messages: list[Any]) -> list[Any] | None:
        return [SUMMARY, *messages[-3:]]  # shorter, and still too long


async def test_the_retry_budget_bounds_a_history_that_keeps_overflowing(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"CHAT": NeverFits})
    _, a = await seeded(h)
    a.send(request("r1", "now", "u9"))
    await eventually(lambda: a.done("r1"), what="the turn's end")
    assert a.done("r1")["error"] is True  # type: ignore[index]
    assert Overflowing.calls == 2  # the first run and one retry (max_retries 1)
    (ctx,) = Overflowing.errors
    assert ctx["classification"] == "context_overflow"


def test_settings() -> None:
    assert resolve_context_overflow(None) is None and resolve_context_overflow(False) is None
    assert resolve_context_overflow(True) is not None
    assert resolve_context_overflow({"reactive": True, "maxRetries": 3}).max_retries == 3  # type: ignore[union-attr]
    both = resolve_context_overflow({"reactive": True, "proactive": {"maxInputTokens": 200_000}})
    assert both is not None and both.reactive and both.max_input_tokens == 200_000
    assert (both.headroom, both.max_compactions) == (0.9, 1)
    only = resolve_context_overflow({"proactive": {"max_input_tokens": 10, "headroom": 0.5}})
    assert only is not None and not only.reactive and only.headroom == 0.5
    with pytest.raises(ContextOverflowConfigError, match="max_input_tokens"):
        resolve_context_overflow({"proactive": {"headroom": 0.5}})
    with pytest.raises(ContextOverflowConfigError, match="headroom"):
        resolve_context_overflow({"proactive": {"max_input_tokens": 10, "headroom": 2}})
    with pytest.raises(ContextOverflowConfigError, match="proactive keys"):
        resolve_context_overflow({"proactive": {"max_input_tokens": 10, "limit": 2}})
    with pytest.raises(ContextOverflowConfigError, match="max_retries"):
        resolve_context_overflow({"reactive": True, "max_retries": -1})
    with pytest.raises(ContextOverflowConfigError, match="unknown"):
        resolve_context_overflow({"reactiv": True})


@pytest.mark.parametrize(
    "error",
    [
        "prompt is too long: 212345 tokens > 200000 maximum",  # Anthropic
        "This model's maximum context length is 128000 tokens",  # OpenAI
        "context_length_exceeded",
        "The input token count exceeds the maximum number of tokens allowed",  # Google
        "Input is too long for requested model.",  # Bedrock
    ],
)
def test_the_default_classifier_knows_the_common_providers(error: str) -> None:
    assert default_context_overflow_classifier(RuntimeError(error)) == "context_overflow"
    assert default_context_overflow_classifier(error) == "context_overflow"


def test_the_default_classifier_leaves_other_errors_alone() -> None:
    assert default_context_overflow_classifier(RuntimeError("rate limited (429)")) is None
