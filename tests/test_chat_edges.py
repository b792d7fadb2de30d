"""``AIChatAgent`` in process: who gets what when a turn ends while a client waits to resume.

A connection told ``cf_agent_stream_resuming`` that has not acknowledged is left out of every
chat broadcast — until the stream ends. The published package (research §1.4) empties that
pending set as the stream finishes or errors (``_afterStreamFinished``, ``_markStreamError``),
*before* it persists the assistant message, and holds the terminal frames until after that
persist. So a client that never acknowledged still ends with the transcript and the terminal
frames (seen live after a restart: "got the continuation's final snapshot, its done frame"), and
every other client gets the persisted partial *before* the in-band error frame (R4a), not after.

The model is a scripted one whose sleeps wait for :func:`step`, so each test decides where in the
stream a client joins.
"""

from __future__ import annotations

import json
from typing import Any

from agents.chat import AIChatAgent, ChatMessageOptions
from agents.chat.streams.scripted import Delay, Fail, Raise, ScriptedModel, Text, ToolCall
from doemu.testing.plugin import HarnessFactory

from .chat_steps import _steps, gated_sleep, step
from .polling import eventually

__all__ = ["_steps"]  # the autouse fixture: a fresh step queue per test

RESPONSE = "cf_agent_use_chat_response"
MESSAGES = "cf_agent_chat_messages"
CONNECT_FRAMES = ["cf_agent_stream_resuming", "cf_agent_identity", "cf_agent_mcp_servers"]


SLOW = Text(*(f"w{i} " for i in range(6)), delay_ms=1)


class Chat(AIChatAgent):
    """The model's scripts: "slow" is six words, one per step; "slowboom" three words, then an
    in-band error; "slowthrow" three words, then the stream raises; "tools" two client tool
    calls, then a step's pause before the reply ends; "approve" a call awaiting approval."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        words = Text("w0 ", "w1 ", "w2 ", delay_ms=1)
        self.model = ScriptedModel.by_last_user_text(
            {
                "slow": [SLOW],
                "slowboom": [words, Fail("custom error: model exploded")],
                "slowthrow": [words, Raise(RuntimeError("provider gone"))],
                "tools": [
                    ToolCall("getWeather", {"city": "Paris"}),
                    ToolCall("getWeather", {"city": "Rome"}),
                    Delay(1),
                ],
                "approve": [
                    ToolCall(
                        "dangerous",
                        {"x": 21},
                        call_id="call_a",
                        stream_input=False,
                        approval_id="approval_1",
                    )
                ],
            },
            default=[Text("Hello")],
            sleep=gated_sleep,
        )

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        return self.model.response(self.messages, abort=options.abort_signal)

    async def pending_interaction(self) -> bool:
        return self.has_pending_interaction()


class Client:
    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.frames: list[dict[str, Any]] = []
        ws.accept()
        ws.addEventListener("message", lambda event: self.frames.append(json.loads(event.data)))

    def send(self, frame: dict[str, Any]) -> None:
        self.ws.send(json.dumps(frame))

    def responses(self, request_id: str) -> list[dict[str, Any]]:
        return [f for f in self.frames if f.get("type") == RESPONSE and f["id"] == request_id]

    def ended(self, request_id: str) -> bool:
        return any(f["done"] for f in self.responses(request_id))

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [f for f in self.frames if f.get("type") == kind]

    def chunk_types(self, request_id: str) -> list[str]:
        return [json.loads(f["body"])["type"] for f in self.responses(request_id) if f["body"]]

    def kinds(self) -> list[str]:
        """Each frame's type; a response frame as ``chunk``, ``error`` or ``done``."""
        out = []
        for f in self.frames:
            if f.get("type") != RESPONSE:
                out.append(f["type"])
            else:
                out.append("done" if f["done"] else "error" if f.get("error") else "chunk")
        return out


async def connect(stub: Any, pk: str) -> Client:
    response = await stub.fetch(
        f"http://doemu/agents/chat/room?_pk={pk}", headers={"Upgrade": "websocket"}
    )
    return Client(response._web_socket)


def request(request_id: str, text: str, message_id: str) -> dict[str, Any]:
    body = {
        "messages": [{"parts": [{"type": "text", "text": text}], "id": message_id, "role": "user"}],
        "trigger": "submit-message",
    }
    return {
        "id": request_id,
        "init": {"method": "POST", "body": json.dumps(body)},
        "type": "cf_agent_use_chat_request",
    }


async def stored(stub: Any) -> list[dict[str, Any]]:
    response = await stub.fetch("http://doemu/agents/chat/room/get-messages")
    messages: list[dict[str, Any]] = json.loads(await response.text())
    return messages


async def start_and_join(h: Any, text: str) -> tuple[Any, Client, Client, Client]:
    """A asks, B watches from the start, C joins mid-stream (told ``resuming``, never acks)."""
    stub = h.env.CHAT.getByName("room")
    a, b = await connect(stub, "a"), await connect(stub, "b")
    a.send(request("r1", text, "u1"))
    step(1)
    await eventually(lambda: len(a.responses("r1")) >= 5, what="the first words")
    c = await connect(stub, "c")
    assert [f["type"] for f in c.frames] == CONNECT_FRAMES
    return stub, a, b, c


async def test_a_connection_that_never_acks_gets_the_final_transcript_then_done(
    doemu_harness: HarnessFactory,
) -> None:
    """C joined mid-stream and never acknowledged: no live chunk reaches it, but when the
    stream ends it gets the turn's transcript and then ``done``, as every other watcher does."""
    h = await doemu_harness({"CHAT": Chat})
    stub, a, b, c = await start_and_join(h, "slow")
    step(10)
    await eventually(lambda: a.ended("r1") and c.ended("r1"), what="the end on A and C")
    assert c.kinds() == [*CONNECT_FRAMES, MESSAGES, "done"]
    transcript = c.frames[3]["messages"]
    assert transcript == await stored(stub)
    assert [m["role"] for m in transcript] == ["user", "assistant"]
    assert transcript[1]["parts"][-1]["text"] == "".join(f"w{i} " for i in range(6))
    assert b.kinds()[-2:] == [MESSAGES, "done"]
    assert c.frames[-1] == b.frames[-1] == a.frames[-1]


async def test_an_in_band_error_comes_after_the_persisted_partial_for_everyone(
    doemu_harness: HarnessFactory,
) -> None:
    """The model reports an error after three words. B (watching) gets the partial transcript,
    then the error frame (R4a), then ``done`` with ``outcome: "error"`` (R4b) — the SDK's order;
    C, which never acknowledged, gets the same three frames."""
    h = await doemu_harness({"CHAT": Chat})
    stub, a, b, c = await start_and_join(h, "slowboom")
    step(10)
    await eventually(lambda: a.ended("r1") and c.ended("r1"), what="the end on A and C")
    assert b.kinds()[-3:] == [MESSAGES, "error", "done"]
    assert c.kinds() == [*CONNECT_FRAMES, MESSAGES, "error", "done"]
    assert a.kinds()[-2:] == ["error", "done"]  # the sender is sent no transcript
    error, done = c.frames[-2:]
    assert error == {
        "error": True, "body": "custom error: model exploded", "done": False, "id": "r1",
        "type": RESPONSE, "messageIds": ["u1"],
    }  # fmt: skip
    assert done == {
        "body": "", "done": True, "id": "r1", "type": RESPONSE, "outcome": "error",
        "messageIds": ["u1"],
    }  # fmt: skip
    partial = c.frames[3]["messages"]
    assert partial == await stored(stub)
    assert partial[1]["parts"][-1]["text"] == "w0 w1 w2 "


async def test_a_stream_that_raises_reaches_a_connection_that_never_acked(
    doemu_harness: HarnessFactory,
) -> None:
    """The reply stream raises after three words: the partial is kept and C, which never
    acknowledged, gets it and the error frame that ends the request."""
    h = await doemu_harness({"CHAT": Chat})
    stub, a, b, c = await start_and_join(h, "slowthrow")
    step(10)
    await eventually(lambda: a.ended("r1") and c.ended("r1"), what="the end on A and C")
    assert c.kinds() == [*CONNECT_FRAMES, MESSAGES, "done"]
    assert c.frames[-1]["error"] is True and "provider gone" in c.frames[-1]["body"]
    assert c.frames[3]["messages"] == await stored(stub)
    assert b.kinds()[-2:] == [MESSAGES, "done"]


# -- tool results while the turn that made the call still streams -----------------------------

UPDATED = "cf_agent_message_updated"


def tool_result(call_id: str, city: str) -> dict[str, Any]:
    return {"type": "cf_agent_tool_result", "toolCallId": call_id, "toolName": "getWeather",
            "output": {"city": city, "temp": 21}}  # fmt: skip


async def test_a_tool_result_sent_while_its_turn_still_streams_is_applied_and_kept(
    doemu_harness: HarnessFactory,
) -> None:
    """A client answers a tool call as soon as its ``tool-input-available`` chunk arrives, while
    the turn that made the call is still streaming (its message not persisted yet). As in the
    SDK (``_findAndUpdateToolPart`` looks in ``_streamingMessage`` first, §5.6), the answer is
    applied to the streaming message in place and ``cf_agent_message_updated`` goes to everyone;
    it is persisted with the message when the turn ends. A repeated answer changes nothing.
    ``has_pending_interaction`` counts the streaming message (§5.8): true while a call of the
    streaming message waits, false once both are answered. Before the fix the answer was
    dropped as "unknown call" and the stored part stayed ``input-available``."""
    h = await doemu_harness({"CHAT": Chat})
    stub = h.env.CHAT.getByName("room")
    a, b = await connect(stub, "a"), await connect(stub, "b")
    a.send(request("r1", "tools", "u1"))
    await eventually(
        lambda: a.chunk_types("r1").count("tool-input-available") == 2, what="both calls"
    )
    assert await stub.pending_interaction() is True  # nothing stored has a call yet
    a.send(tool_result("call_1", "Paris"))
    await eventually(lambda: len(b.of(UPDATED)) == 1, what="the first update")
    assert await stub.pending_interaction() is True  # call_2 still waits
    a.send(tool_result("call_1", "Elsewhere"))  # a second answer: the first one wins
    a.send(tool_result("call_2", "Rome"))
    await eventually(lambda: len(b.of(UPDATED)) == 2, what="the second update")
    assert await stub.pending_interaction() is False
    assert a.of(UPDATED) == b.of(UPDATED)
    first, second = (f["message"] for f in b.of(UPDATED))
    assert [p.get("state") for p in first["parts"] if "toolCallId" in p] == [
        "output-available",
        "input-available",
    ]
    assert [p.get("state") for p in second["parts"] if "toolCallId" in p] == [
        "output-available",
        "output-available",
    ]
    assert not a.ended("r1")
    step(5)
    await eventually(lambda: a.ended("r1"), what="the turn's end")
    message = (await stored(stub))[-1]
    assert message["id"] == second["id"]
    calls = [p for p in message["parts"] if "toolCallId" in p]
    assert [(p["state"], p["output"]["city"], p["preliminary"]) for p in calls] == [
        ("output-available", "Paris", False),
        ("output-available", "Rome", False),
    ]
    assert len(b.of(UPDATED)) == 2


async def test_a_second_conflicting_approval_is_ignored(doemu_harness: HarnessFactory) -> None:
    """An approval answers a part in ``input-available`` or ``approval-requested`` only (the
    SDK's ``_applyToolApproval``): once approved (``approval-responded``), a later denial is a
    no-op — no write, no frame. (A tool *result* may still answer an approved part.)"""
    h = await doemu_harness({"CHAT": Chat})
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    a.send(request("r1", "approve", "u1"))
    await eventually(lambda: a.ended("r1"), what="the approval request")
    approval = {"type": "cf_agent_tool_approval", "toolCallId": "call_a"}
    a.send({**approval, "approved": True})
    await eventually(lambda: len(a.of(UPDATED)) == 1, what="the approval")
    a.send({**approval, "approved": False})
    a.send(tool_result("call_a", "n/a"))
    await eventually(lambda: len(a.of(UPDATED)) == 2, what="the tool result")
    part = (await stored(stub))[-1]["parts"][-1]
    assert part["state"] == "output-available"
    assert part["approval"] == {"id": "approval_1", "approved": True}
