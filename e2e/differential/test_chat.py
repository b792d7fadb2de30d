"""examples/chat on doemu and on workerd: a turn, a resumed stream, a turn recovered after a kill.

The chat example's ``ChatAgent`` (an ``AIChatAgent`` on the scripted demo model: "hi" → "Hello,
world", "slow" → "w0 … w24", one word per ``delayMs``) driven by a raw WebSocket client speaking
Cloudflare's chat protocol (:mod:`.chatwire`). Both targets must give the same frames, once the
assistant message ids (a time and random letters) are normalised.

Three faults once kept this from running on Cloudflare's runtime (issue 22): the Worker failed to
load (entropy at import in ``agents.chat``), the route answered 400 (``dir(env)``), and the turn
never ran (a coroutine handed to a Durable Object's ``waitUntil``). The first test fails on
workerd if any comes back.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.polling import eventually_sync

from ..targets import AGENTS_VENDOR, ROOT, TargetServer
from .chatwire import RESPONSE, ChatSocket, chunks, normalised, request_frame, text_of
from .conftest import running

CHAT = ROOT / "examples" / "chat"
SLOW_WORDS = [f"w{i} " for i in range(25)]
#: What the demo model says when asked to continue a cut reply.
SUNNY = "It is sunny."


@pytest.fixture(scope="module")
def chat(serve: Any) -> TargetServer:
    server: TargetServer = serve(CHAT, vendor=AGENTS_VENDOR)
    return server


def socket(server: TargetServer, name: str) -> ChatSocket:
    return ChatSocket(f"{running(server).ws_url}/agents/chat-agent/{name}")


def get_messages(server: TargetServer, name: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{server.url}/agents/chat-agent/{name}/get-messages", timeout=30)
    assert answer.status_code == 200, answer.text
    messages: list[dict[str, Any]] = answer.json()
    return messages


def stored_messages(server: TargetServer, name: str) -> list[dict[str, Any]]:
    """The transcript as committed, read from the object's file (never wakes it)."""
    rows = server.sql(
        "ChatAgent", name, "SELECT message FROM cf_ai_chat_agent_messages ORDER BY seq"
    )
    return [json.loads(row["message"]) for row in rows]


def message_text(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p.get("type") == "text")


def response(seq: int | None, chunk: dict[str, Any], request_id: str = "r1") -> dict[str, Any]:
    frame: dict[str, Any] = {"body": json.dumps(chunk, separators=(",", ":")), "done": False}
    frame |= {"id": request_id, "type": RESPONSE}
    return frame if seq is None else frame | {"seq": seq}


def test_the_page_and_a_turn(chat: TargetServer, target: str) -> None:
    """1. GET / serves the page (the Worker loaded: it imports agents.chat).
    2. "hi" on a WebSocket: identity, MCP servers, then the UI-message chunks of "Hello, world"
       numbered by seq, and done — frame for frame the same on both targets.
    3. get-messages: the user message and the stored assistant reply."""
    page = httpx.get(f"{running(chat).url}/", timeout=30)
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    name = f"turn-{target}"
    with socket(chat, name) as ws:
        ws.send(request_frame("r1", "hi", "u1"))
        ws.until_done("r1")
    text = [("Hello", 3), (", ", 4), ("world", 5)]
    assert normalised(ws.frames) == [
        {"type": "cf_agent_identity", "name": name, "agent": "chat-agent"},
        {
            "type": "cf_agent_mcp_servers",
            "mcp": {"prompts": [], "resources": [], "servers": {}, "tools": []},
        },
        response(0, {"type": "start", "messageId": "<m1>"}),
        response(1, {"type": "start-step"}),
        response(2, {"type": "text-start", "id": "t0"}),
        *(response(seq, {"type": "text-delta", "id": "t0", "delta": d}) for d, seq in text),
        response(6, {"type": "text-end", "id": "t0"}),
        response(7, {"type": "finish-step"}),
        response(8, {"type": "finish", "messageMetadata": {"finishReason": "stop"}}),
        {"body": "", "done": True, "id": "r1", "type": RESPONSE, "messageIds": ["u1"]},
    ]
    assert normalised(get_messages(chat, name)) == [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]},
        {
            "id": "<m1>",
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {"type": "text", "text": "Hello, world", "state": "done"},
            ],
        },
    ]


def test_a_reconnecting_client_resumes_the_stream(chat: TargetServer, target: str) -> None:
    """1. "slow" (25 words, 100 ms apart); the client leaves after six chunks.
    2. A new connection is told `cf_agent_stream_resuming` first; it acknowledges.
    3. It gets every stored chunk again (`replay: true`, seq from 0), the replay's end, then the
       live rest and done: each seq once, the whole text once.
    4. The stored reply is the whole text."""
    name = f"resume-{target}"
    with socket(chat, name) as first:
        first.send(request_frame("r1", "slow", "u1", delay_ms=100))
        first.until(lambda frames: len(chunks(frames, "r1")) >= 6)
    with socket(chat, name) as again:
        again.until(lambda frames: len(frames) >= 3)
        assert [f["type"] for f in again.frames] == [
            "cf_agent_stream_resuming",
            "cf_agent_identity",
            "cf_agent_mcp_servers",
        ]
        assert again.frames[0] == {"type": "cf_agent_stream_resuming", "id": "r1"}
        again.send(json.dumps({"type": "cf_agent_stream_resume_ack", "id": "r1"}))
        again.until_done("r1")
    frames = [f for f in again.frames if f.get("type") == RESPONSE]
    control = next(i for i, f in enumerate(frames) if f.get("replayComplete"))
    replayed, live = frames[:control], frames[control + 1 :]
    assert frames[control] == {
        "body": "",
        "done": False,
        "id": "r1",
        "type": RESPONSE,
        "replay": True,
        "replayComplete": True,
    }
    assert len(replayed) >= 6 and all(f["replay"] is True for f in replayed)
    assert [f["seq"] for f in replayed + live[:-1]] == list(range(len(replayed) + len(live) - 1))
    assert live[-1] == {
        "body": "",
        "done": True,
        "id": "r1",
        "type": RESPONSE,
        "messageIds": ["u1"],
    }
    assert text_of(frames, "r1") == "".join(SLOW_WORDS)
    messages = get_messages(chat, name)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert message_text(messages[1]) == "".join(SLOW_WORDS)


def test_an_interrupted_turn_is_recovered_without_a_request(
    chat: TargetServer, target: str
) -> None:
    """1. "slow"; after 13 words (a block of ten chunks is stored) the server is SIGKILLed.
    2. It restarts on the same state; nobody sends anything.
    3. The keep-alive alarm wakes the chat: the log says the turn is being recovered, and the
       stored transcript ends with ONE assistant message: the first words, then the
       continuation ("It is sunny."), each word once, in order.
    4. get-messages gives the same transcript; the chat goes on ("hi" → "Hello, world")."""
    name = f"recover-{target}"
    with socket(chat, name) as ws:
        ws.send(request_frame("r1", "slow", "u1", delay_ms=100))
        ws.until(lambda frames: text_of(frames, "r1").count(" ") >= 13)
        chat.kill()
    chat.restart()

    def recovered() -> list[dict[str, Any]]:
        messages = stored_messages(chat, name)
        done = len(messages) == 2 and message_text(messages[1]).endswith(SUNNY)
        return messages if done else []

    messages = eventually_sync(recovered, within=60, what="the turn to be recovered")
    chat.wait_for_line(rf"agent {name}: chat turn .* was interrupted; recovering it", within=10)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    words = message_text(messages[1]).removesuffix(SUNNY).split()
    assert 7 <= len(words) < 25 and words == [w.strip() for w in SLOW_WORDS[: len(words)]]
    assert normalised(get_messages(chat, name)) == normalised(messages)
    with socket(chat, name) as ws:
        ws.send(request_frame("r2", "hi", "u2"))
        ws.until_done("r2")
    assert text_of(ws.frames, "r2") == "Hello, world"
