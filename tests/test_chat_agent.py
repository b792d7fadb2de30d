"""``AIChatAgent`` in process: the chat protocol frame by frame, over real WebSocket pairs.

Clients are the client ends of the agent's 101 responses (``stub.fetch`` with ``Upgrade``), so
every frame goes through the agent's real WebSocket path. The model is the scripted demo model;
its ``"slow"`` reply takes one step per :func:`step` the test allows, so a test decides exactly
where in the stream things happen.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agents.chat import AIChatAgent, ChatMessageOptions, demo_model
from doemu.testing.plugin import HarnessFactory

from .chat_steps import _steps, gated_sleep, step
from .polling import eventually

__all__ = ["_steps", "gated_sleep", "step"]  # re-exported for the other chat tests


class Chat(AIChatAgent):
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.model = demo_model(sleep=gated_sleep, delay_ms=1)

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        return self.model.response(self.messages, abort=options.abort_signal)

    async def fiber_rows(self) -> list[dict[str, Any]]:
        return self.sql("SELECT name FROM cf_agents_runs")


class Client:
    """One connection: every frame it received, parsed."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.frames: list[dict[str, Any]] = []
        ws.accept()
        ws.addEventListener("message", lambda event: self.frames.append(json.loads(event.data)))

    def send(self, frame: dict[str, Any]) -> None:
        self.ws.send(json.dumps(frame))

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [f for f in self.frames if f.get("type") == kind]

    def chunks(self, request_id: str) -> list[dict[str, Any]]:
        return [
            json.loads(f["body"])
            for f in self.of("cf_agent_use_chat_response")
            if f["id"] == request_id and f["body"] and not f.get("error")
        ]

    def done(self, request_id: str) -> dict[str, Any] | None:
        return next(
            (f for f in self.of("cf_agent_use_chat_response") if f["id"] == request_id
             and f["done"]),
            None,
        )  # fmt: skip


async def connect(stub: Any, pk: str) -> Client:
    response = await stub.fetch(
        f"http://doemu/agents/chat/room?_pk={pk}", headers={"Upgrade": "websocket"}
    )
    return Client(response._web_socket)


def request(request_id: str, text: str, message_id: str, **extra: Any) -> dict[str, Any]:
    body = {
        "messages": [{"parts": [{"type": "text", "text": text}], "id": message_id, "role": "user"}],
        "trigger": "submit-message",
        **extra,
    }
    return {
        "id": request_id,
        "init": {"method": "POST", "body": json.dumps(body)},
        "type": "cf_agent_use_chat_request",
    }


async def test_a_turn_streams_to_everyone_and_is_persisted(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"CHAT": Chat})
    stub = h.env.CHAT.getByName("room")
    a, b = await connect(stub, "a"), await connect(stub, "b")
    a.send(request("r1", "hi", "u1", foo="bar"))
    await eventually(lambda: a.done("r1") and b.done("r1"), what="the turn's end on both")
    wire = [c["type"] for c in a.chunks("r1")]
    assert wire == [
        "start", "start-step", "text-start", "text-delta", "text-delta", "text-delta",
        "text-end", "finish-step", "finish",
    ]  # fmt: skip
    seqs = [f["seq"] for f in a.of("cf_agent_use_chat_response") if not f["done"]]
    assert seqs == list(range(9))
    assert a.done("r1") == {
        "body": "", "done": True, "id": "r1", "type": "cf_agent_use_chat_response",
        "messageIds": ["u1"],
    }  # fmt: skip
    assert a.chunks("r1")[0]["messageId"].startswith("assistant_")
    assert a.chunks("r1")[-1] == {"type": "finish", "messageMetadata": {"finishReason": "stop"}}
    # The sender gets no transcript; the other connection gets the user message (twice, as the
    # SDK does) before the stream and both messages before the end.
    assert a.of("cf_agent_chat_messages") == []
    snapshots = [len(f["messages"]) for f in b.of("cf_agent_chat_messages")]
    assert snapshots == [1, 1, 2]
    response = await stub.fetch("http://doemu/agents/chat/room/get-messages")
    stored = json.loads(await response.text())
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[1]["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "Hello, world", "state": "done"},
    ]
    assert await stub.fiber_rows() == []  # the turn's fiber is gone


async def test_bad_requests_get_an_error_frame_and_change_nothing(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"CHAT": Chat})
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    a.send({"id": "bad1", "init": {"method": "POST", "body": "{not json"}, "type":
            "cf_agent_use_chat_request"})  # fmt: skip
    a.send({"id": "bad2", "init": {"method": "POST", "body": "{}"}, "type":
            "cf_agent_use_chat_request"})  # fmt: skip
    a.send({"id": "bad3", "init": {"method": "POST", "body": json.dumps(
        {"messages": [{"id": "", "role": "user", "parts": []}]})},
        "type": "cf_agent_use_chat_request"})  # fmt: skip
    a.ws.send("not json at all")
    a.send({"type": "cf_agent_something_else"})
    await eventually(lambda: a.done("bad3"), what="the third refusal")
    errors = {f["id"]: f["body"] for f in a.of("cf_agent_use_chat_response") if f.get("error")}
    assert "not a JSON object" in errors["bad1"]
    assert "messages" in errors["bad2"]
    assert "id" in errors["bad3"]
    response = await stub.fetch("http://doemu/agents/chat/room/get-messages")
    assert json.loads(await response.text()) == []
    a.send(request("r1", "hi", "u1"))  # the agent still answers
    await eventually(lambda: a.done("r1"), what="a normal turn after the bad ones")


async def test_cancel_keeps_the_partial_reply(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"CHAT": Chat})
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    a.send(request("r1", "slow", "u1"))
    step(3)
    await eventually(lambda: len(a.chunks("r1")) >= 5, what="three deltas")
    # No more steps: the cancel must reach the model while it waits for its next one (a step
    # given now could let it finish first).
    a.send({"id": "r1", "type": "cf_agent_chat_request_cancel"})
    await eventually(lambda: a.done("r1"), what="the aborted end")
    assert a.done("r1")["outcome"] == "aborted"  # type: ignore[index]
    response = await stub.fetch("http://doemu/agents/chat/room/get-messages")
    stored = json.loads(await response.text())
    text = stored[-1]["parts"][-1]
    assert text["type"] == "text" and text["text"].startswith("w0 w1 w2")
    assert len(text["text"].split()) < 25


class Stalls(Chat):
    """A model that sends a few words, then waits on an upstream that never answers and never
    looks at the abort signal (a stalled provider read)."""

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        async def chunks() -> Any:
            yield {"type": "start"}
            yield {"type": "text-start", "id": "t"}
            yield {"type": "text-delta", "id": "t", "delta": "partial "}
            await asyncio.Event().wait()  # the provider never sends another byte
            yield {"type": "text-delta", "id": "t", "delta": "never"}

        return chunks()


async def test_cancel_reaches_a_model_stalled_in_a_read(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"CHAT": Stalls})
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    a.send(request("r1", "hi", "u1"))
    await eventually(lambda: len(a.chunks("r1")) == 3, what="the words before the stall")
    a.send({"id": "r1", "type": "cf_agent_chat_request_cancel"})
    await eventually(lambda: a.done("r1"), what="the aborted end")
    done = a.done("r1")
    assert done is not None and done["outcome"] == "aborted" and not done.get("error")
    response = await stub.fetch("http://doemu/agents/chat/room/get-messages")
    stored = json.loads(await response.text())
    assert stored[-1]["parts"][-1]["text"] == "partial "
    a.send(request("r2", "hi", "u2"))  # the queue is free again: the next turn streams
    await eventually(lambda: len(a.chunks("r2")) == 3, what="the next turn's words")


async def test_a_client_that_joins_mid_stream_resumes_through_the_handshake(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"CHAT": Chat})
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    a.send(request("r1", "slow", "u1"))
    step(5)
    await eventually(lambda: len(a.chunks("r1")) >= 7, what="some deltas")
    b = await connect(stub, "b")
    assert b.frames[0] == {"type": "cf_agent_stream_resuming", "id": "r1"}  # before identity
    assert b.frames[1]["type"] == "cf_agent_identity"
    step(2)
    await eventually(lambda: len(a.chunks("r1")) >= 9, what="more deltas while b waits")
    assert b.of("cf_agent_use_chat_response") == []  # nothing live before the ack
    b.send({"type": "cf_agent_stream_resume_ack", "id": "r1"})
    await eventually(
        lambda: any(f.get("replayComplete") for f in b.frames), what="the end of the replay"
    )
    step(40)
    await eventually(lambda: b.done("r1"), what="the live end")
    assert [c for c in b.chunks("r1")] == a.chunks("r1")  # every chunk once, in order
    replayed = [f for f in b.of("cf_agent_use_chat_response") if f.get("replay")]
    assert replayed[0]["seq"] == 0 and replayed[-1]["replayComplete"]


async def test_clear_empties_the_chat_and_tells_the_others(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"CHAT": Chat})
    stub = h.env.CHAT.getByName("room")
    a, b = await connect(stub, "a"), await connect(stub, "b")
    a.send(request("r1", "hi", "u1"))
    await eventually(lambda: a.done("r1"), what="the turn")
    a.send({"type": "cf_agent_chat_clear"})
    await eventually(lambda: b.of("cf_agent_chat_clear"), what="the clear")
    assert a.of("cf_agent_chat_clear") == []
    response = await stub.fetch("http://doemu/agents/chat/room/get-messages")
    assert json.loads(await response.text()) == []


async def test_an_idle_probe_gets_resume_none(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"CHAT": Chat})
    a = await connect(h.env.CHAT.getByName("room"), "a")
    a.send({"type": "cf_agent_stream_resume_request", "probeId": "p1"})
    await eventually(lambda: a.of("cf_agent_stream_resume_none"), what="the answer")
    assert a.of("cf_agent_stream_resume_none") == [
        {"type": "cf_agent_stream_resume_none", "reason": "idle", "probeId": "p1"}
    ]
