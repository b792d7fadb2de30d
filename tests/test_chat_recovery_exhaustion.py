"""Bounded chat recovery in process: the two exhaustion reasons tests/test_chat_recovery.py does
not reach, ``work_budget_exceeded`` and ``stable_timeout``.

Both run on the manual clock: a stall is the watchdog noticing that the clock moved past the
reply's last chunk, a scheduled attempt is the alarm ``h.advance`` fires. Each test checks what a
user and an operator can see once recovery gives up: the sealed incident, the hooks and how often
they ran, the frames the client got, the transcript, and that nothing keeps firing afterwards.

A stable-wait timeout spends one attempt and reschedules 3 s later, as the SDK does, giving up
only at ``max_attempts``.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from agents.chat import ChatMessageOptions
from agents.chat.recovery import DEFAULT_TERMINAL_MESSAGE, ChatRecoveryConfig
from doemu.testing.plugin import HarnessFactory

from .polling import eventually
from .test_chat_agent import Client, connect, request, step
from .test_chat_recovery import Recovering, _steps, kv, text_of, transcript

__all__ = ["_steps"]

INCIDENTS = "cf:chat-recovery:incident:"


class Metered(Recovering):
    """Every reply streams a dozen words, then its provider goes quiet; the stall watchdog (1 s)
    hands the turn to recovery, and every continuation does the same. Each attempt flushes
    stream segments — durable progress — so the attempt count and the no-progress clock keep
    resetting: only the work budget, which counts every segment since the incident opened, can
    end it."""

    chat_stream_stall_timeout_ms = 1_000
    chat_recovery = ChatRecoveryConfig(
        max_recovery_work=3, on_exhausted=lambda ctx: Metered.exhausted.append(ctx)
    )
    exhausted: ClassVar[list[Any]] = []
    turns: ClassVar[list[bool]] = []

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        Metered.turns.append(options.continuation)
        attempt = len(Metered.turns)

        async def chunks() -> Any:
            yield {"type": "start"}
            yield {"type": "text-start", "id": "t"}
            for i in range(12):
                yield {"type": "text-delta", "id": "t", "delta": f"a{attempt}.{i} "}
            await asyncio.Event().wait()  # the provider never sends another byte

        return chunks()


def responses(client: Client) -> list[dict[str, Any]]:
    return client.of("cf_agent_use_chat_response")


def recovering_ends(client: Client) -> list[dict[str, Any]]:
    """The ``done`` frames of turns the watchdog handed to recovery."""
    return [f for f in responses(client) if f["done"] and f.get("outcome") == "recovering"]


def terminal_frames(client: Client) -> list[dict[str, Any]]:
    return [f for f in responses(client) if f.get("error")]


async def terminal_on_resume(stub: Any) -> dict[str, Any]:
    """What a client that connects now and probes for a stream is told: ``resuming`` with the
    last terminal's id, then (on its acknowledgement) the terminal frame itself."""
    late = await connect(stub, "late")
    late.send({"type": "cf_agent_stream_resume_request", "probeId": "p"})
    await eventually(lambda: late.of("cf_agent_stream_resuming"), what="the terminal's id")
    (resuming,) = late.of("cf_agent_stream_resuming")
    late.send({"type": "cf_agent_stream_resume_ack", "id": resuming["id"]})
    done = await eventually(lambda: late.done(resuming["id"]), what="the terminal frame")
    return done


async def incident_records(stub: Any) -> list[dict[str, Any]]:
    return [await stub.kv_get(key) for key in await stub.kv_keys(INCIDENTS)]


async def _metered(doemu_harness: HarnessFactory, cls: type[Metered]) -> tuple[Any, Any, Client]:
    """A harness running ``cls``, and r1's first reply streamed: ``(h, stub, client)``."""
    Recovering.recoveries = []
    Metered.exhausted = []
    Metered.turns = []
    h = await doemu_harness({"CHAT": cls})
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    a.send(request("r1", "hi", "u1"))
    await eventually(lambda: len(a.chunks("r1")) == 14, what="the first reply's words")
    return h, stub, a


async def test_a_turn_that_keeps_progressing_is_sealed_by_its_work_budget(
    doemu_harness: HarnessFactory,
) -> None:
    """``max_recovery_work`` 3: the first stall opens the incident with the progress counter as
    its work baseline; each continuation streams and stalls again, flushing two segments (the
    buffer of ten, then the rest), so the work since the baseline is 2 after the first
    continuation (within budget) and 4 after the second — sealed with ``work_budget_exceeded``
    although every attempt made progress."""
    h, stub, a = await _metered(doemu_harness, Metered)
    for stall in range(1, 6):
        await h.advance(1_000)  # the watchdog fires; a scheduled attempt's alarm is due at once
        await eventually(
            lambda n=stall: len(recovering_ends(a)) >= n or Metered.exhausted,  # type: ignore[misc]
            what=f"stall {stall} handled",
        )
        if Metered.exhausted:
            break
    assert stall == 3 and Metered.turns == [False, True, True]
    (ended,) = Metered.exhausted
    assert ended.reason == "work_budget_exceeded"
    assert ended.request_id != "r1" and ended.recovery_root_request_id == "r1"
    assert ended.terminal_message == DEFAULT_TERMINAL_MESSAGE
    # on_chat_recovery was asked before each continuation, never for the stall that sealed it
    assert [ctx.recovery_root_request_id for ctx in Recovering.recoveries] == ["r1", "r1"]
    assert [ctx.attempt for ctx in Recovering.recoveries] == [1, 1]  # progress resets attempts
    (incident,) = await incident_records(stub)
    assert incident["status"] == "exhausted" and incident["reason"] == "work_budget_exceeded"
    assert incident["progress"] - incident["workBaseline"] == 4
    assert incident["transientRetries"] == 2  # the two stalls that were recovered
    assert await kv(stub, "cf:chat-recovery:progress") == incident["progress"]
    # The client: "recovering…" from the first stall to the seal, then the terminal message.
    assert [f["recovering"] for f in a.of("cf_agent_chat_recovering")] == [True, False]
    (terminal,) = terminal_frames(a)
    assert terminal["done"] is True and terminal["body"] == DEFAULT_TERMINAL_MESSAGE
    assert terminal["id"] == ended.request_id
    stored = await transcript(stub)
    assert [m["role"] for m in stored] == ["user", "assistant"]  # one reply, three attempts
    words = text_of(stored[1]).split()
    assert words == [f"a{n}.{i}" for n in (1, 2, 3) for i in range(12)]
    assert await kv(stub, "cf:chat:recovering") is None
    # Nothing keeps firing: no alarm, no turn, no second on_exhausted.
    await h.advance(120_000)
    assert await h.get_alarm("CHAT", "room") is None
    assert len(Metered.turns) == 3 and len(Metered.exhausted) == 1
    assert len(terminal_frames(a)) == 1 and len(a.of("cf_agent_chat_recovering")) == 2


class CrashLooping(Metered):
    """The same replies, no watchdog: here the isolate dies during every attempt (a deploy, or
    a memory-limit reset), each time after a stored segment — the crash loop that credits a
    little progress on every wake (SDK #1825)."""

    chat_stream_stall_timeout_ms = 0
    chat_recovery = ChatRecoveryConfig(
        max_recovery_work=1, on_exhausted=lambda ctx: Metered.exhausted.append(ctx)
    )


async def test_a_crash_loop_that_credits_progress_is_sealed_by_its_work_budget(
    doemu_harness: HarnessFactory,
) -> None:
    """``max_recovery_work`` 1: every attempt stores one segment (ten chunks) before the kill,
    which resets the attempt count and the no-progress clock. The third interruption finds two
    segments of work since the incident opened — sealed with ``work_budget_exceeded`` well
    before the interruption budget (five); the partial of every attempt is kept."""
    h, stub, _ = await _metered(doemu_harness, CrashLooping)
    watchers: list[Client] = []
    for kill in range(1, 6):
        h.reset("CHAT", "room", f"simulated crash {kill}")
        watchers.append(await connect(stub, f"w{kill}"))  # the wake that finds the dead turn
        if Metered.exhausted:
            break
        await h.advance(1)  # the attempt's alarm: the continuation streams to the watcher
        await eventually(
            lambda w=watchers[-1]: len(_continued_words(w)) == 12,  # type: ignore[misc]
            what=f"attempt {kill} streaming",
        )
    assert kill == 3 and Metered.turns == [False, True, True]
    (ended,) = Metered.exhausted
    assert ended.reason == "work_budget_exceeded" and ended.recovery_root_request_id == "r1"
    assert len(Recovering.recoveries) == 2  # the two interruptions that were recovered
    (incident,) = await incident_records(stub)
    assert incident["status"] == "exhausted" and incident["reason"] == "work_budget_exceeded"
    assert incident["progress"] - incident["workBaseline"] == 2
    assert incident["interruptedAttempts"] == 3
    # The seal happened during the wake, before the waking connection was accepted: it gets
    # no frame, and — like any later client — the terminal message over the resume handshake.
    assert watchers[-1].of("cf_agent_use_chat_response") == []
    terminal = await terminal_on_resume(stub)
    assert terminal["error"] is True and terminal["body"] == DEFAULT_TERMINAL_MESSAGE
    assert terminal["id"] == ended.request_id
    stored = await transcript(stub)
    assert [m["role"] for m in stored] == ["user", "assistant"]
    # What each attempt had stored when it died: its first segment of ten chunks (r1's holds
    # ``start`` and ``text-start`` before eight words; a continuation's ``text-start`` and nine).
    words = [f"a1.{i}" for i in range(8)] + [f"a{n}.{i}" for n in (2, 3) for i in range(9)]
    assert text_of(stored[1]).split() == words
    await h.advance(120_000)
    assert await h.get_alarm("CHAT", "room") is None
    assert len(Metered.turns) == 3 and len(Metered.exhausted) == 1
    assert await kv(stub, "cf:chat:recovering") is None


def _continued_words(watcher: Client) -> list[str]:
    return [
        f["body"]
        for f in responses(watcher)
        if f.get("continuation") and f["body"] and "text-delta" in f["body"]
    ]


class Busy(Recovering):
    """The demo model (its ``"slow"`` reply advances one word per :func:`step`) under the
    recovery config a test picks."""

    config: ClassVar[Any] = None
    exhausted: ClassVar[list[Any]] = []
    turns: ClassVar[list[bool]] = []

    @property  # type: ignore[override]
    def chat_recovery(self) -> Any:
        return Busy.config

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        Busy.turns.append(options.continuation)
        return await super().on_chat_message(on_finish, options)


async def _killed_then_busy(h: Any, max_attempts: int) -> tuple[Any, Client]:
    """r1 is killed mid-reply; the next activation schedules its continuation. Before that
    attempt's alarm fires, another client's turn r2 starts streaming and stays open (no more
    steps), so the attempt never sees a stable agent; its stable wait is 50 ms."""
    Recovering.recoveries = []
    Busy.exhausted = []
    Busy.turns = []
    Busy.config = ChatRecoveryConfig(
        max_attempts=max_attempts,
        stable_timeout_ms=50,
        on_exhausted=lambda ctx: Busy.exhausted.append(ctx),
    )
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    a.send(request("r1", "slow", "u1"))
    step(12)
    await eventually(lambda: len(a.chunks("r1")) >= 15, what="r1 streaming")
    h.reset("CHAT", "room", "simulated crash")
    await transcript(stub)  # the wake: r1's fiber is found, its continuation scheduled
    assert len(Recovering.recoveries) == 1
    b = await connect(stub, "b")
    b.send(request("r2", "slow", "u2"))
    step(1)
    await eventually(lambda: len(b.chunks("r2")) >= 4, what="r2 streaming")
    return stub, b


async def _sealed_on_stable_timeout(h: Any, stub: Any, b: Client, *, attempt: int) -> None:
    """What everyone sees once the stable-wait budget ran out."""
    (ended,) = Busy.exhausted
    assert ended.reason == "stable_timeout" and ended.request_id == "r1"
    assert ended.attempt == attempt
    assert len(Recovering.recoveries) == 1  # asked once, when the attempt was scheduled
    (incident,) = await incident_records(stub)
    assert incident["status"] == "exhausted" and incident["reason"] == "stable_timeout"
    assert incident["attempt"] == attempt
    (terminal,) = terminal_frames(b)
    assert terminal == {
        "type": "cf_agent_use_chat_response", "id": "r1", "body": DEFAULT_TERMINAL_MESSAGE,
        "done": True, "error": True, "messageIds": ["u1"],
    }  # fmt: skip
    assert await kv(stub, "cf:chat:last-terminal") == {
        "requestId": "r1",
        "body": DEFAULT_TERMINAL_MESSAGE,
        "messageIds": ["u1"],
    }
    assert [f["recovering"] for f in b.of("cf_agent_chat_recovering")] == [True, False]
    assert await kv(stub, "cf:chat:recovering") is None
    assert Busy.turns == [False, False]  # r1 and r2: the continuation never ran
    # r2 was never disturbed: it runs to its end, and the kept partial of r1 stays as it was.
    step(30)
    await eventually(lambda: b.done("r2"), what="r2's end")
    stored = await transcript(stub)
    assert [(m["role"], m["id"]) for m in stored][::2] == [("user", "u1"), ("user", "u2")]
    assert text_of(stored[1]).split()[:3] == ["w0", "w1", "w2"]
    assert "sunny" not in text_of(stored[1])
    assert text_of(stored[3]) == "".join(f"w{i} " for i in range(25))
    await h.advance(120_000)
    assert await h.get_alarm("CHAT", "room") is None
    assert len(Busy.exhausted) == 1 and Busy.turns == [False, False]
    assert len(terminal_frames(b)) == 1 and len(b.of("cf_agent_chat_recovering")) == 2


async def test_an_attempt_that_never_sees_a_stable_agent_gives_up_with_stable_timeout(
    doemu_harness: HarnessFactory,
) -> None:
    """``max_attempts`` 1: the attempt waits ``stable_timeout_ms`` for the agent to go idle, it
    does not (another turn streams), and no attempt is left to reschedule: the incident is
    sealed with ``stable_timeout`` — the terminal message, ``on_exhausted`` once — and the turn
    that kept the agent busy is left alone."""
    h = await doemu_harness({"CHAT": Busy})
    stub, b = await _killed_then_busy(h, max_attempts=1)
    await h.advance(1)  # the attempt's alarm
    await eventually(lambda: Busy.exhausted, what="the give-up")
    await _sealed_on_stable_timeout(h, stub, b, attempt=1)


async def test_a_stable_timeout_reschedules_until_the_attempts_run_out(
    doemu_harness: HarnessFactory,
) -> None:
    """``max_attempts`` 3, as the SDK since its "premature ``stable_timeout``" fix
    (``_rescheduleRecoveryAfterStableTimeout``, :func:`after_stable_timeout`): a stable-wait
    timeout is usually deploy churn, so it spends one attempt and reschedules the same attempt
    3 s later; only the timeout at the last attempt gives up with ``stable_timeout``."""
    h = await doemu_harness({"CHAT": Busy})
    stub, b = await _killed_then_busy(h, max_attempts=3)
    await h.advance(1)  # the attempt's alarm
    for attempt in (2, 3):
        await eventually(
            lambda n=attempt: Busy.exhausted or _rescheduled(stub, n),  # type: ignore[misc]
            what=f"the reschedule to attempt {attempt}",
        )
        assert not Busy.exhausted and terminal_frames(b) == []  # not given up yet
        (incident,) = await _rescheduled(stub, attempt)
        assert incident["status"] == "scheduled"
        assert incident.get("attemptsInFlight") is None  # the timed-out attempt finished
        assert await h.get_alarm("CHAT", "room") is not None
        await h.advance(2_000)  # schedules are kept to the second: due 2-3 s from now
        assert await _rescheduled(stub, attempt)  # not yet
        await h.advance(1_000)
    await eventually(lambda: Busy.exhausted, what="the give-up")
    await _sealed_on_stable_timeout(h, stub, b, attempt=3)


async def _rescheduled(stub: Any, attempt: int) -> list[dict[str, Any]]:
    records = await incident_records(stub)
    return [
        r for r in records if r["attempt"] == attempt and r.get("reason") == "stable_timeout_retry"
    ]
