"""Recovery of a turn that comes after earlier turns (issue 30): the interrupted reply is the
last of several assistant messages, and the recovery must extend *it*, not the previous one.

The bug this guards against: the recovery target (the assistant message a continuation extends)
was computed before the partial was persisted, so it named the previous turn's reply and the
attempt skipped itself as ``conversation_changed`` — the turn stayed "recovering" for ever.
"""

from __future__ import annotations

from typing import Any

from doemu.testing.plugin import HarnessFactory

from .polling import eventually
from .test_chat_agent import connect, request, step
from .test_chat_recovery import DropsPartials, Recovering, _steps, kv, text_of, transcript

__all__ = ["_steps"]

_SLOW = "".join(f"w{i} " for i in range(25))


async def _first_turn(stub: Any, a: Any) -> None:
    a.send(request("r0", "hi", "u0"))
    await eventually(lambda: a.done("r0"), what="the first turn's end")
    assert [m["role"] for m in await transcript(stub)] == ["user", "assistant"]


async def test_a_later_turn_killed_mid_stream_is_continued_in_its_own_message(
    doemu_harness: HarnessFactory,
) -> None:
    Recovering.recoveries = []
    h = await doemu_harness({"CHAT": Recovering})
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    await _first_turn(stub, a)
    first_reply = (await transcript(stub))[1]
    a.send(request("r1", "slow", "u1"))
    step(12)
    await eventually(lambda: len(a.chunks("r1")) >= 15, what="more than one stored block")
    h.reset("CHAT", "room", "simulated crash")
    stored = await transcript(stub)  # wakes it: the partial is kept, the attempt scheduled
    assert [m["role"] for m in stored] == ["user", "assistant", "user", "assistant"]
    (ctx,) = Recovering.recoveries
    assert ctx.recovery_kind == "continue" and ctx.request_id == "r1"
    await h.advance(1)
    step(100)
    await eventually(lambda: _settled(stub), what="the continuation to end the recovery")
    stored = await transcript(stub)
    assert [m["role"] for m in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[1] == first_reply  # the earlier reply is untouched
    assert text_of(stored[3]).startswith("w0 w1 ")
    assert text_of(stored[3]).endswith("It is sunny.")
    assert await kv(stub, "cf:chat:recovering") is None
    assert await stub.kv_keys("cf:chat-recovery:incident:") == []  # completed, not skipped


async def _settled(stub: Any) -> bool:
    return bool(
        await kv(stub, "cf:chat:recovering") is None
        and await stub.kv_keys("cf:chat-recovery:incident:") == []
        and text_of((await transcript(stub))[-1]).endswith("It is sunny.")
    )


async def test_a_later_turn_whose_partial_is_dropped_is_answered_again(
    doemu_harness: HarnessFactory,
) -> None:
    """``persist: False`` on a later turn: the retry answers the latest user message in a new
    message, never as a continuation of the earlier reply."""
    Recovering.recoveries, DropsPartials.continuations = [], []
    h = await doemu_harness({"CHAT": DropsPartials})
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    await _first_turn(stub, a)
    first_reply = (await transcript(stub))[1]
    a.send(request("r1", "slow", "u1"))
    step(12)
    await eventually(lambda: len(a.chunks("r1")) >= 15, what="more than one stored block")
    h.reset("CHAT", "room", "simulated crash")
    assert [m["role"] for m in await transcript(stub)] == ["user", "assistant", "user"]
    await h.advance(1)
    step(100)
    await eventually(lambda: _answered_again(stub), what="the retried answer")
    stored = await transcript(stub)
    assert stored[1] == first_reply
    assert DropsPartials.continuations == [False, False, False]
    assert await kv(stub, "cf:chat:recovering") is None


async def _answered_again(stub: Any) -> bool:
    stored = await transcript(stub)
    return len(stored) == 4 and text_of(stored[3]) == _SLOW
