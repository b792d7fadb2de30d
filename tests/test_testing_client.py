"""``h.client()`` and ``h.websocket()``: HTTP and WebSocket to a harness's Worker, in process.

No port, no subprocess: doemu's own ASGI app over the harness's runtime and manual clock. A
WebSocket is accepted by the object as on Cloudflare, survives the object's eviction (the
socket is held by the server), and a refusal or a server-side close is reported with what the
Worker said.
"""

from __future__ import annotations

from typing import Any

import pytest
from js import WebSocketPair
from pyodide.ffi import to_js
from workers import DurableObject, Response, WorkerEntrypoint

from doemu.testing.client import WebSocketClosed, WebSocketRefused
from doemu.testing.plugin import HarnessFactory


class Room(DurableObject):
    async def fetch(self, request: Any) -> Any:
        if request.headers.get("upgrade") != "websocket":
            return Response("a room wants a WebSocket", status=426)
        client, server = WebSocketPair.new().object_values()
        self.ctx.acceptWebSocket(server, to_js(["member"]))
        return Response(None, status=101, web_socket=client)

    async def webSocketMessage(self, ws: Any, message: Any) -> None:
        if message == "leave":
            ws.close(4000, "bye")
            return
        count = (await self.ctx.storage.get("count") or 0) + 1
        await self.ctx.storage.put("count", count)
        for peer in self.ctx.getWebSockets("member"):
            peer.send(f"{count}: {message}")

    async def webSocketClose(self, ws: Any, code: int, reason: str, was_clean: bool) -> None:
        await self.ctx.storage.put("closed", [code, reason])

    async def closed(self) -> Any:
        return await self.ctx.storage.get("closed")


class Default(WorkerEntrypoint):
    async def fetch(self, request: Any) -> Any:
        name = request.url.rsplit("/", 1)[-1]
        return await self.env.ROOM.getByName(name).fetch(request)


async def test_http_through_the_default_router_and_an_entry_worker(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"ROOM": Room})
    async with h.client() as http:
        routed = await http.get("/ROOM/lobby/")
    async with h.client(entry=Default) as http:
        entered = await http.get("/rooms/lobby")
    assert (routed.status_code, routed.text) == (426, "a room wants a WebSocket")
    assert (entered.status_code, entered.text) == (426, "a room wants a WebSocket")


async def test_a_websocket_in_process_talks_to_the_object(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"ROOM": Room})
    async with h.websocket("/ROOM/lobby/") as alice, h.websocket("/ROOM/lobby/") as bob:
        await alice.send_text("hi")
        assert await alice.receive_text() == "1: hi"
        assert await bob.receive_text() == "1: hi"  # a broadcast reaches the other socket
        assert await h.evict("ROOM", "lobby")  # hibernation: the sockets stay connected
        await bob.send_text("still here")
        assert await alice.receive_text() == "2: still here"
    stub = h.env.ROOM.getByName("lobby")
    assert await stub.closed() == [1000, ""]  # the client's close reached webSocketClose


async def test_a_server_close_and_a_refused_handshake_are_reported(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"ROOM": Room})
    async with h.websocket("/ROOM/hall/") as ws:
        await ws.send_text("leave")
        with pytest.raises(WebSocketClosed) as closed:
            await ws.receive_text()
    assert (closed.value.code, closed.value.reason) == (4000, "bye")
    with pytest.raises(WebSocketRefused) as refused:
        async with h.websocket("/NOPE/hall/"):
            pass
    assert refused.value.status == 404 and b"unknown binding 'NOPE'" in refused.value.body
