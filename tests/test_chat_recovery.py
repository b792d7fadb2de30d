"""Bounded chat recovery in process: interrupted turns continue or retry by themselves.

A crash is ``h.reset(...)`` (in-flight work cancelled, uncommitted writes dropped: the turn's
fiber row is left behind as after a SIGKILL). The next activation finds the fiber, evaluates the
incident and schedules the attempt; the manual clock fires that schedule.
"""

from __future__ import annotations

import asyncio
import json
from functools import partial
from typing import Any, ClassVar

from agents.chat import ChatMessageOptions
from agents.chat.recovery import ChatRecoveryConfig
from doemu.testing.plugin import HarnessFactory

from .polling import eventually
from .test_chat_agent import Chat, _steps, connect, request, step

__all__ = ["_steps"]


async def transcript(stub: Any) -> list[dict[str, Any]]:
    response = await stub.fetch("http://doemu/agents/chat/room/get-messages")
    messages: list[dict[str, Any]] = json.loads(await response.text())
    return messages


def text_of(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")


async def kv(stub: Any, key: str) -> Any:
    return await stub.kv_get(key)


class Recovering(Chat):
    recoveries: ClassVar[list[Any]] = []

    async def on_chat_recovery(self, ctx: Any) -> Any:
        Recovering.recoveries.append(ctx)
        return {}

    def kv_get(self, key: str) -> Any:
        return self.ctx.storage.kv.get(key)

    def kv_keys(self, prefix: str) -> list[str]:
        return [k for k, _ in self.ctx.storage.kv.list(prefix=prefix)]

    def runs(self) -> int:
        return len(self.sql("SELECT id FROM cf_agents_runs"))


async def test_a_turn_killed_mid_stream_is_continued_in_the_same_message(
    doemu_harness: HarnessFactory,
) -> None:
    Recovering.recoveries = []
    h = await doemu_harness({"CHAT": Recovering})
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    a.send(request("r1", "slow", "u1"))
    step(12)
    await eventually(lambda: len(a.chunks("r1")) >= 15, what="more than one stored block")
    h.reset("CHAT", "room", "simulated crash")
    await transcript(stub)  # any request wakes it: the fiber is found, the attempt scheduled
    (ctx,) = Recovering.recoveries
    assert ctx.recovery_kind == "continue" and ctx.request_id == "r1"
    assert ctx.recovery_root_request_id == "r1" and ctx.partial_text.startswith("w0 w1 ")
    assert (await kv(stub, "cf:chat:recovering"))["requestId"] == "r1"
    await h.advance(1)  # the schedule's alarm
    await eventually(
        lambda: _continued(stub), what="the continuation appended to the partial reply"
    )
    stored = await transcript(stub)
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert text_of(stored[1]).endswith("It is sunny.")
    assert await stub.runs() == 0
    assert await stub.kv_keys("cf:chat-recovery:incident:") == []
    assert await kv(stub, "cf:chat:recovering") is None


async def _continued(stub: Any) -> bool:
    stored = await transcript(stub)
    return len(stored) == 2 and text_of(stored[1]).endswith("It is sunny.")


class SilentFirst(Recovering):
    """The first turn produces nothing before the crash (a model still thinking)."""

    thinking: ClassVar[asyncio.Event | None] = None

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        if SilentFirst.thinking is None:
            SilentFirst.thinking = asyncio.Event()
            await SilentFirst.thinking.wait()
        return await super().on_chat_message(on_finish, options)


async def test_a_turn_killed_before_its_first_chunk_retries_the_user_message(
    doemu_harness: HarnessFactory,
) -> None:
    Recovering.recoveries = []
    SilentFirst.thinking = None
    h = await doemu_harness({"CHAT": SilentFirst})
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    a.send(request("r1", "hi", "u1"))
    await eventually(lambda: SilentFirst.thinking is not None, what="the model thinking")
    await eventually(lambda: _one_run(stub), what="the turn's fiber row")
    h.reset("CHAT", "room", "simulated crash")
    await transcript(stub)
    (ctx,) = Recovering.recoveries
    assert ctx.recovery_kind == "retry" and ctx.partial_text == ""
    await h.advance(1)
    await eventually(lambda: _answered(stub), what="the retried turn's answer")
    stored = await transcript(stub)
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert text_of(stored[1]) == "Hello, world"


async def _one_run(stub: Any) -> bool:
    return bool(await stub.runs() == 1)


async def _answered(stub: Any) -> bool:
    stored = await transcript(stub)
    return len(stored) == 2 and text_of(stored[1]) == "Hello, world"


class DropsPartials(Recovering):
    """A provider with no partial support: ``persist: False`` throws the partial away."""

    async def on_chat_recovery(self, ctx: Any) -> Any:
        Recovering.recoveries.append(ctx)
        return {"persist": False}

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        DropsPartials.continuations.append(options.continuation)
        return await super().on_chat_message(on_finish, options)

    continuations: ClassVar[list[bool]] = []


async def test_a_dropped_partial_of_a_new_message_retries_the_user_message(
    doemu_harness: HarnessFactory,
) -> None:
    """Nothing is left to continue once a new message's partial is dropped: the recovery
    answers the user again, in a fresh message, not as a continuation of an older one."""
    Recovering.recoveries, DropsPartials.continuations = [], []
    h = await doemu_harness({"CHAT": DropsPartials})
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    a.send(request("r1", "slow", "u1"))
    step(12)
    await eventually(lambda: len(a.chunks("r1")) >= 15, what="more than one stored block")
    h.reset("CHAT", "room", "simulated crash")
    assert [m["role"] for m in await transcript(stub)] == ["user"]  # the partial is gone
    (ctx,) = Recovering.recoveries
    assert ctx.recovery_kind == "continue" and ctx.partial_text.startswith("w0 w1 ")
    await h.advance(1)
    step(100)
    await eventually(lambda: _whole_slow_reply(stub), what="the retried answer")
    stored = await transcript(stub)
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert DropsPartials.continuations == [False, False]


async def _whole_slow_reply(stub: Any) -> bool:
    stored = await transcript(stub)  # the whole reply, from its first word, once
    return len(stored) == 2 and text_of(stored[1]) == "".join(f"w{i} " for i in range(25))


class AlwaysStalls(Recovering):
    """Every reply sends a few words and then hangs: each attempt is killed mid-stream."""

    exhausted: ClassVar[list[Any]] = []
    chat_recovery = ChatRecoveryConfig(on_exhausted=lambda ctx: AlwaysStalls.exhausted.append(ctx))

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        async def chunks() -> Any:
            yield {"type": "start"}
            yield {"type": "text-start", "id": "t"}
            for i in range(12):
                yield {"type": "text-delta", "id": "t", "delta": f"x{i} "}
            await asyncio.Event().wait()

        return chunks()


async def test_a_turn_that_dies_on_every_attempt_is_sealed_within_its_budget(
    doemu_harness: HarnessFactory,
) -> None:
    """``max_interrupted_attempts`` (5): each attempt dies mid-stream; the fifth interruption
    seals the incident — the terminal message goes out as an error frame, ``on_exhausted`` runs
    once, and no schedule keeps firing."""
    Recovering.recoveries = []
    AlwaysStalls.exhausted = []
    h = await doemu_harness({"CHAT": AlwaysStalls})
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    a.send(request("r1", "hi", "u1"))
    await eventually(lambda: len(a.chunks("r1")) >= 14, what="the first turn's words")
    for kill in range(1, 10):
        h.reset("CHAT", "room", f"simulated crash {kill}")
        watcher = await connect(stub, f"w{kill}")
        if AlwaysStalls.exhausted:
            break
        await h.advance(1)
        await eventually(partial(_continuation_streaming, watcher), what=f"attempt {kill}")
    assert len(AlwaysStalls.exhausted) == 1
    (ended,) = AlwaysStalls.exhausted
    assert ended.reason == "interrupted_attempts_exceeded"
    assert kill == 5  # the original turn and four recovery attempts died
    # The terminal message went out while nobody was connected: a client that comes later
    # probes, is told ``resuming`` and gets it on its acknowledgement.
    late = await connect(stub, "late")
    late.send({"type": "cf_agent_stream_resume_request", "probeId": "p"})
    await eventually(lambda: late.of("cf_agent_stream_resuming"), what="the terminal's id")
    (resuming,) = late.of("cf_agent_stream_resuming")
    late.send({"type": "cf_agent_stream_resume_ack", "id": resuming["id"]})
    await eventually(lambda: late.done(resuming["id"]), what="the terminal frame")
    terminal = late.done(resuming["id"])
    assert terminal is not None and terminal["error"] is True
    assert (
        terminal["body"] == "The assistant was interrupted and could not recover. Please try again."
    )
    await h.advance(60_000)
    assert len(AlwaysStalls.exhausted) == 1
    assert await kv(stub, "cf:chat:recovering") is None
    incident = await stub.kv_keys("cf:chat-recovery:incident:")
    assert len(incident) == 1  # sealed, kept until the sweep so a later wake does not retry


def _continuation_streaming(watcher: Any) -> bool:
    return any(
        f.get("continuation") and f.get("body") for f in watcher.of("cf_agent_use_chat_response")
    )


async def test_recovery_off_keeps_the_partial_and_stops(doemu_harness: HarnessFactory) -> None:
    class Off(Recovering):
        chat_recovery = False

    Recovering.recoveries = []
    h = await doemu_harness({"CHAT": Off})
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    a.send(request("r1", "slow", "u1"))
    step(12)
    await eventually(lambda: len(a.chunks("r1")) >= 15, what="more than one stored block")
    h.reset("CHAT", "room", "simulated crash")
    stored = await transcript(stub)
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert text_of(stored[1]).startswith("w0 w1 ") and "sunny" not in text_of(stored[1])
    await h.advance(5_000)
    assert Recovering.recoveries == [] and len(await transcript(stub)) == 2


class StallsEveryTime(Recovering):
    """A provider that sends one word and then goes quiet, every time; the watchdog is on."""

    chat_stream_stall_timeout_ms = 1_000
    exhausted: ClassVar[list[Any]] = []
    closed: ClassVar[int] = 0
    chat_recovery = ChatRecoveryConfig(
        max_attempts=3, on_exhausted=lambda ctx: StallsEveryTime.exhausted.append(ctx)
    )

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        async def chunks() -> Any:
            try:
                yield {"type": "start"}
                yield {"type": "text-start", "id": "t"}
                yield {"type": "text-delta", "id": "t", "delta": "one "}
                await asyncio.Event().wait()  # the provider never sends another byte
            finally:
                StallsEveryTime.closed += 1  # the upstream request is closed, not left open

        return chunks()


async def test_a_stalled_reply_is_recovered_until_its_budget_runs_out(
    doemu_harness: HarnessFactory,
) -> None:
    """The watchdog aborts a reply that went quiet for 1 s (and closes its upstream): the turn
    ends ``outcome: "recovering"`` with its partial kept, and a continuation is scheduled. Every
    continuation stalls too; each stall is one transient retry, so with ``max_attempts`` 3 the
    fourth stall seals the incident: the terminal error frame, ``on_exhausted`` once."""
    Recovering.recoveries = []
    StallsEveryTime.exhausted = []
    StallsEveryTime.closed = 0
    h = await doemu_harness({"CHAT": StallsEveryTime})
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    a.send(request("r1", "hi", "u1"))
    await eventually(lambda: len(a.chunks("r1")) == 3, what="the first word")

    def recovering() -> list[dict[str, Any]]:
        return [
            f
            for f in a.of("cf_agent_use_chat_response")
            if f["done"] and f.get("outcome") == "recovering"
        ]

    for stall in range(1, 6):
        await h.advance(1_000)
        await eventually(
            lambda n=stall: len(recovering()) >= n or StallsEveryTime.exhausted,  # type: ignore[misc]
            what=f"stall {stall} handled",
        )
        if StallsEveryTime.exhausted:
            break
    assert stall == 4 and len(recovering()) == 3  # the fourth ends in the terminal error
    assert recovering()[0]["id"] == "r1"
    assert all(f.get("continuation") for f in recovering()[1:])
    (ended,) = StallsEveryTime.exhausted
    assert ended.reason == "max_attempts_exceeded"
    assert StallsEveryTime.closed == 4
    await eventually(
        lambda: any(f.get("error") for f in a.of("cf_agent_use_chat_response")),
        what="the terminal frame",
    )
    # "recovering…" from the first stall until the incident ends: one chain, one indicator,
    # announced once (the SDK broadcasts the flag on transitions only)
    assert [f["recovering"] for f in a.of("cf_agent_chat_recovering")] == [True, False]
    stored = await transcript(stub)
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert text_of(stored[1]).split() == ["one"] * 4  # every continuation in the same message
    await h.advance(60_000)
    assert len(StallsEveryTime.exhausted) == 1


class Stalls(StallsEveryTime):
    """A provider that never sends a byte (so no stored progress) under a config chosen by the
    test. (One that sends a little before stalling stores it on every stall: that is progress,
    which resets the attempt count and the no-progress clock; its bound is ``max_attempts``
    through the transient retries, as the test above shows.)"""

    config: ClassVar[Any] = None

    @property  # type: ignore[override]
    def chat_recovery(self) -> Any:
        return Stalls.config

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        async def chunks() -> Any:
            await asyncio.Event().wait()
            yield {"type": "start"}

        return chunks()


async def _stall_until_exhausted(h: Any, a: Any, *, step_ms: float) -> None:
    for stall in range(1, 8):
        await h.advance(step_ms)
        await eventually(
            lambda n=stall: len(_recovering_frames(a)) >= n or StallsEveryTime.exhausted,  # type: ignore[misc]
            what=f"stall {stall} handled",
        )
        if StallsEveryTime.exhausted:
            return
    raise AssertionError("never exhausted")


def _recovering_frames(a: Any) -> list[dict[str, Any]]:
    return [
        f
        for f in a.of("cf_agent_use_chat_response")
        if f["done"] and f.get("outcome") == "recovering"
    ]


async def test_should_keep_recovering_false_ends_recovery_from_the_second_attempt(
    doemu_harness: HarnessFactory,
) -> None:
    asked: list[Any] = []
    StallsEveryTime.exhausted = []
    Stalls.config = ChatRecoveryConfig(
        should_keep_recovering=lambda ctx: asked.append(ctx) or False,
        on_exhausted=lambda ctx: StallsEveryTime.exhausted.append(ctx),
    )
    h = await doemu_harness({"CHAT": Stalls})
    a = await connect(h.env.CHAT.getByName("room"), "a")
    a.send(request("r1", "hi", "u1"))
    await _stall_until_exhausted(h, a, step_ms=31_000)  # past the 30 s debounce: new attempts
    (ended,) = StallsEveryTime.exhausted
    assert ended.reason == "recovery_aborted"
    assert len(asked) == 1 and asked[0].attempt == 2  # never asked on the first attempt
    assert (
        len(_recovering_frames(a)) == 1
    )  # the second stall ends in the terminal error, not "recovering"


async def test_no_progress_for_too_long_ends_recovery(doemu_harness: HarnessFactory) -> None:
    StallsEveryTime.exhausted = []
    Stalls.config = ChatRecoveryConfig(
        no_progress_timeout_ms=5_000,
        on_exhausted=lambda ctx: StallsEveryTime.exhausted.append(ctx),
    )
    h = await doemu_harness({"CHAT": Stalls})
    a = await connect(h.env.CHAT.getByName("room"), "a")
    a.send(request("r1", "hi", "u1"))
    await _stall_until_exhausted(h, a, step_ms=6_000)  # 6 s between stalls, nothing stored
    (ended,) = StallsEveryTime.exhausted
    assert ended.reason == "no_progress_timeout"
    assert len(_recovering_frames(a)) == 1
