"""``message_concurrency`` and the transcript rules around turns, in process.

Each test holds a first "slow" turn open (the scripted model takes one step per :func:`step`),
sends overlapping submits while it streams, then lets it finish and checks what ran, what was
skipped and what the transcript holds — the published SDK's answers (research §5.2, §3.3, §5.7).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from agents.chat.streams.scripted import Delay, ScriptedModel, ToolCall
from doemu.testing.plugin import HarnessFactory

from .polling import eventually
from .test_chat_agent import Chat, Client, _steps, connect, gated_sleep, request, step

__all__ = ["_steps"]  # the autouse fixture that gives every test its own steps


class Latest(Chat):
    message_concurrency = "latest"


class Merge(Chat):
    message_concurrency = "merge"


class Drop(Chat):
    message_concurrency = "drop"


class Debounce(Chat):
    message_concurrency: ClassVar[Any] = {"strategy": "debounce", "debounceMs": 500}


async def transcript(stub: Any) -> list[dict[str, Any]]:
    response = await stub.fetch("http://doemu/agents/chat/room/get-messages")
    messages: list[dict[str, Any]] = json.loads(await response.text())
    return messages


def texts(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (m["role"], "".join(p.get("text", "") for p in m["parts"] if p["type"] == "text"))
        for m in messages
    ]


async def overlapping(h: Any, *texts_: str) -> tuple[Any, Client]:
    """A slow turn r1 in flight, then submits r2, r3… with ``texts_`` while it streams."""
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    a.send(request("r1", "slow", "u1"))
    step(1)
    await eventually(lambda: len(a.chunks("r1")) >= 4, what="the first turn streaming")
    for i, text in enumerate(texts_, start=2):
        a.send(request(f"r{i}", text, f"u{i}"))
    return stub, a


def skipped(a: Client, request_id: str) -> bool:
    done = a.done(request_id)
    return done is not None and done.get("outcome") == "skipped"


async def test_queue_runs_every_overlapping_submit_in_order(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"CHAT": Chat})
    stub, a = await overlapping(h, "hi", "hi")
    step(40)
    await eventually(lambda: a.done("r3"), what="the last queued turn")
    assert not skipped(a, "r2") and a.chunks("r2") and a.chunks("r3")
    roles = [role for role, _ in texts(await transcript(stub))]
    assert roles == ["user", "user", "user", "assistant", "assistant", "assistant"]


async def test_latest_runs_only_the_newest_overlapping_submit(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"CHAT": Latest})
    stub, a = await overlapping(h, "hi", "hi")
    step(40)
    await eventually(lambda: a.done("r3"), what="the newest turn")
    assert skipped(a, "r2") and a.chunks("r2") == []
    assert a.done("r2")["messageIds"] == ["u2"]  # type: ignore[index]
    assert not skipped(a, "r3") and a.chunks("r3")
    stored = texts(await transcript(stub))
    assert [role for role, _ in stored].count("user") == 3  # the skipped submit is kept


async def test_merge_collapses_the_queued_user_messages_into_the_newest(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"CHAT": Merge})
    stub, a = await overlapping(h, "hi", "there")
    await eventually(
        lambda: any(
            [m["id"] for m in f["messages"]] == ["u1", "u3"] for f in a.of("cf_agent_chat_messages")
        ),
        what="the merged transcript broadcast to everyone, the sender too",
    )
    step(40)
    await eventually(lambda: a.done("r3"), what="the surviving turn")
    assert skipped(a, "r2")
    stored = await transcript(stub)
    assert [m["id"] for m in stored if m["role"] == "user"] == ["u1", "u3"]
    merged = next(m for m in stored if m["id"] == "u3")
    assert merged["parts"] == [{"type": "text", "text": "hi\n\nthere"}]


async def test_drop_refuses_an_overlapping_submit_and_persists_nothing(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"CHAT": Drop})
    stub, a = await overlapping(h, "hi")
    await eventually(lambda: skipped(a, "r2"), what="the refusal")
    rollback = a.of("cf_agent_chat_messages")[-1]["messages"]
    assert [m["id"] for m in rollback] == ["u1"]
    step(40)
    await eventually(lambda: a.done("r1"), what="the first turn's end")
    assert [m["id"] for m in await transcript(stub) if m["role"] == "user"] == ["u1"]


async def test_debounce_waits_on_the_agents_clock_then_runs_the_newest(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"CHAT": Debounce})
    _, a = await overlapping(h, "slow", "slow")
    step(30)
    await eventually(lambda: a.done("r1") and skipped(a, "r2"), what="r1 done, r2 superseded")
    assert a.chunks("r3") == []  # time stands still: the debounce has not run out
    await h.advance(500)
    step(30)
    await eventually(lambda: a.done("r3"), what="the debounced turn")
    assert [c["type"] for c in a.chunks("r3")][:2] == ["start", "start-step"]


async def test_a_regenerate_trims_what_the_request_left_out(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"CHAT": Chat})
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    a.send(request("r1", "hi", "u1"))
    await eventually(lambda: a.done("r1"), what="the first turn")
    a.send(request("r2", "hi", "u2"))
    await eventually(lambda: a.done("r2"), what="the second turn")
    assert len(await transcript(stub)) == 4
    first = (await transcript(stub))[0]
    regenerate = request("r3", "hi", "u1", trigger="regenerate-message")
    body = json.loads(regenerate["init"]["body"])
    body["messages"] = [first]
    regenerate["init"]["body"] = json.dumps(body)
    a.send(regenerate)
    await eventually(lambda: a.done("r3"), what="the regenerated answer")
    stored = await transcript(stub)
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[0]["id"] == "u1"


class Approvals(Chat):
    """The model asks for an approval, then pauses (one :func:`step`) before the step ends."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ask = ToolCall(
            "dangerous", {"x": 21}, call_id="call_a", stream_input=False, approval_id="approval_1"
        )
        self.model = ScriptedModel.by_last_user_text({}, default=[ask, Delay(1)], sleep=gated_sleep)


async def test_an_approval_request_persists_the_message_before_the_stream_ends(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"CHAT": Approvals})
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    a.send(request("r1", "approve", "u1"))
    await eventually(
        lambda: any(c["type"] == "tool-approval-request" for c in a.chunks("r1")),
        what="the approval request",
    )
    assert a.done("r1") is None  # the stream is still open
    stored = await transcript(stub)
    part = next(p for p in stored[-1]["parts"] if p.get("toolCallId") == "call_a")
    assert part["state"] == "approval-requested"
    assert part["approval"] == {"id": "approval_1"}
    assert a.of("cf_agent_chat_messages") == []  # persisted early without a broadcast
    step(1)
    await eventually(lambda: a.done("r1"), what="the turn's end")
    a.send({"type": "cf_agent_tool_approval", "toolCallId": "call_a", "approved": True})
    await eventually(lambda: a.of("cf_agent_message_updated"), what="the approval applied")
    stored = await transcript(stub)
    part = next(p for p in stored[-1]["parts"] if p.get("toolCallId") == "call_a")
    assert part["state"] == "approval-responded"
    assert part["approval"] == {"id": "approval_1", "approved": True}
