"""A WebSocket client that stops reading costs the server a bounded amount of memory.

``ws.send()`` has no back-pressure, so frames an object sends to a client that does not read
wait in the server. Past :data:`doemu.sockets.bridge.MAX_UNSENT_BYTES` waiting in doemu (after
the kernel's and the transport's buffers are full) the connection is dropped and what waited is
freed; the object sees a 1006 close, as for a client that vanished. The client here is a raw
socket with a small receive buffer that completes the handshake, asks for a flood and never
reads again; a reading client on another object gets every frame meanwhile.
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
from pathlib import Path
from typing import Any

import pytest
from js import WebSocketPair
from websockets.asyncio.client import connect
from workers import DurableObject, Response

from doemu.runtime import ClassSpec, Runtime
from doemu.sockets import bridge
from doemu.sockets.protocol import uvicorn_ws_protocol

from .polling import eventually
from .servers import serve

#: Per object name: payload bytes handed to ws.send, and the close code its socket saw.
SENT: dict[str, int] = {}
CLOSED: dict[str, int] = {}
#: The flood stops here if nothing drops the client (the failure this test looks for).
CAP = 48 * 1024 * 1024
FRAME = "x" * 32768


class Flood(DurableObject):
    async def fetch(self, request: Any) -> Any:
        client, server = WebSocketPair.new().object_values()
        self.ctx.acceptWebSocket(server)
        return Response(None, status=101, web_socket=client)

    async def webSocketMessage(self, ws: Any, message: Any) -> None:
        if message == "ping":
            ws.send("pong")
            return
        name, _, limit = str(message).partition(" ")
        self.name = name
        SENT[name] = 0
        while SENT[name] < int(limit or CAP) and name not in CLOSED:
            try:
                ws.send(FRAME)
            except Exception:
                break
            SENT[name] += len(FRAME)
            await asyncio.sleep(0)  # the batch of this turn is written

    async def webSocketClose(self, ws: Any, code: int, reason: str, clean: bool) -> None:
        CLOSED.setdefault(getattr(self, "name", "?"), code)


def _stalled_client(port: int, path: str) -> socket.socket:
    """A handshake, one masked text frame (``name``), and no reading after that."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n"
    )
    sock.sendall(request.encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    payload, mask = b"stalled", os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    sock.sendall(bytes((0x81, 0x80 | len(payload))) + mask + masked)
    return sock


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Runtime:
    monkeypatch.setattr(bridge, "MAX_UNSENT_BYTES", 256 * 1024, raising=False)
    SENT.clear()
    CLOSED.clear()
    return Runtime(
        worker_name="ws-stalled",
        classes={"Flood": ClassSpec(Flood)},
        bindings={"FLOOD": "Flood"},
        persist_dir=tmp_path / "state",
    )


async def test_a_client_that_stops_reading_is_dropped_and_a_reading_one_is_not(
    runtime: Runtime,
) -> None:
    async with serve(runtime, ws=uvicorn_ws_protocol()) as srv:
        port = int(srv.url.rsplit(":", 1)[1])
        stalled = await asyncio.to_thread(_stalled_client, port, "/FLOOD/stalled")
        try:
            async with connect(f"{srv.ws_url}/FLOOD/reading", max_size=None) as live:
                await live.send(f"reading {4 * 1024 * 1024}")
                received = 0
                while received < 4 * 1024 * 1024:  # reads 4 MiB while the other one floods
                    received += len(await asyncio.wait_for(live.recv(), 10))
                await eventually(lambda: "stalled" in CLOSED, within=30, what="the drop")
                assert CLOSED["stalled"] == 1006
                # Dropped long before the flood's end: the kernel's buffers, the transport's and
                # the bridge's bounded backlog, not everything the object sent.
                assert SENT["stalled"] < CAP
                assert "reading" not in CLOSED
                await live.send("ping")  # the reading client is still served
                while await asyncio.wait_for(live.recv(), 10) != "pong":
                    pass
        finally:
            stalled.close()
