"""``AIChatAgent`` end to end: Cloudflare's own chat client, and SIGKILLs mid-reply.

The server is a real ``doemu dev`` serving a copy of ``examples/chat`` (a chat agent on the
scripted demo model: "hi" → "Hello, world", "slow" → 25 words ``delayMs`` apart).

* ``e2e/chat_client/chat.mjs`` renders Cloudflare's ``useAgentChat`` headless (npm
  ``@cloudflare/ai-chat`` and ``agents``, pinned) and runs a scenario: a turn; a reload
  mid-stream that resumes through the handshake; a clear; two tabs on one chat.
* A raw WebSocket client starts a slow reply, the server is SIGKILLed mid-stream and restarted
  on the same state: with no request, the chat's alarm wakes it and bounded recovery continues
  the reply in the same assistant message; a reconnecting client sees one coherent turn.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from tests.locks import exclusive
from tests.polling import eventually, eventually_sync

from .harness import DevServer
from .node import require_node

ROOT = Path(__file__).resolve().parent.parent
CLIENT = Path(__file__).resolve().parent / "chat_client"
EXAMPLE = ROOT / "examples" / "chat"


def _installed(package: str) -> str | None:
    manifest = CLIENT / "node_modules" / package / "package.json"
    return str(json.loads(manifest.read_text())["version"]) if manifest.exists() else None


@pytest.fixture(scope="module")
def chat_client() -> Path:
    """The Node project with its locked dependencies (``npm ci`` when they are missing)."""
    npm, _node = require_node("the chat client interop test")
    wanted = json.loads((CLIENT / "package.json").read_text())["dependencies"]
    # One worker at a time: test_chat_approval_node.py uses this project too.
    with exclusive(CLIENT / "package.json"):
        if _installed("@cloudflare/ai-chat") != wanted["@cloudflare/ai-chat"]:
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund"],
                cwd=CLIENT,
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"
    assert _installed("@cloudflare/ai-chat") == wanted["@cloudflare/ai-chat"]
    return CLIENT


@pytest.fixture
def chat_project(tmp_path: Path) -> Path:
    target = tmp_path / "chat"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    return target


def _pythonpath() -> dict[str, str]:
    import os

    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


@pytest.mark.parametrize("scenario", ["send", "reload", "clear", "multi"])
def test_cloudflares_chat_client_against_a_python_chat_agent(
    dev_server: Callable[..., DevServer], chat_project: Path, chat_client: Path, scenario: str
) -> None:
    server = dev_server(chat_project, env=_pythonpath())
    name = f"{scenario}-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        ["node", "chat.mjs", f"{server.host}:{server.port}", "ChatAgent", name, scenario],
        cwd=chat_client,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"{done.stderr}\n{server.output}"
    report = json.loads(done.stdout)
    assert report["ok"] is True
    assert all(report["checks"].values()), report["checks"]
    assert "Traceback" not in server.output


class Socket:
    """A raw chat connection: frames received, parsed."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.frames: list[dict[str, Any]] = []

    async def pump(self) -> None:
        async for raw in self.ws:
            self.frames.append(json.loads(raw))

    def chunks(self) -> list[dict[str, Any]]:
        return [f for f in self.frames if f.get("type") == "cf_agent_use_chat_response"]


def _request(request_id: str, text: str, message_id: str, delay_ms: int) -> str:
    body = {
        "messages": [{"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}],
        "trigger": "submit-message",
        "delayMs": delay_ms,
    }
    return json.dumps(
        {
            "id": request_id,
            "type": "cf_agent_use_chat_request",
            "init": {"method": "POST", "body": json.dumps(body)},
        }
    )


def test_a_reply_cut_by_sigkill_is_continued_after_the_restart(
    dev_server: Callable[..., DevServer], chat_project: Path
) -> None:
    """1. A client starts a slow reply (25 words, 150 ms apart).  2. Once it has seen 14 chunks
    (so at least one block of 10 is stored), the server is SIGKILLed and restarted.
    3. With no request to the chat, its persisted alarm wakes it: the interrupted turn is found,
    its partial reply kept and continued (the demo model's continuation is "It is sunny.") in the
    *same* assistant message. 4. A client that reconnects sees one coherent turn: the transcript
    holds the user message and one assistant message, the stored words then the continuation;
    no chat-turn fiber, recovery schedule or incident is left behind."""
    server = dev_server(chat_project, env=_pythonpath())
    url = f"{server.ws_url}/agents/chat-agent/killed"

    async def until_killed() -> list[dict[str, Any]]:
        async with websockets.connect(f"{url}?_pk=before") as ws:
            socket = Socket(ws)
            pump = asyncio.ensure_future(socket.pump())
            await ws.send(_request("r1", "slow", "u1", 150))
            await eventually(lambda: len(socket.chunks()) >= 14, within=10, what="14 chunks")
            await asyncio.get_running_loop().run_in_executor(None, server.kill)
            await asyncio.gather(pump, return_exceptions=True)
            return socket.chunks()

    before = asyncio.run(until_killed())
    assert len(before) >= 14 and not any(f["done"] for f in before)
    server.start()
    sql = f"{server.url}/__doemu/api/objects/ChatAgent/killed/sql"

    def table(query: str) -> list[list[Any]]:
        rows: list[list[Any]] = httpx.post(sql, json={"query": query}).json()["rows"]
        return rows

    def continued() -> bool:  # read through the admin API: no request reaches the chat
        rows = table("SELECT message FROM cf_ai_chat_agent_messages ORDER BY seq")
        return len(rows) == 2 and "It is sunny." in rows[1][0]

    eventually_sync(continued, within=15, what="the continuation, with no request")
    messages = httpx.get(f"{server.url}/agents/chat-agent/killed/get-messages").json()
    assert [m["role"] for m in messages] == ["user", "assistant"]
    text = "".join(p["text"] for p in messages[1]["parts"] if p["type"] == "text")
    assert text.endswith("It is sunny.")
    words = text[: -len("It is sunny.")].split()
    assert words and words == [f"w{i}" for i in range(len(words))] and len(words) < 25
    assert table("SELECT count(*) FROM cf_agents_runs") == [[0]]
    assert table("SELECT count(*) FROM cf_agents_schedules") == [[0]]

    async def reconnect() -> list[dict[str, Any]]:
        async with websockets.connect(f"{server.ws_url}/agents/chat-agent/killed?_pk=a") as ws:
            socket = Socket(ws)
            pump = asyncio.ensure_future(socket.pump())
            await ws.send(json.dumps({"type": "cf_agent_stream_resume_request", "probeId": "p"}))
            await eventually(
                lambda: any(f.get("type") == "cf_agent_stream_resume_none" for f in socket.frames),
                what="the probe's answer",
            )
            pump.cancel()
            return socket.frames

    frames = asyncio.run(reconnect())
    assert {"type": "cf_agent_stream_resume_none", "reason": "idle", "probeId": "p"} in frames
    assert "Traceback" not in server.output
