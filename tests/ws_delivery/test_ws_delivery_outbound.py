"""WebSocket delivery outbound: frames and the close leave in order (large ones, under flow
control, before the handshake), and doemu's uvicorn protocol pauses reading only when the app is
behind and writes data frames directly unless the connection compresses."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from doemu.runtime import Runtime
from doemu.sockets.bridge import WriteBatch as _WriteBatch
from doemu.sockets.bridge import _Outbound
from doemu.sockets.protocol import uvicorn_ws_protocol

from ..polling import eventually
from ..servers import serve
from .app import PROBE, replies

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
