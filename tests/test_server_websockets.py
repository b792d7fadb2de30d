"""WebSockets through a real server: hibernation, tags, auto-response, close codes, binary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from js import WebSocketPair, WebSocketRequestResponsePair
from pyodide.ffi import to_js
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus
from workers import DurableObject, Response

from doemu.clock import ManualClock
from doemu.runtime import ClassSpec, Runtime

from .polling import eventually
from .servers import serve

# The error texts spelled out (golden), not imported from doemu: a drift in doemu's copy of
# Cloudflare's wording must fail a test.
ABNORMAL_CLOSE_REASON = "WebSocket disconnected without sending Close frame."

BOOTS: dict[str, int] = {}


class Room(DurableObject):
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        BOOTS[str(ctx.id)] = BOOTS.get(str(ctx.id), 0) + 1
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS closes (code INT, reason TEXT, clean INT)")
        ctx.setWebSocketAutoResponse(WebSocketRequestResponsePair.new("ping", "pong"))

    async def fetch(self, request: Any) -> Any:
        path = request.url.split("/", 5)[-1]
        if path.startswith("ws"):
            tags = path.split("?tags=")[1].split(",") if "?tags=" in path else []
            client, server = WebSocketPair.new().object_values()
            self.ctx.acceptWebSocket(server, to_js(tags))
            server.serializeAttachment(to_js({"tags": tags, "seen": 0}))
            return Response(None, status=101, web_socket=client)
        if path.startswith("plain"):
            client, server = WebSocketPair.new().object_values()
            server.accept()
            server.addEventListener("message", lambda event: server.send(f"plain:{event.data}"))
            return Response(None, status=101, web_socket=client)
        if path.startswith("broadcast"):
            tag = path.split("?tag=")[1]
            sockets = self.ctx.getWebSockets(tag)
            for ws in sockets:
                ws.send(f"to {tag}")
            return Response.json({"sent": len(sockets)})
        if path.startswith("closes"):
            rows = self.ctx.storage.sql.exec("SELECT code, reason, clean FROM closes").raw()
            return Response.json([list(r) for r in rows])
        if path.startswith("stamp"):
            ws = self.ctx.getWebSockets()[0]
            return Response.json({"at": self.ctx.getWebSocketAutoResponseTimestamp(ws)})
        return Response("not found", status=404)

    async def webSocketMessage(self, ws: Any, message: Any) -> None:
        if isinstance(message, bytes):
            ws.send(message)  # the ArrayBuffer itself: binary stays binary
            return
        state = ws.deserializeAttachment().to_py()
        state["seen"] += 1
        ws.serializeAttachment(to_js(state))
        ws.send(f"{message}: seen={state['seen']} tags={list(self.ctx.getTags(ws))}")

    async def webSocketClose(self, ws: Any, code: int, reason: str, was_clean: bool) -> None:
        self.ctx.storage.sql.exec("INSERT INTO closes VALUES (?, ?, ?)", code, reason, was_clean)


@pytest.fixture
def runtime_factory(tmp_path: Path) -> Any:
    def make(**kwargs: Any) -> Runtime:
        return Runtime(
            worker_name="ws-test",
            classes={"Room": ClassSpec(Room)},
            bindings={"ROOM": "Room"},
            persist_dir=tmp_path / "state",
            **kwargs,
        )

    return make


async def test_tags_select_sockets_and_attachment_survives_eviction(runtime_factory: Any) -> None:
    async with serve(runtime_factory()) as srv:
        base = f"{srv.ws_url}/ROOM/r1/ws"
        async with connect(f"{base}?tags=room:a,user:1") as a, connect(f"{base}?tags=room:b") as b:
            await a.send("hi")
            assert await a.recv() == "hi: seen=1 tags=['room:a', 'user:1']"
            async with httpx.AsyncClient(base_url=srv.url) as http:
                sent = (await http.get("/ROOM/r1/broadcast?tag=room:a")).json()
            assert sent == {"sent": 1}
            assert await a.recv() == "to room:a"
            host = srv.runtime.host("ROOM", "r1")
            boots = BOOTS[host.hex_id]
            await srv.control.evict("ROOM", "r1")
            assert not host.live
            await b.send("after eviction")
            assert await b.recv() == "after eviction: seen=1 tags=['room:b']"
            await a.send("again")
            assert await a.recv() == "again: seen=2 tags=['room:a', 'user:1']"
            assert BOOTS[host.hex_id] == boots + 1


async def test_auto_response_does_not_wake_the_object(runtime_factory: Any) -> None:
    async with serve(runtime_factory()) as srv:
        async with connect(f"{srv.ws_url}/ROOM/auto/ws") as ws:
            await srv.control.evict("ROOM", "auto")
            host = srv.runtime.host("ROOM", "auto")
            await ws.send("ping")
            assert await ws.recv() == "pong"
            assert not host.live
            async with httpx.AsyncClient(base_url=srv.url) as http:
                stamp = (await http.get("/ROOM/auto/stamp")).json()["at"]
            assert stamp is not None


async def test_binary_frames_stay_binary(runtime_factory: Any) -> None:
    async with serve(runtime_factory()) as srv, connect(f"{srv.ws_url}/ROOM/bin/ws") as ws:
        await ws.send(b"\x00\xffraw")
        assert await ws.recv() == b"\x00\xffraw"


async def test_close_codes_reach_web_socket_close(runtime_factory: Any) -> None:
    async with serve(runtime_factory()) as srv:
        async with connect(f"{srv.ws_url}/ROOM/closer/ws") as ws:
            await ws.close(4000, "bye")
        vanish = await connect(f"{srv.ws_url}/ROOM/closer/ws")
        vanish.transport.abort()  # no Close frame
        async with httpx.AsyncClient(base_url=srv.url) as http:

            async def both_closes() -> list[Any] | None:
                rows = list((await http.get("/ROOM/closer/closes")).json())
                return rows if len(rows) == 2 else None

            rows = await eventually(both_closes, what="both closes to be recorded")
        # wasClean is stored as a JavaScript boolean is by workerd: the text 'true'/'false'.
        assert rows == [[4000, "bye", "true"], [1006, ABNORMAL_CLOSE_REASON, "false"]]


async def test_non_hibernatable_socket_pins_the_object(runtime_factory: Any) -> None:
    clock = ManualClock()
    runtime = runtime_factory(clock=clock, idle_timeout=(2.0, 2.0))
    async with serve(runtime) as srv:
        host = srv.runtime.host("ROOM", "plain")
        async with connect(f"{srv.ws_url}/ROOM/plain/plain") as ws:
            await ws.send("x")
            assert await ws.recv() == "plain:x"
            await srv.control.advance(60_000)
            assert host.live
        await eventually(lambda: not host.sockets.pinning, what="the close to unpin the object")
        await srv.control.advance(2_000)
        assert not host.live


async def test_too_many_tags_refuses_the_handshake(runtime_factory: Any) -> None:
    async with serve(runtime_factory()) as srv:
        tags = ",".join(f"t{i}" for i in range(11))
        with pytest.raises(InvalidStatus) as info:
            await connect(f"{srv.ws_url}/ROOM/tags/ws?tags={tags}")
        assert info.value.response.status_code == 500
        assert b"cannot have more than 10 tags" in info.value.response.body
        long_tag = "x" * 257
        with pytest.raises(InvalidStatus) as info:
            await connect(f"{srv.ws_url}/ROOM/tags/ws?tags={long_tag}")
        assert b"is longer than the max tag length (256 characters)." in info.value.response.body
