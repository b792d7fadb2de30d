"""A real uvicorn server on loopback, inside the test's event loop (for WebSocket tests)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn

from doemu.control import RuntimeControl
from doemu.runtime import Runtime
from doemu.server.app import DoemuApp

from .polling import eventually


@dataclass
class Served:
    runtime: Runtime
    server: uvicorn.Server
    url: str
    ws_url: str

    @property
    def control(self) -> RuntimeControl:
        return RuntimeControl(self.runtime)


@asynccontextmanager
async def serve(runtime: Runtime, *, ws: Any = "auto", **app_options: Any) -> AsyncIterator[Served]:
    """Serve ``runtime`` on a free loopback port until the block ends (``ws``: uvicorn's)."""
    app = DoemuApp(runtime, **app_options)
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        lifespan="on",
        log_level="warning",
        ws=ws,
        ws_ping_interval=None,
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    task = asyncio.ensure_future(server.serve())
    await eventually(lambda: server.started or task.done(), what="uvicorn to start")
    if task.done():
        await task
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Served(runtime, server, f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        await task
