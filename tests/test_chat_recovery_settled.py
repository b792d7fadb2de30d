"""``on_chat_recovery`` → ``{"persist": False}`` never throws settled work away (issue 32, item 2;
the SDK's rule, cloudflare/agents#1631): a server tool that completed before the kill keeps its
call and result; only the unsettled text after it is dropped, and recovery continues from there
instead of answering the user from scratch (which would run the tool again).
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from agents.chat import ChatMessageOptions, tool_call
from doemu.testing.plugin import HarnessFactory

from .polling import eventually
from .test_chat_agent import connect, request
from .test_chat_recovery import Recovering, _steps, transcript

__all__ = ["_steps"]


class ToolThenDies(Recovering):
    """First turn: a server tool runs (its result is stored at once), then a few words, then the
    process dies. The continuation says "Done." once it sees the tool's result."""

    seen: ClassVar[list[tuple[bool, list[str]]]] = []
    runs: ClassVar[int] = 0

    async def on_chat_recovery(self, ctx: Any) -> Any:
        Recovering.recoveries.append(ctx)
        return {"persist": False}

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        states = [
            str(p.get("state"))
            for m in self.messages
            for p in m.get("parts", [])
            if p.get("toolCallId")
        ]
        ToolThenDies.seen.append((options.continuation, states))

        async def chunks() -> Any:
            yield {"type": "start"}
            yield {"type": "start-step"}
            if not options.continuation:
                ToolThenDies.runs += 1  # the side effect
                for chunk in tool_call("charge", {"amount": 5}, tool_call_id="call_1",
                                       output={"receipt": "r-1"}):  # fmt: skip
                    yield chunk
                yield {"type": "finish-step"}
                yield {"type": "start-step"}
                yield {"type": "text-start", "id": "t"}
                for i in range(12):
                    yield {"type": "text-delta", "id": "t", "delta": f"x{i} "}
                await asyncio.Event().wait()  # killed here
            yield {"type": "text-start", "id": "t2"}
            yield {"type": "text-delta", "id": "t2", "delta": "Done."}
            yield {"type": "text-end", "id": "t2"}
            yield {"type": "finish-step"}
            yield {"type": "finish"}

        return chunks()


async def test_persist_false_keeps_a_completed_tool_and_drops_only_the_text_after_it(
    doemu_harness: HarnessFactory,
) -> None:
    Recovering.recoveries, ToolThenDies.seen, ToolThenDies.runs = [], [], 0
    h = await doemu_harness({"CHAT": ToolThenDies})
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    a.send(request("r1", "pay", "u1"))
    await eventually(lambda: len(a.chunks("r1")) >= 18, what="the tool and more than ten chunks")
    h.reset("CHAT", "room", "simulated crash")
    stored = await transcript(stub)
    (ctx,) = Recovering.recoveries
    assert "x0" in ctx.partial_text  # the dropped text was there
    assert [m["role"] for m in stored] == ["user", "assistant"]
    parts = stored[1]["parts"]
    assert [p["type"] for p in parts] == ["step-start", "tool-charge"]
    assert parts[1]["state"] == "output-available" and parts[1]["output"] == {"receipt": "r-1"}
    await h.advance(1)
    await eventually(lambda: _done(stub), what="the continuation")
    stored = await transcript(stub)
    assert [m["role"] for m in stored] == ["user", "assistant"]
    texts = [p.get("text") for p in stored[1]["parts"] if p["type"] == "text"]
    assert texts == ["Done."]
    assert ToolThenDies.runs == 1  # the tool ran once: recovery continued after its result
    assert ToolThenDies.seen[-1] == (True, ["output-available"])


async def _done(stub: Any) -> bool:
    stored = await transcript(stub)
    return len(stored) == 2 and any(p.get("text") == "Done." for p in stored[1]["parts"])
