"""``SessionStream`` over WebSockets: replay then live, late sockets, hibernation, and a bad
``fromSequence`` refused.

Readers are real: the ``websockets`` client against a uvicorn server.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect

from doemu.runtime import Runtime

from .polling import eventually
from .servers import Served, serve
from .session_stream_app import chunk_events, session_runtime


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    async with session_runtime(tmp_path) as runtime:
        yield runtime


async def ws_events(ws: ClientConnection, count: int) -> list[dict[str, Any]]:
    return [json.loads(await asyncio.wait_for(ws.recv(), 5)) for _ in range(count)]


# -- WebSocket ------------------------------------------------------------------------------------


async def test_a_websocket_replays_then_streams_live_answers_pings_and_outlives_the_run(
    runtime: Runtime,
) -> None:
    stub = runtime.env.SESSION.getByName("sock")
    await stub.push_many(3)
    async with serve(runtime) as srv, connect(f"{srv.ws_url}/SESSION/sock/ws?fromSequence=1") as ws:
        assert chunk_events(await ws_events(ws, 2)) == [1, 2]
        assert await stub.push({"type": "live"}) == 3
        assert await ws_events(ws, 1) == [
            {"type": "chunk", "sequence": 3, "chunk": {"type": "live"}}
        ]
        await ws.send(json.dumps({"type": "ping"}))
        assert await ws_events(ws, 1) == [{"type": "pong"}]
        await ws.send("not json")  # not the stream's: the agent's own handler answers
        assert await ws_events(ws, 1) == [{"type": "unhandled", "message": "not json"}]
        await stub.end_run({"answer": 42})
        assert await ws_events(ws, 1) == [{"type": "end", "finalOutput": {"answer": 42}}]
        # The socket stays open: the next run in the session streams to it too.
        await stub.new_run()
        assert await stub.push({"type": "second run"}) == 4
        assert chunk_events(await ws_events(ws, 1)) == [4]
        await ws.send('{"type":"ping"}')
        assert await ws_events(ws, 1) == [{"type": "pong"}]


async def test_a_late_websocket_gets_replay_and_the_terminal_and_stays_open(
    runtime: Runtime,
) -> None:
    stub = runtime.env.SESSION.getByName("late-sock")
    await stub.push_many(2)
    await stub.fail_run("tool crashed")
    async with serve(runtime) as srv, connect(f"{srv.ws_url}/SESSION/late-sock/ws") as ws:
        events = await ws_events(ws, 3)
        assert chunk_events(events) == [0, 1]
        assert events[-1] == {"type": "fail", "error": "tool crashed"}
        await ws.send('{"type":"ping"}')
        assert await ws_events(ws, 1) == [{"type": "pong"}]


async def test_live_chunks_reach_a_websocket_after_the_object_hibernated(runtime: Runtime) -> None:
    stub = runtime.env.SESSION.getByName("sleepy")
    await stub.push({"type": "before"})
    async with serve(runtime) as srv:
        async with (
            connect(f"{srv.ws_url}/SESSION/sleepy/ws?fromSequence=1") as reader,
            connect(f"{srv.ws_url}/SESSION/sleepy/ws?fromSequence=1") as other,
        ):
            await other.send('{"type":"ping"}')  # both are attached once this is answered
            assert await ws_events(other, 1) == [{"type": "pong"}]
            assert await srv.control.evict("SESSION", "sleepy")
            assert not runtime.host("SESSION", "sleepy").live
            # A new activation (woken by the agent loop's call) finds its readers again.
            assert await stub.push({"type": "after wake"}) == 1
            expected = [{"type": "chunk", "sequence": 1, "chunk": {"type": "after wake"}}]
            assert await ws_events(reader, 1) == expected
            assert await ws_events(other, 1) == expected
            await other.close()
            await eventually(lambda: _closed_seen(srv))
            assert await stub.push({"type": "only one left"}) == 2
            assert chunk_events(await ws_events(reader, 1)) == [2]


def _closed_seen(srv: Served) -> bool:
    sockets = srv.runtime.host("SESSION", "sleepy").sockets
    return len(sockets.get(None)) == 1


async def test_a_websocket_with_a_bad_from_sequence_is_refused(runtime: Runtime) -> None:
    stub = runtime.env.SESSION.getByName("picky")
    await stub.push_many(2)
    async with serve(runtime) as srv:
        async with connect(f"{srv.ws_url}/SESSION/picky/ws?fromSequence=9") as ws:
            with pytest.raises(Exception) as caught:
                await asyncio.wait_for(ws.recv(), 5)
        assert ws.close_code == 4416
        assert "'9' is out of range" in str(ws.close_reason)
        assert caught.type.__name__ == "ConnectionClosedError"
