"""WebSocket delivery through a real ``doemu dev``: handlers interleave and start in order.

The server starts each frame's handler in the task that read it (no task per frame); a handler
that awaits must still let the next message in, as on Cloudflare, on either event loop.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import connect

ENTRY = """
import asyncio
import json

from js import WebSocketPair
from workers import DurableObject, Response

GATES = {}
STARTS = []


class Chat(DurableObject):
    async def fetch(self, request):
        client, server = WebSocketPair.new().object_values()
        self.ctx.acceptWebSocket(server)
        return Response(None, status=101, web_socket=client)

    async def webSocketMessage(self, ws, message):
        STARTS.append(message)
        command, _, arg = message.partition(" ")
        gate = GATES.setdefault(arg, asyncio.Event())
        if command == "wait":
            await gate.wait()
            ws.send(f"done {arg}")
        elif command == "open":
            gate.set()
            ws.send(f"opened {arg}")
        elif command == "starts":
            ws.send(json.dumps(STARTS))
        else:
            ws.send(f"echo {message}")
"""

WRANGLER = """
name = "ws-delivery"
main = "src/entry.py"
compatibility_date = "2026-11-01"
compatibility_flags = ["python_workers"]

[[durable_objects.bindings]]
name = "CHAT"
class_name = "Chat"

[[migrations]]
tag = "v1"
new_sqlite_classes = ["Chat"]
"""


@pytest.fixture
def chat_project(tmp_path: Path) -> Path:
    project = tmp_path / "chat"
    (project / "src").mkdir(parents=True)
    (project / "src" / "entry.py").write_text(ENTRY)
    (project / "wrangler.toml").write_text(WRANGLER)
    return project


NEEDS_UVLOOP = pytest.mark.skipif(
    importlib.util.find_spec("uvloop") is None, reason="uvloop is not installed"
)


@pytest.mark.parametrize("loop", ["asyncio", pytest.param("uvloop", marks=NEEDS_UVLOOP)])
def test_a_waiting_handler_lets_later_messages_in_and_starts_stay_in_order(
    dev_server: Any, chat_project: Path, loop: str
) -> None:
    server = dev_server(chat_project, env={"DOEMU_LOOP": loop})
    sent = ["wait g", "m1", "open g", "m2"]
    with connect(f"{server.ws_url}/CHAT/room/ws") as ws:
        for message in sent:
            ws.send(message)
        got = [ws.recv(timeout=5) for _ in sent]
        ws.send("starts")
        starts = json.loads(ws.recv(timeout=5))
    assert got.index("echo m1") < got.index("opened g") < got.index("done g")
    assert sorted(got) == ["done g", "echo m1", "echo m2", "opened g"]
    assert starts == [*sent, "starts"]
