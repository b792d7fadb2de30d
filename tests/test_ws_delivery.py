"""WebSocket delivery through a real server: no task per frame, same semantics as with tasks.

A frame's handler starts in the task that read the frame and the reply leaves in one batch per
loop turn (doemu/server.py); these tests pin what must not change with that: a handler that
awaits does not hold up the next message, handlers start in arrival order (across the input
gate too), a suspended handler keeps its own task (``asyncio.timeout``, ``TaskGroup``, resets),
frames and the close leave in order (under flow control too), errors are logged, the socket
survives them, and hibernation still wakes the object. Every server test runs twice: with
uvicorn's default WebSocket protocol and with doemu's (``uvicorn_ws_protocol``).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from js import WebSocketPair
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from workers import DurableObject, Response

from doemu.compat.websocket import end_of
from doemu.runtime import ClassSpec, Runtime
from doemu.sockets.bridge import WriteBatch as _WriteBatch
from doemu.sockets.bridge import _Outbound
from doemu.sockets.delivery import StartOrder, collect_socket_events, resume
from doemu.sockets.protocol import uvicorn_ws_protocol

from .polling import eventually
from .servers import serve

#: What the handlers did, in order ("start <message>", "unblocked <gate>", "close <code>").
LOG: list[str] = []
#: Events the test opens to let a waiting handler (or blockConcurrencyWhile callback) go on.
GATES: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
#: Called by the "probe" handler with the object, while the frames after it wait to be read.
PROBE: list[Callable[[], Any]] = []
BOOTS: list[str] = []
TAG: contextvars.ContextVar[str] = contextvars.ContextVar("tag", default="unset")


class Chat(DurableObject):
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        BOOTS.append(str(ctx.id))

    async def fetch(self, request: Any) -> Any:
        client, server = WebSocketPair.new().object_values()
        self.ctx.acceptWebSocket(server)
        if request.url.endswith("/early-close"):
            server.send("before the handshake")
            server.close(4001, "closed early")
        return Response(None, status=101, web_socket=client)

    async def webSocketMessage(self, ws: Any, message: Any) -> None:
        if not isinstance(message, str):  # binary: echoed as it came
            ws.send(message)  # the ArrayBuffer itself: a binary frame
            return
        LOG.append(f"start {message}")
        command, _, arg = message.partition(" ")
        if command == "wait":  # suspend until the test (or another message) opens the gate
            await GATES[arg].wait()
            ws.send(f"done {arg}")
        elif command == "open":
            GATES[arg].set()
            ws.send(f"opened {arg}")
        elif command == "block":  # hold the input gate until the gate opens

            async def hold() -> None:
                await GATES[arg].wait()
                LOG.append(f"unblocked {arg}")

            await self.ctx.blockConcurrencyWhile(hold)
            ws.send(f"blocked {arg}")
        elif command == "own-task":  # the task that starts the handler is the one that ends it
            first = asyncio.current_task()
            await asyncio.sleep(0)
            ws.send(f"same task: {asyncio.current_task() is first}")
        elif command == "timeout":  # asyncio.timeout cancels this handler's task, nothing else
            try:
                async with asyncio.timeout(0.01):
                    await GATES[arg].wait()
            except TimeoutError:
                ws.send("timed out")
        elif command == "group":  # a TaskGroup whose child fails cancels only this handler

            async def fail() -> None:
                await asyncio.sleep(0)
                raise ValueError("child failed")

            try:
                async with asyncio.TaskGroup() as group:
                    group.create_task(fail())
                    await GATES[arg].wait()
            except ExceptionGroup as exc:
                ws.send(f"group: {exc.exceptions[0]}")
        elif command == "context":  # each event starts in its own copy of the context
            before = TAG.get()
            TAG.set(arg)
            await asyncio.sleep(0)
            ws.send(f"context {before} -> {TAG.get()}")
        elif command == "burst":
            for i in range(int(arg)):
                ws.send(f"frame {i}")
            ws.close(4000, "burst done")
        elif command == "flood":  # more than the transport buffers: uvicorn's send() must wait
            chunk = "x" * 65536
            for i in range(int(arg)):
                ws.send(f"{i:06d}{chunk}")
            ws.send("flood done")
        elif command == "probe":
            PROBE[0]()
            ws.send("probed")
        elif command == "self-cancel":  # cancels its own task and returns at once
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
            ws.send("cancelled myself")
        elif command == "boom":
            raise ValueError("handler failed")
        else:
            ws.send(f"echo {message}")

    async def webSocketClose(self, ws: Any, code: int, reason: str, was_clean: bool) -> None:
        LOG.append(f"close {code}")


@pytest.fixture(autouse=True)
def _fresh_state() -> Iterator[None]:
    LOG.clear()
    GATES.clear()
    PROBE.clear()
    yield
    GATES.clear()


@pytest.fixture(params=["uvicorn", "doemu"])
def ws_protocol(request: pytest.FixtureRequest) -> Any:
    return "auto" if request.param == "uvicorn" else uvicorn_ws_protocol()


@pytest.fixture
def runtime(tmp_path: Path) -> Runtime:
    return Runtime(
        worker_name="ws-delivery",
        classes={"Chat": ClassSpec(Chat)},
        bindings={"CHAT": "Chat"},
        persist_dir=tmp_path / "state",
    )


async def replies(ws: ClientConnection, count: int) -> list[Any]:
    return [await asyncio.wait_for(ws.recv(), 5) for _ in range(count)]


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


# -- a suspended handler keeps its own task ----------------------------------------------------


async def test_a_suspended_handler_stays_in_the_task_it_started_in(
    runtime: Runtime, ws_protocol: Any
) -> None:
    async with serve(runtime, ws=ws_protocol) as srv, connect(f"{srv.ws_url}/CHAT/task/ws") as ws:
        await ws.send("own-task")
        assert await replies(ws, 1) == ["same task: True"]


async def test_asyncio_timeout_in_a_handler_cancels_only_that_handler(
    runtime: Runtime, ws_protocol: Any
) -> None:
    async with (
        serve(runtime, ws=ws_protocol) as srv,
        connect(f"{srv.ws_url}/CHAT/timeout/ws") as ws,
    ):
        await ws.send("timeout never")
        await ws.send("m1")
        assert sorted(await replies(ws, 2)) == ["echo m1", "timed out"]
        await ws.send("m2")  # reading goes on
        assert await replies(ws, 1) == ["echo m2"]


async def test_a_task_group_failure_in_a_handler_cancels_only_that_handler(
    runtime: Runtime, ws_protocol: Any
) -> None:
    async with serve(runtime, ws=ws_protocol) as srv, connect(f"{srv.ws_url}/CHAT/group/ws") as ws:
        await ws.send("group never")
        assert await replies(ws, 1) == ["group: child failed"]
        await ws.send("m1")
        assert await replies(ws, 1) == ["echo m1"]


async def test_each_event_runs_in_its_own_context(runtime: Runtime, ws_protocol: Any) -> None:
    async with serve(runtime, ws=ws_protocol) as srv, connect(f"{srv.ws_url}/CHAT/ctx/ws") as ws:
        await ws.send("context first")
        await ws.send("context second")
        assert await replies(ws, 2) == ["context unset -> first", "context unset -> second"]


async def test_a_reset_fails_the_suspended_handler_and_the_socket_goes_on(
    runtime: Runtime, ws_protocol: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async with serve(runtime, ws=ws_protocol) as srv, connect(f"{srv.ws_url}/CHAT/reset/ws") as ws:
        await ws.send("wait r")
        await eventually(lambda: "start wait r" in LOG, what="the handler to start")
        host = srv.runtime.host("CHAT", "reset")
        with caplog.at_level(logging.ERROR, logger="doemu.host"):
            host.reset("reset by the test")
            await eventually(
                lambda: "reset by the test" in caplog.text, what="the reset to be logged"
            )
        assert "webSocketMessage handler of" in caplog.text
        GATES["r"].set()
        await ws.send("after")
        assert await replies(ws, 1) == ["echo after"]  # never "done r": that handler is gone


async def test_a_handler_that_cancels_its_own_task_does_not_stop_the_socket(
    runtime: Runtime, ws_protocol: Any
) -> None:
    async with serve(runtime, ws=ws_protocol) as srv, connect(f"{srv.ws_url}/CHAT/cancel/ws") as ws:
        await ws.send("self-cancel")
        assert await replies(ws, 1) == ["cancelled myself"]
        await ws.send("m1")
        assert await replies(ws, 1) == ["echo m1"]


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


# -- outbound order -----------------------------------------------------------------------------


@pytest.mark.parametrize("compression", ["deflate", None])  # None: doemu writes frames itself
async def test_frames_then_the_close_leave_in_order(
    runtime: Runtime, ws_protocol: Any, compression: str | None
) -> None:
    async with (
        serve(runtime, ws=ws_protocol) as srv,
        connect(f"{srv.ws_url}/CHAT/burst/ws", compression=compression) as ws,
    ):
        await ws.send("burst 50")
        got = [await asyncio.wait_for(ws.recv(), 5) for _ in range(50)]
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 5)
    assert got == [f"frame {i}" for i in range(50)]
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (4000, "burst done")


@pytest.mark.parametrize("compression", ["deflate", None])
async def test_large_frames_keep_their_order(
    runtime: Runtime, ws_protocol: Any, compression: str | None
) -> None:
    count = 100  # ~6.5 MB in one loop turn: the transport's buffer fills up on the way
    async with serve(runtime, ws=ws_protocol) as srv:
        async with connect(
            f"{srv.ws_url}/CHAT/flood/ws", max_size=None, max_queue=1, compression=compression
        ) as ws:
            await ws.send(f"flood {count}")
            await ws.send("after flood")
            got = [await asyncio.wait_for(ws.recv(), 10) for _ in range(count + 2)]
    assert [int(m[:6]) for m in got[:count]] == list(range(count))
    assert got[count:] == ["flood done", "echo after flood"]


async def test_frames_queue_behind_a_send_that_has_to_wait() -> None:
    """uvicorn's send() waits under flow control: later frames, the close too, wait behind it."""
    sent: list[Any] = []
    slow = asyncio.Event()

    async def send(message: Any) -> None:
        if message.get("text") == "slow":
            await slow.wait()
        sent.append(message.get("text") or message.get("bytes") or message["code"])

    outbound = _Outbound(send, _WriteBatch())
    outbound.message("a")
    outbound.message("slow")
    outbound.message(b"b")
    await eventually(lambda: sent == ["a"], what="the first frame")
    outbound.message("c")  # sent while "slow" still waits
    outbound.close(4000, "bye")
    outbound.message("after the close")  # dropped: nothing follows a close
    slow.set()
    await eventually(lambda: len(sent) == 5, what="the rest")
    assert sent == ["a", "slow", b"b", "c", 4000]


async def test_frames_sent_before_the_handshake_and_an_early_close_are_delivered(
    runtime: Runtime, ws_protocol: Any
) -> None:
    async with (
        serve(runtime, ws=ws_protocol) as srv,
        connect(f"{srv.ws_url}/CHAT/early/early-close") as ws,
    ):
        assert await replies(ws, 1) == ["before the handshake"]
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 5)
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (4001, "closed early")


# -- doemu's uvicorn protocol -----------------------------------------------------------------


async def test_doemu_protocol_pauses_reading_only_when_the_app_is_behind(
    runtime: Runtime,
) -> None:
    paused: list[bool] = []
    async with serve(runtime, ws=uvicorn_ws_protocol()) as srv:
        PROBE.append(
            lambda: paused.extend(
                getattr(c, "read_paused", None) for c in srv.server.server_state.connections
            )
        )
        async with connect(f"{srv.ws_url}/CHAT/probe/ws") as ws:
            # A lone frame, taken by the app at once: reading goes on (uvicorn's own protocol
            # pauses and resumes around every message).
            await ws.send("probe")
            assert await replies(ws, 1) == ["probed"]
            # Frames after the one being handled wait in uvicorn's queue: the app is behind,
            # so reading is paused (one read's worth of frames at most is buffered).
            for message in ("probe", "m1", "m2", "m3"):  # four frames in one write
                ws.protocol.send_text(message.encode())
            ws.transport.write(b"".join(ws.protocol.data_to_send()))
            assert await replies(ws, 4) == ["probed", "echo m1", "echo m2", "echo m3"]
    assert paused == [False, True]


@pytest.mark.parametrize(("compression", "through_send"), [(None, False), ("deflate", True)])
async def test_data_frames_skip_uvicorns_send_unless_the_connection_compresses(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch, compression: str | None, through_send: bool
) -> None:
    """doemu's protocol writes a plain connection's data frames itself; permessage-deflate
    frames, and every close, still go through uvicorn's ``send``."""
    protocol = uvicorn_ws_protocol()
    sent: list[str] = []
    original = protocol.send

    async def spy(self: Any, message: Any) -> None:
        sent.append(message["type"])
        await original(self, message)

    monkeypatch.setattr(protocol, "send", spy)
    payloads = ["", "x" * 125, "y" * 126, "z" * 65_535, "w" * 65_536, "é" * 40_000]
    async with (
        serve(runtime, ws=protocol) as srv,
        connect(f"{srv.ws_url}/CHAT/plain/ws", compression=compression, max_size=None) as ws,
    ):
        for payload in payloads:
            await ws.send(payload)
            assert await replies(ws, 1) == [f"echo {payload}"]
        await ws.send(b"\x00\xffbinary")
        assert await replies(ws, 1) == [b"\x00\xffbinary"]
    data_frames = sent.count("websocket.send")
    assert (data_frames > 0) is through_send, sent
    assert sent.count("websocket.accept") == 1


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
