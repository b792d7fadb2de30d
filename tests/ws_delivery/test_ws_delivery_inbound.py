"""WebSocket delivery through a real server: no task per frame, same semantics as with tasks.

A frame's handler starts in the task that read the frame and the reply leaves in one batch per
loop turn; these tests pin the inbound order that must not change with that: a handler that
awaits does not hold up the next message, handlers start in arrival order (across the input gate
too), the close arrives after the messages before it, errors are logged and the socket survives
them, and hibernation still wakes the object.

Every server test runs twice: with uvicorn's default WebSocket protocol and with doemu's
(``uvicorn_ws_protocol``; the fixtures are in conftest.py).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from websockets.asyncio.client import connect

from doemu.compat.websocket import end_of
from doemu.runtime import Runtime
from doemu.sockets.delivery import collect_socket_events

from ..polling import eventually
from ..servers import serve
from .app import BOOTS, GATES, LOG, replies


def starts() -> list[str]:
    return [entry.removeprefix("start ") for entry in LOG if entry.startswith("start ")]


# -- interleaving and order -------------------------------------------------------------------


async def test_a_waiting_handler_does_not_hold_up_the_next_message(
    runtime: Runtime, ws_protocol: Any
) -> None:
    async with serve(runtime, ws=ws_protocol) as srv, connect(f"{srv.ws_url}/CHAT/a/ws") as ws:
        await ws.send("wait g")
        await ws.send("open g")
        assert await replies(ws, 2) == ["opened g", "done g"]
        await ws.send("ping")
        assert await replies(ws, 1) == ["echo ping"]


async def test_handlers_start_in_arrival_order_while_others_wait(
    runtime: Runtime, ws_protocol: Any
) -> None:
    sent = ["wait g1", "m1", "wait g2", "m2", "open g2", "m3", "open g1", "m4"]
    async with serve(runtime, ws=ws_protocol) as srv, connect(f"{srv.ws_url}/CHAT/order/ws") as ws:
        for message in sent:
            await ws.send(message)
        got = await replies(ws, len(sent))
    assert starts() == sent
    assert got.index("done g2") > got.index("opened g2")
    assert got.index("done g1") > got.index("opened g1")
    assert [m for m in got if m.startswith("echo")] == ["echo m1", "echo m2", "echo m3", "echo m4"]


async def test_the_input_gate_holds_later_messages_then_lets_them_start_in_order(
    runtime: Runtime, ws_protocol: Any
) -> None:
    async with serve(runtime, ws=ws_protocol) as srv, connect(f"{srv.ws_url}/CHAT/gate/ws") as ws:
        await ws.send("block b")
        for message in ("m1", "m2", "m3"):
            await ws.send(message)
        host = srv.runtime.host("CHAT", "gate")
        # All three arrived and are held: the first at the gate, the others behind it.
        await eventually(lambda: len(host.sockets.order) == 3, what="three held messages")
        assert LOG == ["start block b"]
        GATES["b"].set()
        got = await replies(ws, 4)
    assert sorted(got) == ["blocked b", "echo m1", "echo m2", "echo m3"]
    assert LOG.index("unblocked b") < LOG.index("start m1")
    assert starts() == ["block b", "m1", "m2", "m3"]


async def test_a_frame_arriving_as_the_gate_opens_waits_for_the_one_held_at_the_gate(
    runtime: Runtime,
) -> None:
    async with serve(runtime, ws="auto") as srv, connect(f"{srv.ws_url}/CHAT/race/ws") as ws:
        await ws.send("block b")
        await ws.send("m1")
        host = srv.runtime.host("CHAT", "race")
        await eventually(lambda: len(host.sockets.order) == 1, what="m1 held at the gate")
        (server_end,) = host.sockets.get()
        owners: list[asyncio.Future[None]] = []

        async def finish(event: Any) -> None:
            await event.finish()

        def deliver_m2(_blocker: Any) -> None:
            # The moment the gate opens, before m1 (woken by the same opening) runs: deliver
            # m2 the way the server does, starting its handler right away.
            for event in collect_socket_events(end_of(server_end).peer.forward, "m2"):
                if not event.start():
                    owners.append(asyncio.ensure_future(finish(event)))

        host._blockers[-1].add_done_callback(deliver_m2)
        GATES["b"].set()
        assert sorted(await replies(ws, 3)) == ["blocked b", "echo m1", "echo m2"]
        assert owners  # m2 did wait for its turn
    assert starts() == ["block b", "m1", "m2"]


async def test_close_reaches_the_object_after_the_messages_before_it(
    runtime: Runtime, ws_protocol: Any
) -> None:
    async with serve(runtime, ws=ws_protocol) as srv:
        async with connect(f"{srv.ws_url}/CHAT/closing/ws") as ws:
            await ws.send("wait never")  # still suspended when the close arrives
            await ws.send("m1")
            assert await replies(ws, 1) == ["echo m1"]
        await eventually(lambda: "close 1000" in LOG, what="webSocketClose")
    assert LOG[:3] == ["start wait never", "start m1", "close 1000"]


# -- errors, hibernation ----------------------------------------------------------------------


async def test_a_failing_handler_is_logged_and_the_socket_goes_on(
    runtime: Runtime, ws_protocol: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async with serve(runtime, ws=ws_protocol) as srv, connect(f"{srv.ws_url}/CHAT/boom/ws") as ws:
        with caplog.at_level(logging.ERROR, logger="doemu.host"):
            await ws.send("boom")
            await ws.send("m1")
            assert await replies(ws, 1) == ["echo m1"]
        assert "webSocketMessage handler of" in caplog.text
        assert "ValueError: handler failed" in caplog.text


async def test_a_message_after_eviction_reconstructs_the_object(
    runtime: Runtime, ws_protocol: Any
) -> None:
    async with serve(runtime, ws=ws_protocol) as srv, connect(f"{srv.ws_url}/CHAT/hib/ws") as ws:
        await ws.send("m1")
        assert await replies(ws, 1) == ["echo m1"]
        host = srv.runtime.host("CHAT", "hib")
        boots = BOOTS.count(host.hex_id)
        await srv.control.evict("CHAT", "hib")
        assert not host.live
        await ws.send("m2")
        assert await replies(ws, 1) == ["echo m2"]
        assert BOOTS.count(host.hex_id) == boots + 1
