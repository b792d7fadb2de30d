"""WebSocket delivery without a task per frame: a suspended handler still keeps its own task, so
``asyncio.timeout``, a failing ``TaskGroup``, a reset or a self-cancel ends only that handler, and
each event runs in its own context.

Every server test runs twice: with uvicorn's default WebSocket protocol and with doemu's
(``uvicorn_ws_protocol``; the fixtures are in conftest.py).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from websockets.asyncio.client import connect

from doemu.runtime import Runtime

from ..polling import eventually
from ..servers import serve
from .app import GATES, LOG, replies

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
