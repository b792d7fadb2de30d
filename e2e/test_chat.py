"""``AIChatAgent`` end to end: Cloudflare's own chat client, and SIGKILLs mid-reply.

The server is a real ``doemu dev`` serving a copy of ``examples/chat`` (a chat agent on the
scripted demo model: "hi" → "Hello, world", "slow" → 25 words ``delayMs`` apart).

* ``e2e/chat_client/chat.mjs`` renders Cloudflare's ``useAgentChat`` headless (npm
  ``@cloudflare/ai-chat`` and ``agents``, pinned) and runs a scenario: a turn; a reload
  mid-stream that resumes through the handshake; a clear; two tabs on one chat.
* A raw WebSocket client starts a slow reply, the server is SIGKILLed mid-stream and restarted
  on the same state: the reconnecting client gets the stored words replayed and ``done: true``,
  the transcript holds the user message and the partial reply, and no chat-turn fiber row is
  left behind.
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

from tests.polling import eventually_sync

from .harness import DevServer

ROOT = Path(__file__).resolve().parent.parent
CLIENT = Path(__file__).resolve().parent / "chat_client"
EXAMPLE = ROOT / "examples" / "chat"


def _installed(package: str) -> str | None:
    manifest = CLIENT / "node_modules" / package / "package.json"
    return str(json.loads(manifest.read_text())["version"]) if manifest.exists() else None


@pytest.fixture(scope="module")
def chat_client() -> Path:
    """The Node project with its locked dependencies (``npm ci`` when they are missing)."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.skip("node/npm are not installed; the chat client interop test needs them")
    wanted = json.loads((CLIENT / "package.json").read_text())["dependencies"]
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
    assert done.returncode == 0, f"{done.stderr}\n{server.output()}"
    report = json.loads(done.stdout)
    assert report["ok"] is True
    assert all(report["checks"].values()), report["checks"]
    assert "Traceback" not in server.output()


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


def test_a_reply_cut_by_sigkill_is_replayed_and_kept_after_the_restart(
    dev_server: Callable[..., DevServer], chat_project: Path
) -> None:
    """1. A client starts a slow reply (25 words, 150 ms apart).  2. Once it has seen 14 chunks
    (so at least one block of 10 is stored), the server is SIGKILLed and restarted.
    3. A reconnecting client probes, is told ``resuming``, acknowledges and gets the stored chunks
    (``replay: true``) then ``done: true``; ``get-messages`` holds the user message and one
    assistant message with the partial text; no ``__cf_internal_chat_turn`` row is left."""
    server = dev_server(chat_project, env=_pythonpath())
    url = f"{server.ws_url}/agents/chat-agent/killed"

    async def until_killed() -> list[dict[str, Any]]:
        async with websockets.connect(f"{url}?_pk=before") as ws:
            socket = Socket(ws)
            pump = asyncio.ensure_future(socket.pump())
            await ws.send(_request("r1", "slow", "u1", 150))
            for _ in range(400):
                if len(socket.chunks()) >= 14:
                    break
                await asyncio.sleep(0.01)
            await asyncio.get_running_loop().run_in_executor(None, server.kill)
            await asyncio.gather(pump, return_exceptions=True)
            return socket.chunks()

    before = asyncio.run(until_killed())
    assert len(before) >= 14 and not any(f["done"] for f in before)
    server.start()
    url = f"{server.ws_url}/agents/chat-agent/killed"  # a new port

    async def after_restart() -> Socket:
        async with websockets.connect(f"{url}?_pk=after") as ws:
            socket = Socket(ws)
            pump = asyncio.ensure_future(socket.pump())
            await ws.send(json.dumps({"type": "cf_agent_stream_resume_request", "probeId": "p"}))
            for _ in range(500):
                if any(f.get("type") == "cf_agent_stream_resuming" for f in socket.frames):
                    break
                await asyncio.sleep(0.01)
            resuming = next(f for f in socket.frames if f["type"] == "cf_agent_stream_resuming")
            assert resuming["id"] == "r1"
            await ws.send(json.dumps({"type": "cf_agent_stream_resume_ack", "id": "r1"}))
            for _ in range(500):
                if any(f.get("done") for f in socket.chunks()):
                    break
                await asyncio.sleep(0.01)
            pump.cancel()
            return socket

    after = asyncio.run(after_restart())
    replayed = after.chunks()
    assert replayed and all(f.get("replay") for f in replayed)
    assert replayed[-1]["done"] is True and replayed[-1]["outcome"] == "aborted"
    bodies = [json.loads(f["body"]) for f in replayed if f["body"]]
    assert len(bodies) >= 10 and bodies[0]["type"] == "start"
    assert [f["seq"] for f in replayed if f["body"]] == list(range(len(bodies)))
    messages = httpx.get(f"{server.url}/agents/chat-agent/killed/get-messages").json()
    assert [m["role"] for m in messages] == ["user", "assistant"]
    text = "".join(p["text"] for p in messages[1]["parts"] if p["type"] == "text")
    words = text.split()
    assert words and words == [f"w{i}" for i in range(len(words))] and len(words) < 25
    runs = eventually_sync(
        lambda: httpx.post(
            f"{server.url}/__doemu/api/objects/ChatAgent/killed/sql",
            json={"query": "SELECT count(*) FROM cf_agents_runs"},
        ).json()["rows"],
        what="the object's fiber table",
    )
    assert runs == [[0]]
    assert "Traceback" not in server.output()
