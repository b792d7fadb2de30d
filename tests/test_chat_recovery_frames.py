"""Recovery frames in the published package's order and count (issue 28, items 1–4).

Observed on ``@cloudflare/ai-chat`` 0.12.2: a stall announces ``cf_agent_chat_recovering
{recovering: true}`` *before* the turn's ``done`` (``outcome: "recovering"``), once per incident
however many continuations stall; every ``done`` of the chain and the terminal error carry the
original user message ids (``messageIds``); when recovery gives up the client gets
``recovering: false``, the transcript, then the terminal error — and no plain ``done``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from agents.chat.recovery import ChatRecoveryConfig
from doemu.testing.plugin import HarnessFactory

from .polling import eventually
from .test_chat_agent import connect, request
from .test_chat_recovery import Recovering, StallsEveryTime, _steps, transcript

__all__ = ["_steps"]

TERMINAL = "The assistant was interrupted and could not recover. Please try again."


class StallsTwice(StallsEveryTime):
    exhausted: ClassVar[list[Any]] = []
    chat_recovery = ChatRecoveryConfig(
        max_attempts=2, on_exhausted=lambda ctx: StallsTwice.exhausted.append(ctx)
    )


def _summary(frames: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The control frames in order: recovering flags, transcripts, dones and errors."""
    out: list[tuple[Any, ...]] = []
    for f in frames:
        kind = f.get("type")
        if kind == "cf_agent_chat_recovering":
            out.append(("recovering", f["recovering"]))
        elif kind == "cf_agent_chat_messages":
            out.append(("messages", len(f["messages"])))
        elif kind == "cf_agent_use_chat_response" and (f["done"] or f.get("error")):
            out.append(
                ("error" if f.get("error") else "done", f.get("outcome"),
                 bool(f.get("continuation")), tuple(f.get("messageIds") or ()))
            )  # fmt: skip
    return out


async def test_a_stall_chain_frames_as_the_package_does(doemu_harness: HarnessFactory) -> None:
    Recovering.recoveries = []
    StallsTwice.exhausted = []
    h = await doemu_harness({"CHAT": StallsTwice})
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    b = await connect(stub, "b")  # a watcher: it also gets the transcripts the sender is spared
    a.send(request("r1", "hi", "u1"))
    await eventually(lambda: len(a.chunks("r1")) == 3, what="the first word")
    for stall in range(1, 5):
        await h.advance(1_000)
        await eventually(
            lambda: StallsTwice.exhausted or _done_count(a) >= stall,  # noqa: B023
            what=f"stall {stall}",
        )
        if StallsTwice.exhausted:
            break
    await eventually(lambda: _summary(a.frames)[-1][0] == "error", what="the terminal frame")
    u1 = ("u1",)
    assert _summary(a.frames) == [
        ("recovering", True),
        ("done", "recovering", False, u1),
        ("messages", 2),  # the continuation's partial, to everyone (no sender)
        ("done", "recovering", True, u1),
        ("recovering", False),
        ("messages", 2),
        ("error", None, False, u1),
    ]
    assert _summary(b.frames)[-3:] == [("recovering", False), ("messages", 2), ("error", None,
                                       False, u1)]  # fmt: skip
    terminal = [f for f in a.of("cf_agent_use_chat_response") if f.get("error")]
    assert [f["body"] for f in terminal] == [TERMINAL]
    assert len(await transcript(stub)) == 2


def _done_count(a: Any) -> int:
    return sum(1 for f in a.of("cf_agent_use_chat_response") if f["done"])
