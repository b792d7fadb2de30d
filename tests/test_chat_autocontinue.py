"""Auto-continuation after client tool answers, coalesced (:mod:`agents.chat.turns.autocontinue`).

A client answers tool calls with ``cf_agent_tool_result`` / ``cf_agent_tool_approval`` frames
carrying ``autoContinue: true``; the agent continues the conversation once, 50 ms (on its clock)
after the last answer of a burst, and only when no turn streams and the batch of calls is
complete. The clock is the test's manual clock, so "not yet" is exact: the continuation cannot
start before the test moves time on. Turns are counted where they begin, in ``on_chat_message``,
and on the wire by their terminal frames.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

from agents.chat import AIChatAgent, ChatMessageOptions
from agents.chat.streams.scripted import Delay, Script, ScriptedModel, Text, ToolCall
from doemu.testing.plugin import HarnessFactory

from .chat_steps import _steps, gated_sleep, step
from .polling import eventually
from .test_chat_agent import Client, connect, request

__all__ = ["_steps"]

UPDATED = "cf_agent_message_updated"

#: The continuation when a test scripts none: a plain answer.
SUNNY: Script = [Text("It is ", "sunny.")]


class Tools(AIChatAgent):
    """``"tools"``: two client calls, then a pause (one :func:`step`) before the reply ends;
    ``"split"``: one call, a pause, the second call, a pause — a batch whose second call is not
    streamed yet when the first is answered; ``"approve"``: a call awaiting approval.
    Continuations play :attr:`continuations` in order, then :data:`SUNNY`. :attr:`turns`
    records, for every turn as it begins, whether it is a continuation and the states of the
    tool calls it sees."""

    turns: ClassVar[list[tuple[bool, list[str]]]] = []
    continuations: ClassVar[list[Script]] = []

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        london = ToolCall("getWeather", {"city": "London"}, call_id="call_1")
        rome = ToolCall("getWeather", {"city": "Rome"}, call_id="call_2")
        ask = ToolCall("ask", {}, call_id="call_a", stream_input=False, approval_id="approval_1")
        self.model = ScriptedModel.by_last_user_text(
            {
                "tools": [london, rome, Delay(1)],
                "split": [london, Delay(1), rome, Delay(1)],
                "approve": [ask],
            },
            default=[Text("Hello, ", "world")],
            sleep=gated_sleep,
        )

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        last = self.messages[-1]
        states = [p["state"] for p in last["parts"] if "toolCallId" in p]
        Tools.turns.append((options.continuation, states))
        if options.continuation:
            script = Tools.continuations.pop(0) if Tools.continuations else SUNNY
            return ScriptedModel(script, sleep=gated_sleep).response(
                self.messages, abort=options.abort_signal
            )
        return self.model.response(self.messages, abort=options.abort_signal)

    async def stable(self, within: float) -> bool:
        return await self.wait_until_stable(within)


def answer(call_id: str, *, auto: bool = True) -> dict[str, Any]:
    frame = {"type": "cf_agent_tool_result", "toolCallId": call_id, "toolName": "getWeather",
             "output": {"temp": 21}}  # fmt: skip
    return {**frame, "autoContinue": True} if auto else frame


def continuations() -> list[list[str]]:
    """The tool states each continuation turn saw when it began."""
    return [states for continuation, states in Tools.turns if continuation]


def continuation_ends(client: Client) -> list[dict[str, Any]]:
    return [
        f for f in client.of("cf_agent_use_chat_response") if f["done"] and f.get("continuation")
    ]


def text_of(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")


async def stored(stub: Any) -> list[dict[str, Any]]:
    response = await stub.fetch("http://doemu/agents/chat/room/get-messages")
    messages: list[dict[str, Any]] = await response.json()
    return messages


async def start(h: Any, text: str, continuations: Sequence[Script] = ()) -> tuple[Any, Client]:
    Tools.turns = []
    Tools.continuations = list(continuations)
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    a.send(request("r1", text, "u1"))
    return stub, a


async def answered_after_the_turn(
    h: Any, *answers: dict[str, Any], continuations: Sequence[Script] = ()
) -> tuple[Any, Client]:
    """The ``"tools"`` turn runs to its end, then the client sends ``answers`` back to back;
    returns once the agent has applied them all."""
    stub, a = await start(h, "tools", continuations)
    step(1)
    await eventually(lambda: a.done("r1"), what="the turn's end")
    for frame in answers:
        a.send(frame)
    await eventually(lambda: len(a.of(UPDATED)) == len(answers), what="the answers applied")
    return stub, a


def calls_streamed(a: Client, n: int) -> bool:
    return [c["type"] for c in a.chunks("r1")].count("tool-input-available") == n


async def test_answers_sent_while_the_turn_streams_continue_once_after_it_ends(
    doemu_harness: HarnessFactory,
) -> None:
    """Both calls are answered, back to back, while the turn that made them still streams: no
    continuation while it streams, however much time passes; when it ends, one continuation,
    50 ms later, that sees both answers."""
    h = await doemu_harness({"CHAT": Tools})
    stub, a = await start(h, "tools")
    await eventually(lambda: calls_streamed(a, 2), what="both calls")
    a.send(answer("call_1"))
    a.send(answer("call_2"))
    await eventually(lambda: len(a.of(UPDATED)) == 2, what="both answers applied")
    await h.advance(1_000)
    assert continuations() == [] and a.done("r1") is None  # held by the streaming turn
    step(1)
    await eventually(lambda: a.done("r1"), what="the turn's end")
    assert continuations() == []  # the clock stands still: the 50 ms have not passed
    await h.advance(49)
    assert continuations() == []
    await h.advance(1)
    await eventually(lambda: continuation_ends(a), what="the continuation's end")
    assert continuations() == [["output-available", "output-available"]]
    await h.advance(1_000)
    assert len(continuations()) == 1 and len(continuation_ends(a)) == 1
    (message,) = [m for m in await stored(stub) if m["role"] == "assistant"]
    assert text_of(message) == "It is sunny."  # continued in the same message


async def test_a_burst_of_answers_to_a_finished_turn_continues_once(
    doemu_harness: HarnessFactory,
) -> None:
    """The turn has ended; both answers arrive back to back. The second re-arms the wait the
    first started, so there is one continuation, and ``wait_until_stable`` counts it: it does
    not report the agent idle while the continuation is only armed."""
    h = await doemu_harness({"CHAT": Tools})
    stub, a = await answered_after_the_turn(h, answer("call_1"), answer("call_2"))
    assert await stub.stable(0.05) is False  # armed: not idle (and the clock stands still)
    assert continuations() == []
    await h.advance(50)
    assert await stub.stable(5) is True  # returns once the continuation has run
    assert continuations() == [["output-available", "output-available"]]
    assert len(continuation_ends(a)) == 1
    await h.advance(1_000)
    assert len(continuations()) == 1


async def test_an_answer_to_a_partial_batch_waits_for_its_sibling(
    doemu_harness: HarnessFactory,
) -> None:
    """The first call is answered (``autoContinue``) before the model has even streamed the
    second. Nothing runs while the turn streams, nor once it ends with the second call
    unanswered — however long that takes. The sibling's answer completes the batch and, even
    without ``autoContinue`` of its own, brings the one continuation, which sees both."""
    h = await doemu_harness({"CHAT": Tools})
    stub, a = await start(h, "split")
    await eventually(lambda: calls_streamed(a, 1), what="the first call")
    a.send(answer("call_1"))
    await eventually(lambda: len(a.of(UPDATED)) == 1, what="the first answer applied")
    await h.advance(1_000)
    step(2)  # the second call, then the turn's end
    await eventually(lambda: a.done("r1"), what="the turn's end")
    await h.advance(60_000)
    assert continuations() == []
    assert await stub.stable(0.05) is False  # waiting for the client, not for a timer
    a.send(answer("call_2", auto=False))
    await eventually(lambda: len(a.of(UPDATED)) == 2, what="the second answer applied")
    await h.advance(50)
    await eventually(lambda: continuation_ends(a), what="the continuation's end")
    assert continuations() == [["output-available", "output-available"]]
    await h.advance(1_000)
    assert len(continuation_ends(a)) == 1


async def test_an_answer_without_auto_continue_never_continues_by_itself(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"CHAT": Tools})
    stub, a = await answered_after_the_turn(
        h, answer("call_1", auto=False), answer("call_2", auto=False)
    )
    await h.advance(1_000)
    assert await stub.stable(5) is True
    assert continuations() == [] and continuation_ends(a) == []


async def test_answers_during_the_continuation_make_one_follow_up(
    doemu_harness: HarnessFactory,
) -> None:
    """The continuation itself calls two more tools and pauses. Its calls are answered while it
    streams — after it read the transcript — so they cannot be part of it: they defer into one
    follow-up continuation, which runs once the first has completed and sees all four answers."""
    h = await doemu_harness({"CHAT": Tools})
    more_calls: Script = [
        ToolCall("getWeather", {"city": "Oslo"}, call_id="call_3"),
        ToolCall("getWeather", {"city": "Bern"}, call_id="call_4"),
        Delay(1),
    ]
    stub, a = await answered_after_the_turn(
        h, answer("call_1"), answer("call_2"), continuations=[more_calls]
    )
    await h.advance(50)
    await eventually(
        lambda: [c["type"] for c in _continuation_chunks(a)].count("tool-input-available") == 2,
        what="the continuation's calls",
    )
    a.send(answer("call_3"))
    a.send(answer("call_4"))
    await eventually(lambda: len(a.of(UPDATED)) == 4, what="its calls answered")
    await h.advance(1_000)
    assert len(continuations()) == 1 and continuation_ends(a) == []  # still streaming
    step(1)
    await eventually(lambda: continuation_ends(a), what="the first continuation's end")
    assert len(continuations()) == 1  # the follow-up waits its 50 ms
    await h.advance(50)
    await eventually(lambda: len(continuation_ends(a)) == 2, what="the follow-up's end")
    assert continuations() == [["output-available"] * 2, ["output-available"] * 4]
    await h.advance(1_000)
    assert len(continuations()) == 2 and len(continuation_ends(a)) == 2
    (message,) = [m for m in await stored(stub) if m["role"] == "assistant"]
    assert text_of(message) == "It is sunny."


def _continuation_chunks(a: Client) -> list[dict[str, Any]]:
    return [
        json.loads(f["body"])
        for f in a.of("cf_agent_use_chat_response")
        if f.get("continuation") and f["body"] and not f["done"]
    ]


async def test_a_user_turn_in_between_drops_the_held_continuation(
    doemu_harness: HarnessFactory,
) -> None:
    """A continuation held on an incomplete batch belongs to that assistant message: the user
    moves on instead (a new message, whose turn repairs the unanswered call), and the held
    continuation must not continue the new reply once that turn ends."""
    h = await doemu_harness({"CHAT": Tools})
    stub, a = await answered_after_the_turn(h, answer("call_1"))
    await h.advance(50)  # held: call_2 waits
    a.send(request("r2", "hi", "u2"))
    await eventually(lambda: a.done("r2"), what="the user's turn")
    await h.advance(1_000)
    assert await stub.stable(5) is True
    assert continuations() == [] and continuation_ends(a) == []
    assert [m["role"] for m in await stored(stub)] == ["user", "assistant"] * 2


async def test_an_approval_with_auto_continue_continues(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"CHAT": Tools})
    _, a = await start(h, "approve")
    await eventually(lambda: a.done("r1"), what="the approval request")
    a.send({"type": "cf_agent_tool_approval", "toolCallId": "call_a", "approved": True,
            "autoContinue": True})  # fmt: skip
    await eventually(lambda: a.of(UPDATED), what="the approval applied")
    await h.advance(50)
    await eventually(lambda: continuation_ends(a), what="the continuation's end")
    assert continuations() == [["approval-responded"]]


async def test_a_clear_drops_the_scheduled_continuation(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"CHAT": Tools})
    stub, a = await answered_after_the_turn(h, answer("call_1"), answer("call_2"))
    a.send({"type": "cf_agent_chat_clear"})  # before the 50 ms are up: the clock stands still
    await eventually(lambda: _empty(stub), what="the clear")
    await h.advance(1_000)
    assert await stub.stable(5) is True
    assert continuations() == [] and await stored(stub) == []


async def _empty(stub: Any) -> bool:
    return await stored(stub) == []


def probe(probe_id: str) -> dict[str, Any]:
    return {"type": "cf_agent_stream_resume_request", "probeId": probe_id}


def answers_to(client: Client, probe_id: str) -> list[dict[str, Any]]:
    return [f for f in client.frames if f.get("probeId") == probe_id]


async def test_the_tab_that_asked_sees_the_continuation_live_and_is_told_idle(
    doemu_harness: HarnessFactory,
) -> None:
    """Cloudflare's hook probes (``cf_agent_stream_resume_request``) right after it sends an
    answer with ``autoContinue``. That tab was never left out of the live frames, so its probe
    is told ``idle`` — before the continuation starts and while it streams — and it gets every
    chunk live; parked and replayed (the package's way) the published hook could not apply an
    approved call's output. Another tab's probe is answered as always: ``resuming``."""
    h = await doemu_harness({"CHAT": Tools})
    stub, a = await start(h, "approve", [[Text("It is "), Delay(1), Text("sunny.")]])
    await eventually(lambda: a.done("r1"), what="the approval request")
    a.send({"type": "cf_agent_tool_approval", "toolCallId": "call_a", "approved": True,
            "autoContinue": True})  # fmt: skip
    a.send(probe("early"))
    await eventually(lambda: answers_to(a, "early"), what="the early probe's answer")
    await h.advance(50)
    await eventually(lambda: _streamed(a, "It is "), what="the continuation's first words")
    a.send(probe("late"))
    b = await connect(stub, "b")
    b.send(probe("other"))
    await eventually(lambda: answers_to(a, "late") and answers_to(b, "other"), what="answers")
    idle = {"type": "cf_agent_stream_resume_none", "reason": "idle"}
    assert answers_to(a, "early") == [{**idle, "probeId": "early"}]
    assert answers_to(a, "late") == [{**idle, "probeId": "late"}]
    (resuming,) = answers_to(b, "other")
    assert resuming["type"] == "cf_agent_stream_resuming"
    step(1)
    await eventually(lambda: continuation_ends(a), what="the continuation's end")
    live = [f for f in a.of("cf_agent_use_chat_response") if f.get("continuation")]
    assert not any(f.get("replay") for f in live)  # all of it live, none replayed
    assert "".join(c.get("delta", "") for c in _bodies(live)) == "It is sunny."
    assert continuations() == [["approval-responded"]]


def _bodies(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [json.loads(f["body"]) for f in frames if f.get("body")]


def _streamed(client: Client, text: str) -> bool:
    frames = [f for f in client.of("cf_agent_use_chat_response") if f.get("continuation")]
    return any(c.get("delta") == text for c in _bodies(frames))
