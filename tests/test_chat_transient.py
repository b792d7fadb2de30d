"""Transient provider failures in a chat turn, against the wire-format fakes (issue 28 item 5,
issue 31 item 3).

* A provider that drops the connection mid-reply: the read error is transient, so bounded
  recovery continues the reply (two model calls, one assistant message), as the published
  package does with a recoverable stream read error.
* A continuation refused with 429 and ``Retry-After``: retried after ``Retry-After`` within the
  budget, not failed into a silently truncated answer.
* A continuation refused every time: recovery gives up within ``max_attempts`` and the terminal
  record is written, so a client that connects later is told the error (never
  ``cf_agent_stream_resume_none``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from agents.chat import AIChatAgent, ChatMessageOptions
from agents.chat.recovery import ChatRecoveryConfig
from agents.providers import OpenAIChatCompletions, model_reply
from doemu.testing.fake_providers import FakeLLM, Reply, Text
from doemu.testing.plugin import HarnessFactory

from .polling import eventually
from .test_chat_agent import connect, request
from .test_providers_loop import env_for, stored, text_of

TERMINAL = "The assistant was interrupted and could not recover. Please try again."


class Transient(AIChatAgent):
    chat_recovery = ChatRecoveryConfig(max_attempts=3)
    exhausted: ClassVar[list[Any]] = []

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        provider = OpenAIChatCompletions.from_env(self.env, model="m")
        return model_reply(self, options, provider)

    def kv_get(self, key: str) -> Any:
        return self.ctx.storage.kv.get(key)


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(api_key="test-key") as server:
        yield server


async def _chat(doemu_harness: HarnessFactory, llm: FakeLLM) -> tuple[Any, Any, Any]:
    h = await doemu_harness({"CHAT": Transient}, vars=env_for(llm))
    stub = h.env.CHAT.getByName("room")
    return h, stub, await connect(stub, "a")


async def _text(stub: Any, want: str) -> bool:
    messages = await stored(stub)
    return len(messages) == 2 and text_of(messages[1]) == want


async def test_a_dropped_connection_is_continued_within_the_recovery_budget(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(Text("one ", "two ", "three ", "four "), die_after=3), Reply(Text("four")))
    h, stub, a = await _chat(doemu_harness, llm)
    a.send(request("r1", "hi", "u1"))
    await eventually(lambda: a.done("r1"), what="the cut turn's end")
    done = a.done("r1")
    assert done is not None and done.get("outcome") == "recovering" and not done.get("error")
    assert [f["recovering"] for f in a.of("cf_agent_chat_recovering")] == [True]
    await h.advance(1_000)  # the first transient retry waits 2^0 s
    await eventually(lambda: _text(stub, "one two three four"), what="the continued reply")
    assert len(llm.stats.by_api("chat")) == 2
    await eventually(
        lambda: [f["recovering"] for f in a.of("cf_agent_chat_recovering")] == [True, False],
        what="recovery's end",
    )


async def test_a_continuation_refused_with_429_is_retried_after_retry_after(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(
        Reply(Text("one ", "two ", "three ", "four "), die_after=3),
        Reply(fail=(429, "rate limited: slow down"), retry_after=2),
        Reply(Text("four")),
    )
    h, stub, a = await _chat(doemu_harness, llm)
    a.send(request("r1", "hi", "u1"))
    await eventually(lambda: a.done("r1"), what="the cut turn's end")
    await h.advance(1_000)
    await eventually(lambda: len(llm.stats.by_api("chat")) == 2, what="the refused continuation")
    await eventually(lambda: _done_count(a) == 2, what="the refusal routed back to recovery")
    # Retry-After is 2 s (schedules keep whole seconds, as the SDK's: at least 1 s more)
    await h.advance(900)
    assert len(llm.stats.by_api("chat")) == 2
    await h.advance(1_100)
    await eventually(lambda: _text(stub, "one two three four"), what="the answer, completed")
    assert len(llm.stats.by_api("chat")) == 3
    assert await stub.kv_get("cf:chat:last-terminal") is None


async def test_a_continuation_refused_every_time_ends_with_a_terminal_a_late_client_sees(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    refusals = [Reply(fail=(429, "rate limited"), retry_after=1) for _ in range(6)]
    llm.script(Reply(Text("one ", "two ", "three ", "four "), die_after=3), *refusals)
    h, stub, a = await _chat(doemu_harness, llm)
    a.send(request("r1", "hi", "u1"))
    await eventually(lambda: a.done("r1"), what="the cut turn's end")

    def terminal() -> bool:
        return any(f.get("body") == TERMINAL for f in a.of("cf_agent_use_chat_response"))

    for attempt in range(1, 8):
        await h.advance(5_000)  # past any back-off
        await eventually(
            lambda n=attempt: terminal() or _done_count(a) > n,  # type: ignore[misc]
            what=f"attempt {attempt} refused and routed",
        )
        if terminal():
            break
    assert len(llm.stats.by_api("chat")) == 4  # the cut request and three refused attempts
    record = await stub.kv_get("cf:chat:last-terminal")
    assert record is not None and record["body"] == TERMINAL
    late = await connect(stub, "late")
    late.send({"type": "cf_agent_stream_resume_request", "probeId": "p"})
    await eventually(lambda: late.of("cf_agent_stream_resuming"), what="resuming the terminal")
    assert late.of("cf_agent_stream_resume_none") == []
    (resuming,) = late.of("cf_agent_stream_resuming")
    late.send({"type": "cf_agent_stream_resume_ack", "id": resuming["id"]})
    await eventually(lambda: late.done(resuming["id"]), what="the terminal frame")
    terminal = late.done(resuming["id"])
    assert terminal is not None and terminal["error"] is True and terminal["body"] == TERMINAL
    assert text_of((await stored(stub))[1]).startswith("one two")  # the partial is kept


def _done_count(a: Any) -> int:
    return sum(1 for f in a.of("cf_agent_use_chat_response") if f["done"])
