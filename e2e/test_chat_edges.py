"""``AIChatAgent`` end to end at its edges: several clients on one stream, and bad input.

One real ``doemu dev`` (module-scoped) serves a copy of ``examples/chat`` (the scripted demo
model: "hi" → "Hello, world", "slow" → 25 words ``delayMs`` apart, "tool" → a client tool
call); the clients are raw WebSockets (``websockets``) and ``httpx``. What each test proves is in
its docstring; the answers are those of the published ``@cloudflare/ai-chat`` 0.12.2 (research
§1.3: malformed and unknown frames get no answer at all), except where the chat layer
deliberately answers an unreadable request with an error frame (``agents/chat/agent.py``).

Every bad-input test runs next to a *bystander*: another chat on the same server with a slow
turn in flight. After each bad input the bystander's transcript (``get-messages``) is what it
was, and at the end every one of its turns streamed to ``done`` with the full text — the proof
that bad input on one Durable Object neither crashes the server nor leaks into another object.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from websockets.exceptions import ConnectionClosed

from tests.polling import eventually

from .harness import DevServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "chat"

RESPONSE = "cf_agent_use_chat_response"
#: The demo model's "slow" reply, reassembled.
SLOW_TEXT = "".join(f"w{i} " for i in range(25))
HELLO = "Hello, world"
#: The demo model's continuation reply.
SUNNY = "It is sunny."


def _start(tmp: Path, *args: str) -> DevServer:
    """``doemu dev`` on a private copy of the chat example (the agents package importable)."""
    project = tmp / "chat"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return DevServer(project, tmp / "state", args=args, env={"PYTHONPATH": path}).start()


def _stop(server: DevServer) -> None:
    if server.proc is not None and server.proc.poll() is None:
        try:
            server.stop(timeout=10)
        except Exception:
            server.kill()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """One server for the module: each test uses its own chats (fresh uuids)."""
    dev = _start(tmp_path_factory.mktemp("chat-edges"))
    try:
        yield dev
    finally:
        _stop(dev)


@pytest.fixture
def clean_log(server: DevServer) -> Iterator[None]:
    """Bad input must not make the server log a traceback (it is answered, not crashed on)."""
    start = len(server.lines)
    yield
    new = "\n".join(server.lines[start:])
    assert "Traceback" not in new, new


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def request_frame(
    request_id: str, text: str, message_id: str, *, delay_ms: int = 0, **body: Any
) -> str:
    """A ``cf_agent_use_chat_request`` as Cloudflare's client sends it (research §2.1)."""
    payload = {
        "messages": [{"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}],
        "trigger": "submit-message",
        "delayMs": delay_ms,
        **body,
    }
    return raw_request(request_id, json.dumps(payload))


def raw_request(request_id: str, body: Any, *, method: str = "POST") -> str:
    init: dict[str, Any] = {"method": method}
    if body is not None:
        init["body"] = body
    return json.dumps({"id": request_id, "type": "cf_agent_use_chat_request", "init": init})


def text_of(frames: list[dict[str, Any]]) -> str:
    """The text a client reassembles from a request's chunk frames (its ``text-delta``s)."""
    text = []
    for frame in frames:
        if frame.get("body") and not frame.get("error"):
            chunk = json.loads(frame["body"])
            if chunk.get("type") == "text-delta":
                text.append(chunk["delta"])
    return "".join(text)


def message_text(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p.get("type") == "text")


class ChatSocket:
    """One raw connection to a chat: every frame it received, in order, raw and decoded."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.raw: list[str] = []
        self.frames: list[dict[str, Any]] = []
        self.closed: ConnectionClosed | None = None
        self._mark = 0
        self._pump = asyncio.ensure_future(self._read())

    @classmethod
    async def open(
        cls, server: DevServer, chat: str, pk: str, *, max_size: int | None = 1 << 20
    ) -> ChatSocket:
        """Connect as party ``pk``; ``max_size`` is the client's own receive limit."""
        url = f"{server.ws_url}/agents/chat-agent/{chat}?_pk={pk}"
        return cls(await websockets.connect(url, max_size=max_size, open_timeout=10))

    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                assert isinstance(raw, str), raw
                self.raw.append(raw)
                self.frames.append(json.loads(raw))
        except ConnectionClosed as exc:
            self.closed = exc

    async def close(self) -> None:
        await self.ws.close()
        await asyncio.gather(self._pump, return_exceptions=True)

    async def send(self, frame: str | bytes) -> None:
        await self.ws.send(frame)

    def responses(self, request_id: str) -> list[dict[str, Any]]:
        return [f for f in self.frames if f.get("type") == RESPONSE and f.get("id") == request_id]

    def chunks(self, request_id: str) -> list[dict[str, Any]]:
        """The request's stream chunks (frames with a body, not an error)."""
        return [f for f in self.responses(request_id) if f["body"] and not f.get("error")]

    async def until(self, predicate: Callable[[], Any], what: str, within: float = 10.0) -> Any:
        return await eventually(predicate, within=within, what=what, interval=0.005)

    async def done(self, request_id: str, within: float = 10.0) -> dict[str, Any]:
        frame: dict[str, Any] = await self.until(
            lambda: next((f for f in self.responses(request_id) if f["done"]), None),
            f"done for {request_id}",
            within,
        )
        return frame

    async def sync(self) -> list[dict[str, Any]]:
        """Every frame that arrived since the last sync (the first time: since the connection
        opened), once the server has handled everything sent before: a probe
        (``cf_agent_stream_resume_request``) is answered in order on this socket, so when its
        answer is here, the answer to any earlier frame is too. Only for an idle chat (a probe
        during a stream would make this a resuming connection)."""
        probe = uuid.uuid4().hex[:8]
        await self.send(json.dumps({"type": "cf_agent_stream_resume_request", "probeId": probe}))
        index: int = await self.until(
            lambda: next(
                (i + 1 for i, f in enumerate(self.frames) if f.get("probeId") == probe), 0
            ),
            "the probe's answer",
        )
        answer = self.frames[index - 1]
        assert answer == {"type": "cf_agent_stream_resume_none", "reason": "idle", "probeId": probe}
        since, self._mark = self._mark, index
        return self.frames[since : index - 1]


async def get_messages(server: DevServer, chat: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.get(f"{server.url}/agents/chat-agent/{chat}/get-messages")
    response.raise_for_status()
    messages: list[dict[str, Any]] = response.json()
    return messages


async def sql(server: DevServer, chat: str, query: str) -> list[list[Any]]:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            f"{server.url}/__doemu/api/objects/ChatAgent/{chat}/sql", json={"query": query}
        )
    response.raise_for_status()
    rows: list[list[Any]] = response.json()["rows"]
    return rows


async def settled_chat(server: DevServer, chat: str) -> None:
    """No chat-turn fiber row and no open stream is left behind (the turns all ended)."""

    async def settled() -> bool:
        runs = await sql(server, chat, "SELECT count(*) FROM cf_agents_runs")
        streams = await sql(
            server,
            chat,
            "SELECT count(*) FROM cf_ai_chat_stream_metadata WHERE status = 'streaming'",
        )
        return runs == [[0]] and streams == [[0]]

    await eventually(settled, within=10, what=f"{chat}'s turns to settle")


class Bystander:
    """Another chat on the same server, kept streaming a slow reply while a test misbehaves.

    ``check()`` after each bad input: the server answers, and this chat's transcript is exactly
    its completed turns plus the user message of the turn in flight (its reply is persisted
    only when it ends). ``finish()``: the turn in flight ends with ``done`` and the full text,
    and every turn's reply is in the transcript.
    """

    DELAY_MS = 40  # 25 words: about a second per turn

    def __init__(self, server: DevServer) -> None:
        self.server = server
        self.chat = _name("bystander")
        self.expected: list[tuple[str, str]] = []  # (role, text) of the completed turns
        self.turns = 0
        self.current: str | None = None
        self.socket: ChatSocket | None = None

    async def __aenter__(self) -> Bystander:
        self.socket = await ChatSocket.open(self.server, self.chat, "bystander")
        await self.socket.send(request_frame("b-hi", "hi", "b-u-hi"))
        await self.socket.done("b-hi")
        self.expected = [("user", "hi"), ("assistant", HELLO)]
        await self.ensure_streaming()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.socket is not None
        if exc[0] is None:
            await self.finish()
        await self.socket.close()

    async def ensure_streaming(self) -> None:
        """Start a slow turn unless one is in flight (settling the one that ended)."""
        assert self.socket is not None
        if self.current is not None:
            if not self.socket.responses(self.current) or not any(
                f["done"] for f in self.socket.responses(self.current)
            ):
                return
            self._settle(self.current)
        self.turns += 1
        self.current = f"b-slow-{self.turns}"
        await self.socket.send(
            request_frame(self.current, "slow", f"b-u-{self.turns}", delay_ms=self.DELAY_MS)
        )
        current = self.current
        await self.socket.until(lambda: self.socket.chunks(current), "the bystander's stream")

    def _settle(self, request_id: str) -> None:
        assert self.socket is not None
        frames = self.socket.responses(request_id)
        assert frames[-1] == {
            "body": "",
            "done": True,
            "id": request_id,
            "type": RESPONSE,
            "messageIds": [f"b-u-{request_id.rsplit('-', 1)[1]}"],
        }
        assert text_of(frames) == SLOW_TEXT
        seqs = [f["seq"] for f in frames if f["body"]]
        assert seqs == list(range(len(seqs)))
        self.expected += [("user", "slow"), ("assistant", SLOW_TEXT)]
        self.current = None

    async def check(self) -> None:
        messages = [
            (m["role"], message_text(m)) for m in await get_messages(self.server, self.chat)
        ]
        in_flight = self.expected + ([("user", "slow")] if self.current else [])
        # The reply is persisted just before its done frame goes out: it may be there already.
        assert messages in (in_flight, [*in_flight, ("assistant", SLOW_TEXT)]), messages

    async def finish(self) -> None:
        assert self.socket is not None
        if self.current is not None:
            await self.socket.done(self.current)
            self._settle(self.current)
        messages = [
            (m["role"], message_text(m)) for m in await get_messages(self.server, self.chat)
        ]
        assert messages == self.expected
        assert self.turns >= 1
        await settled_chat(self.server, self.chat)


# -- 1. two clients on one stream ------------------------------------------------------------------


async def test_two_clients_share_a_stream_and_a_reconnecting_one_resumes_it(
    server: DevServer, clean_log: None
) -> None:
    """A and B are on one chat; A asks for the slow reply (25 words, 100 ms apart).

    1. Both get the same chunks: identical (seq, body) sequences as far as each has seen.
    2. B closes mid-stream and reconnects as B2: its first frame is ``cf_agent_stream_resuming
       {id}`` (before ``cf_agent_identity``), and until it acknowledges it gets nothing of the
       chat — A meanwhile receives live chunks (the SDK's pending-resume exclusion, §1.4).
    3. B2 acks: every stored chunk with ``replay: true`` (seq 0…k-1), ``replayComplete: true``
       while the stream goes on, then the live rest (seq k…) and ``done`` — each seq exactly
       once, the same bodies as A's, and the same reassembled text.
    4. ``get-messages``: the user message and one assistant message with the full text.
    5. A third client that joined mid-stream and never acknowledged got no chunk, and at the
       end the final transcript and ``done``."""
    chat = _name("two")
    a = await ChatSocket.open(server, chat, "a")
    b = await ChatSocket.open(server, chat, "b")
    await a.send(request_frame("r1", "slow", "u1", delay_ms=100))
    await a.until(lambda: len(a.chunks("r1")) >= 6 and len(b.chunks("r1")) >= 6, "six chunks")

    def seen(socket: ChatSocket) -> list[tuple[int, str]]:
        return [(f["seq"], f["body"]) for f in socket.chunks("r1")]

    shared = min(len(seen(a)), len(seen(b)))
    assert seen(a)[:shared] == seen(b)[:shared]
    await b.close()
    before_close = seen(b)
    assert before_close == seen(a)[: len(before_close)]
    # B misses some live chunks while it is away.
    await a.until(lambda: len(a.chunks("r1")) >= len(before_close) + 2, "chunks while B is away")

    b2 = await ChatSocket.open(server, chat, "b2")
    never = await ChatSocket.open(server, chat, "never")  # told resuming, never acknowledges
    await b2.until(lambda: len(b2.frames) >= 3, "B2's connect frames")
    assert b2.frames[0] == {"type": "cf_agent_stream_resuming", "id": "r1"}
    assert b2.frames[1]["type"] == "cf_agent_identity"
    # Not acknowledged yet: A gets three more live chunks, B2 none of them.
    at_connect = len(a.chunks("r1"))
    await a.until(lambda: len(a.chunks("r1")) >= at_connect + 3, "live chunks while B2 waits")
    assert not any(f["done"] for f in a.responses("r1")), "the stream ended too soon to prove it"
    assert [f["type"] for f in b2.frames] == [
        "cf_agent_stream_resuming",
        "cf_agent_identity",
        "cf_agent_mcp_servers",
    ]

    await b2.send(json.dumps({"type": "cf_agent_stream_resume_ack", "id": "r1"}))
    await b2.done("r1")
    await a.done("r1")
    frames = b2.responses("r1")
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
    assert replayed and all(f["replay"] is True and f["done"] is False for f in replayed)
    assert [f["seq"] for f in replayed] == list(range(len(replayed)))
    assert len(replayed) >= at_connect  # everything streamed before the ack was stored
    assert live and not any("replay" in f for f in live)
    assert live[-1] == {
        "body": "",
        "done": True,
        "id": "r1",
        "type": RESPONSE,
        "messageIds": ["u1"],
    }
    b2_seen = [(f["seq"], f["body"]) for f in replayed + live[:-1]]
    assert b2_seen == seen(a)  # each seq once, in order, the same bodies
    assert text_of(frames) == text_of(a.responses("r1")) == SLOW_TEXT

    messages = await get_messages(server, chat)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert message_text(messages[1]) == SLOW_TEXT
    # The one that never acknowledged: no chunk at all, but when the stream ended its wait
    # ended too — it gets the final transcript, then done (the SDK empties the pending set as
    # the stream finishes, before persisting; research §1.4).
    await never.done("r1")
    assert [f["type"] for f in never.frames] == [
        "cf_agent_stream_resuming",
        "cf_agent_identity",
        "cf_agent_mcp_servers",
        "cf_agent_chat_messages",
        RESPONSE,
    ]
    assert never.frames[0] == {"type": "cf_agent_stream_resuming", "id": "r1"}
    assert never.frames[3] == {"messages": messages, "type": "cf_agent_chat_messages"}
    assert never.frames[4] == live[-1]
    await asyncio.gather(a.close(), b2.close(), never.close())
    await settled_chat(server, chat)


# -- 2. bad input ----------------------------------------------------------------------------------

#: Frames the published server answers with nothing (research §1.3: they go to the user's
#: ``onMessage``, which does nothing by default), and what each is.
IGNORED: list[tuple[str, str | bytes]] = [
    ("not JSON", "not json {"),
    ("a JSON array", "[1, 2]"),
    ("a JSON number", "42"),
    ("JSON null", "null"),
    ("a JSON string", '"cf_agent_use_chat_request"'),
    ("an object without type", '{"id": "x", "init": {"method": "POST"}}'),
    ("an unknown type", '{"type": "cf_agent_no_such_frame"}'),
    ("a type that is not a string", '{"type": 5}'),
    ("a binary frame", b"\x00\x01\xff"),
    ("a chat request that is not a POST", raw_request("get1", "{}", method="GET")),
    ("a chat request whose init is not an object",
     '{"id": "s1", "type": "cf_agent_use_chat_request", "init": "POST"}'),
    ("a chat request without an id (logged)",
     '{"type": "cf_agent_use_chat_request", "init": {"method": "POST", "body": "{}"}}'),
    ("a cancel for no request", '{"type": "cf_agent_chat_request_cancel", "id": "nope"}'),
    ("a cancel without an id", '{"type": "cf_agent_chat_request_cancel"}'),
    ("a resume ack without an id", '{"type": "cf_agent_stream_resume_ack"}'),
]  # fmt: skip


async def _baseline(socket: ChatSocket, server: DevServer, chat: str) -> list[dict[str, Any]]:
    """One good turn, so the chat has a transcript that bad input could damage."""
    await socket.send(request_frame("good0", "hi", "g0"))
    await socket.done("good0")
    messages = await get_messages(server, chat)
    assert [(m["role"], message_text(m)) for m in messages] == [
        ("user", "hi"),
        ("assistant", HELLO),
    ]
    await socket.sync()
    return messages


async def _still_works(
    socket: ChatSocket, server: DevServer, chat: str, before: list[dict[str, Any]], n: int
) -> None:
    """A valid request on the same connection completes and adds exactly its two messages."""
    await socket.send(request_frame(f"good{n}", "hi", f"g{n}"))
    assert (await socket.done(f"good{n}"))["messageIds"] == [f"g{n}"]
    messages = await get_messages(server, chat)
    assert messages[: len(before)] == before
    assert [(m["role"], message_text(m)) for m in messages[len(before) :]] == [
        ("user", "hi"),
        ("assistant", HELLO),
    ]
    await socket.sync()


async def test_malformed_and_unknown_frames_get_no_answer_and_change_nothing(
    server: DevServer, clean_log: None
) -> None:
    """Each frame of :data:`IGNORED` alone, on a chat with a transcript, next to a bystander.

    The published package answers none of them (§1.3; a request without an id is dropped with a
    warning here), so: no frame comes back (checked with a probe answered in order), the
    transcript is unchanged, the connection still works, and the bystander is unaffected. A
    resume ack for a request that never existed is answered, as in the SDK (§1.6 step 6), with
    the bare ``{"body":"","done":true,"id","type","replay":true}``."""
    chat = _name("malformed")
    async with Bystander(server) as bystander:
        socket = await ChatSocket.open(server, chat, "p")
        before = await _baseline(socket, server, chat)
        for what, frame in IGNORED:
            await bystander.ensure_streaming()
            await socket.send(frame)
            assert await socket.sync() == [], what
            assert await get_messages(server, chat) == before, what
            await bystander.check()
        await socket.send('{"type": "cf_agent_stream_resume_ack", "id": "never"}')
        assert await socket.sync() == [
            {"body": "", "done": True, "id": "never", "type": RESPONSE, "replay": True}
        ]
        await _still_works(socket, server, chat, before, 1)
        await socket.close()


#: Chat requests the chat layer cannot read, and the error frame's body for each. The published
#: package logs a warning (or throws inside its handler) and sends nothing, leaving the client
#: waiting forever; answering with an error frame is this port's documented difference.
UNREADABLE: list[tuple[str, Any, str]] = [
    ("init.body not JSON", "{oops", "the chat request's body is not a JSON object"),
    ("init.body a JSON array", "[1]", "the chat request's body is not a JSON object"),
    ("init.body not a string", 5, "the chat request's body is not a JSON object"),
    ("no init.body", None, "the chat request's body is not a JSON object"),
    ("no messages", "{}", "invalid chat request: messages must be a list, got null"),
    ("messages not a list", '{"messages": "hi"}',
     "invalid chat request: messages must be a list, got 'hi'"),
    ("a null message", '{"messages": [null]}',
     "invalid chat request: message 0 is null, not a chat message"),
    ("a message without an id", json.dumps({"messages": [{"role": "user", "parts": []}]}),
     "invalid chat request: a chat message needs a non-empty string id, got null"),
    ("a message without a role", json.dumps({"messages": [{"id": "m", "parts": []}]}),
     "invalid chat request: chat message 'm': role must be one of user, assistant, system, "
     "got null"),
    ("a message with an unknown role",
     json.dumps({"messages": [{"id": "m", "role": "robot", "parts": []}]}),
     "invalid chat request: chat message 'm': role must be one of user, assistant, system, "
     "got 'robot'"),
    ("a valid message then an invalid one", json.dumps({"messages": [
        {"id": "fine", "role": "user", "parts": [{"type": "text", "text": "hi"}]},
        {"id": "", "role": "user", "parts": []}]}),
     "invalid chat request: a chat message needs a non-empty string id, got ''"),
]  # fmt: skip


async def test_unreadable_chat_requests_get_an_error_frame_and_persist_nothing(
    server: DevServer, clean_log: None
) -> None:
    """Each request of :data:`UNREADABLE` is answered, only to its sender, with exactly
    ``{"body": <why>, "done": true, "error": true, "id", "type"}`` (the key order of the SDK's
    thrown-error frame R5); nothing is persisted — not even the valid first message of a
    request whose second message is invalid — and a second connection on the chat hears
    nothing. The connection keeps working and the bystander is unaffected.

    Then a message without ``parts`` is *not* an error: like the SDK's ``autoTransformMessage``
    it becomes a user message whose one text part is the message's JSON, and is answered."""
    chat = _name("unreadable")
    async with Bystander(server) as bystander:
        socket = await ChatSocket.open(server, chat, "p")
        other = await ChatSocket.open(server, chat, "other")
        before = await _baseline(socket, server, chat)
        await other.sync()
        for n, (what, body, error) in enumerate(UNREADABLE):
            await bystander.ensure_streaming()
            await socket.send(raw_request(f"bad{n}", body))
            expected = (
                f'{{"body":{json.dumps(error)},"done":true,"error":true,'
                f'"id":"bad{n}","type":"{RESPONSE}"}}'
            )
            assert await socket.sync() == [json.loads(expected)], what
            assert expected in socket.raw, what  # the exact text, keys in the SDK's order
            assert await get_messages(server, chat) == before, what
            await bystander.check()
        assert await other.sync() == []
        await _still_works(socket, server, chat, before, 1)

        after = await get_messages(server, chat)
        await socket.send(raw_request("noparts", json.dumps({"messages": [{"id": "np"}]})))
        await socket.done("noparts")
        added = (await get_messages(server, chat))[len(after) :]
        assert added[0] == {
            "id": "np",
            "role": "user",
            "parts": [{"type": "text", "text": '{"id":"np"}'}],
        }
        assert [m["role"] for m in added] == ["user", "assistant"]
        await asyncio.gather(socket.close(), other.close())


async def test_a_tool_result_for_an_unknown_call_is_ignored(
    server: DevServer, clean_log: None
) -> None:
    """The chat waits on a client tool call (``"tool"``: a ``getWeather`` part in
    ``input-available``). A ``cf_agent_tool_result`` naming a call that does not exist — or with a
    ``toolCallId`` that is not a string — gets no answer and changes nothing (the SDK: a warning,
    nothing sent, §5.6); in particular no auto-continuation starts. A ``cf_agent_tool_approval``
    for an unknown call changes nothing either, and its sender alone is told why
    (``cf_agent_tool_error``, this library's addition, issue 32). The real call's result is
    then applied (``cf_agent_message_updated`` to the sender) and answers the part."""
    chat = _name("tools")
    async with Bystander(server) as bystander:
        socket = await ChatSocket.open(server, chat, "p")
        await socket.send(request_frame("t1", "tool", "tu1"))
        await socket.done("t1")
        await socket.sync()
        before = await get_messages(server, chat)
        part = before[-1]["parts"][-1]
        assert part["state"] == "input-available" and part["type"] == "tool-getWeather"
        bogus = [
            {"type": "cf_agent_tool_result", "toolCallId": "call_nope", "toolName": "getWeather",
             "output": {"temp": 1}, "autoContinue": True},
            {"type": "cf_agent_tool_result", "toolCallId": "call_nope", "state": "output-error",
             "errorText": "no", "autoContinue": True},
            {"type": "cf_agent_tool_result", "toolCallId": 5, "output": 1, "autoContinue": True},
            {"type": "cf_agent_tool_result", "output": 1},
            {"type": "cf_agent_tool_approval", "toolCallId": "call_nope", "approved": True,
             "autoContinue": True},
        ]  # fmt: skip
        for frame in bogus:
            await bystander.ensure_streaming()
            await socket.send(json.dumps(frame))
            told = await socket.sync()
            if frame["type"] == "cf_agent_tool_approval":
                assert [(f["type"], f["toolCallId"]) for f in told] == [
                    ("cf_agent_tool_error", "call_nope")], frame  # fmt: skip
            else:
                assert told == [], frame
            assert await get_messages(server, chat) == before, frame
            await bystander.check()
        await socket.send(
            json.dumps(
                {
                    "type": "cf_agent_tool_result",
                    "toolCallId": part["toolCallId"],
                    "toolName": "getWeather",
                    "output": {"temp": 21},
                }
            )
        )
        updated = await socket.sync()
        assert [f["type"] for f in updated] == ["cf_agent_message_updated"]
        answered = (await get_messages(server, chat))[-1]["parts"][-1]
        assert answered["state"] == "output-available" and answered["output"] == {"temp": 21}
        await socket.close()


async def test_a_5mb_message_is_kept_whole_and_a_17mib_frame_closes_the_socket(
    server: DevServer, clean_log: None
) -> None:
    """What a 5 MB user message does, and where the limit is.

    doemu's WebSocket limit is uvicorn's ``ws_max_size`` default, 16 MiB per message (doemu
    does not set it); workerd's default is 1 MiB, where Cloudflare closes the socket with 1009.
    So here a 5 MB request is *accepted*: it is persisted whole (one row; no SQL limit in the
    default ``--limits local``), broadcast to the chat's other connection (twice, as the SDK
    broadcasts the incoming list before and after persisting it, §1.4), and answered
    ("Hello, world"). A 17 MiB frame is past the limit: the server closes that connection with
    1009 and a reason naming the limit; nothing of it is persisted, and the chat, the server
    and the bystander keep working. (A client's own receive limit applies to what it is sent:
    ``websockets`` defaults to 1 MiB, so the other connection here raises it.)"""
    chat = _name("big")
    big = "x" * 5_000_000
    async with Bystander(server) as bystander:
        sender = await ChatSocket.open(server, chat, "sender", max_size=None)
        other = await ChatSocket.open(server, chat, "other", max_size=None)
        await other.until(lambda: len(other.frames) >= 2, "the other's connect frames")
        await bystander.ensure_streaming()
        await sender.send(request_frame("big1", big, "ubig"))
        assert (await sender.done("big1", within=20))["messageIds"] == ["ubig"]
        await bystander.check()
        messages = await get_messages(server, chat)
        assert [m["role"] for m in messages] == ["user", "assistant"]
        assert messages[0]["id"] == "ubig" and message_text(messages[0]) == big
        assert message_text(messages[1]) == HELLO
        await other.done("big1", within=20)
        snapshots = [f for f in other.frames if f["type"] == "cf_agent_chat_messages"]
        assert [len(s["messages"]) for s in snapshots] == [1, 1, 2]
        assert all(message_text(s["messages"][0]) == big for s in snapshots)

        await bystander.ensure_streaming()
        huge = request_frame("huge", "y" * (17 << 20), "uhuge")
        await sender.send(huge)
        await sender.until(lambda: sender.closed is not None, "the server to close", within=20)
        assert sender.closed is not None and sender.closed.rcvd is not None
        assert sender.closed.rcvd.code == 1009
        assert sender.closed.rcvd.reason == "frame exceeds limit of 16777216 bytes"
        assert await get_messages(server, chat) == messages
        await bystander.check()
        assert not other.responses("huge") and other.closed is None

        again = await ChatSocket.open(server, chat, "again")
        await again.send(request_frame("after", "hi", "uafter"))
        await again.done("after")
        assert [m["id"] for m in await get_messages(server, chat)][:3] == [
            "ubig",
            messages[1]["id"],
            "uafter",
        ]
        await asyncio.gather(sender.close(), other.close(), again.close())
        await settled_chat(server, chat)


#: How long the flood may take before the test calls it stuck.
FLOOD_HANG_S = 300


async def test_a_flood_of_requests_on_one_connection_is_served_in_order(
    server: DevServer, clean_log: None
) -> None:
    """200 ``cf_agent_use_chat_request`` frames ("hi", distinct ids) sent back to back.

    The default ``message_concurrency`` is ``queue`` (§5.2): every request is persisted at once
    and its turn runs after the ones before it. So: every request gets ``done`` (no error, no
    skip), in the order sent; the transcript has the 200 user messages in order, and 200
    replies, each after the user message it answers (the k-th reply after the
    k-th user message); no id twice; every stored row parses as a valid message; no fiber row
    or open stream is left. Meanwhile another chat stays responsive: its ``get-messages``
    keeps answering during the flood, each answer a small part of the flood's time, and its
    slow turns keep streaming to the end.

    Each reply is "Hello, world" or, for a turn whose transcript ended with the previous reply
    (every question so far already in, answered in order), the demo model's continuation text
    "It is sunny." — and never anything else."""
    chat = _name("flood")
    count = 200
    async with Bystander(server) as bystander:
        socket = await ChatSocket.open(server, chat, "flooder")
        started = time.monotonic()
        for i in range(count):
            await socket.send(request_frame(f"f{i}", "hi", f"fu{i}"))
        latencies: list[float] = []

        def all_done() -> bool:
            return sum(1 for f in socket.frames if f.get("done")) >= count

        while not all_done():
            # a hang guard (the test fails instead of waiting forever), not a speed claim
            assert time.monotonic() - started < FLOOD_HANG_S, "the flood was never served"
            asked = time.monotonic()
            await bystander.check()
            latencies.append(time.monotonic() - asked)
            await bystander.ensure_streaming()
            await asyncio.sleep(0.02)
        flood = time.monotonic() - started
        # The bystander was served alongside the flood, not after it: it answered several times
        # while the flood ran, each answer a small part of the flood's time (bounds relative to
        # the flood itself, so a slow machine slows both sides alike).
        assert len(latencies) >= 3, (flood, latencies)
        assert max(latencies) < flood / 3, (flood, latencies)

        done = [f for f in socket.frames if f.get("done")]
        assert [f["id"] for f in done] == [f"f{i}" for i in range(count)]
        assert all(
            f == {"body": "", "done": True, "id": f"f{i}", "type": RESPONSE,
                  "messageIds": [f"fu{i}"]}
            for i, f in enumerate(done)
        )  # fmt: skip
        assert not any(f.get("error") for f in socket.frames)

        messages = await get_messages(server, chat)
        ids = [m["id"] for m in messages]
        assert len(ids) == len(set(ids)) == 2 * count
        users = [m for m in messages if m["role"] == "user"]
        assert [m["id"] for m in users] == [f"fu{i}" for i in range(count)]
        replies = [m for m in messages if m["role"] == "assistant"]
        assert len(replies) == count
        # The demo model answers "It is sunny." (its continuation script) when the conversation
        # it is given ends with an assistant message: a queued turn that starts after every
        # question so far was answered sees the previous reply last.
        users_seen = replies_seen = 0
        asked_since_reply = False
        for message in messages:
            if message["role"] == "user":
                users_seen += 1
                asked_since_reply = True
                continue
            replies_seen += 1
            assert replies_seen <= users_seen  # the k-th reply follows the k-th question
            text = message_text(message)
            if replies_seen == 1:
                assert text == HELLO
            elif not asked_since_reply:  # this turn saw the previous reply last
                assert text == SUNNY, message
            else:
                assert text in (HELLO, SUNNY), message
            asked_since_reply = False
        rows = await sql(
            server, chat, "SELECT id, message FROM cf_ai_chat_agent_messages ORDER BY seq"
        )
        assert [json.loads(message) for _id, message in rows] == messages
        await socket.close()
        await settled_chat(server, chat)


# -- a request the storage refuses ----------------------------------------------------------------


async def test_a_request_that_cannot_be_persisted_gets_an_error_frame(
    tmp_path: Path,
) -> None:
    """Under ``--limits production`` a row may not exceed 2 MB (Cloudflare's SQL limit), and the
    chat layer stores one message per row. A 2.5 MB user message (well inside doemu's 16 MiB
    WebSocket limit) therefore cannot be persisted: the sender gets an error frame naming the
    problem (``done: true, error: true``, as for an unreadable request), nothing is persisted,
    the other connections are shown nothing, and the chat goes on."""
    server = _start(tmp_path, "--limits", "production")
    try:
        chat = _name("toobig")
        socket = await ChatSocket.open(server, chat, "p")
        await socket.send(request_frame("r1", "z" * 2_500_000, "u1"))
        done = await socket.done("r1", within=3)
        assert done["error"] is True and "could not be saved" in done["body"]
        assert await get_messages(server, chat) == []
        await socket.send(request_frame("r2", "hi", "u2"))
        assert not (await socket.done("r2", within=10)).get("error")
        assert (await get_messages(server, chat))[0]["id"] == "u2"
        await socket.close()
    finally:
        _stop(server)
