"""WebSocket delivery's building blocks without a server: frame encoding, ``resume``,
``StartOrder`` and ``collect_socket_events``."""

from __future__ import annotations

import asyncio
import contextvars

import pytest
from websockets.asyncio.client import connect

from doemu.compat.websocket import end_of
from doemu.runtime import Runtime
from doemu.sockets.delivery import StartOrder, collect_socket_events, resume

from ..servers import serve
from .app import replies

# -- the building blocks ------------------------------------------------------------------------


def test_a_data_frame_is_encoded_as_the_websockets_library_encodes_it() -> None:
    from websockets.frames import Frame, Opcode

    from doemu.sockets.protocol import encode_data_frame

    for size in (0, 1, 125, 126, 127, 65_535, 65_536, 70_000):
        text, blob = "a" * size, bytes(range(256)) * (size // 256) + bytes(size % 256)
        assert encode_data_frame(text) == Frame(Opcode.TEXT, text.encode()).serialize(
            mask=False, extensions=[]
        )
        assert encode_data_frame(blob) == Frame(Opcode.BINARY, blob).serialize(
            mask=False, extensions=[]
        )


async def test_resume_finishes_a_coroutine_started_by_hand_in_a_task() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="outside")
    gate = asyncio.Event()
    sleeping = asyncio.Event()

    async def work() -> str:
        var.set("inside")
        await gate.wait()
        sleeping.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            return f"cancelled, context {var.get()}"
        return "not cancelled"

    context = contextvars.copy_context()
    coro = work()
    yielded = context.run(coro.send, None)  # the first step, with no task
    task = asyncio.ensure_future(resume(coro, yielded, context))
    gate.set()
    await sleeping.wait()
    task.cancel()
    assert await task == "cancelled, context inside"
    assert var.get() == "outside"


async def test_start_order_keeps_a_later_frame_behind_one_still_at_the_gate() -> None:
    order = StartOrder()
    assert order.arrive() is None  # nothing before it: go ahead
    second = order.arrive()
    third = order.arrive()
    assert second is not None and third is not None and len(order) == 3
    order.started()  # the first handler started: only the second may go
    assert second.done() and not third.done()
    third.cancel()
    order.leave(third)  # the third gave up before its turn
    order.started()
    assert len(order) == 0
    assert order.arrive() is None


async def test_socket_events_of_a_failed_delivery_still_run_as_tasks(runtime: Runtime) -> None:
    async with serve(runtime, ws="auto") as srv, connect(f"{srv.ws_url}/CHAT/spawned/ws") as ws:
        await ws.send("m0")
        assert await replies(ws, 1) == ["echo m0"]
        host = srv.runtime.host("CHAT", "spawned")
        (server_end,) = host.sockets.get()

        def deliver_then_fail() -> None:
            end_of(server_end).receive("m1")
            raise RuntimeError("delivery failed")

        with pytest.raises(RuntimeError):
            collect_socket_events(deliver_then_fail)
        assert await replies(ws, 1) == ["echo m1"]
