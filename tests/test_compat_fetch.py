"""``workers.fetch`` against a real local server: bodies, streams, redirects, errors, abort.

The "provider" is a Starlette app on a real uvicorn server on loopback. It streams server-sent
events only when the test releases each one, so the tests can tell a streamed body (chunks
arrive while the provider is still producing) from a buffered one.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from httpx_sse import aconnect_sse
from starlette.applications import Starlette
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse, RedirectResponse, StreamingResponse
from starlette.routing import Route
from workers import DurableObject, Response, fetch

from doemu.compat.outbound import close_clients
from doemu.errors import FetchError
from doemu.runtime import ClassSpec, Runtime

from .polling import eventually
from .servers import serve


class Provider:
    """The local server's state: gates for its event stream, and what it saw."""

    def __init__(self) -> None:
        self.gate: asyncio.Queue[str] = asyncio.Queue()
        self.disconnected = asyncio.Event()

    async def events(self, request: StarletteRequest) -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            try:
                while (step := await self.gate.get()) != "end":
                    yield f"data: {step}\n\n".encode()
            finally:
                self.disconnected.set()  # the stream ended (done, or the client went away)

        return StreamingResponse(body(), media_type="text/event-stream")

    async def echo(self, request: StarletteRequest) -> JSONResponse:
        return JSONResponse(
            {
                "method": request.method,
                "body": (await request.body()).decode(),
                "x-test": request.headers.get("x-test"),
            },
            headers={"x-served": "yes"},
        )

    async def moved(self, request: StarletteRequest) -> RedirectResponse:
        return RedirectResponse("/echo", status_code=302)

    async def missing(self, request: StarletteRequest) -> JSONResponse:
        return JSONResponse({"error": "nope"}, status_code=404)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/events", self.events),
                Route("/echo", self.echo, methods=["GET", "POST"]),
                Route("/moved", self.moved),
                Route("/missing", self.missing),
            ]
        )


@pytest.fixture(autouse=True)
async def _close_pool() -> AsyncIterator[None]:
    """Each test's loop gets its own connection pool: close it with the loop's test."""
    yield
    await close_clients()


@pytest.fixture
async def provider() -> AsyncIterator[tuple[Provider, str]]:
    state = Provider()
    config = uvicorn.Config(state.app(), host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    task = asyncio.ensure_future(server.serve())
    await eventually(lambda: server.started or task.done(), what="the provider to start")
    port = server.servers[0].sockets[0].getsockname()[1]
    yield state, f"http://127.0.0.1:{port}"
    state.gate.put_nowait("end")
    server.should_exit = True
    await task


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    runtime = Runtime(
        worker_name="outbound",
        classes={"Relay": ClassSpec(Relay)},
        bindings={"RELAY": "Relay"},
        persist_dir=tmp_path,
    )
    await runtime.start()
    yield runtime
    await runtime.close()


async def test_fetch_returns_status_headers_and_body(provider: tuple[Provider, str]) -> None:
    _state, base = provider
    response = await fetch(f"{base}/echo", method="POST", body="hi", headers={"x-test": "1"})
    assert (response.status, response.ok, response.url) == (200, True, f"{base}/echo")
    assert response.headers["x-served"] == "yes"
    assert await response.json() == {"method": "POST", "body": "hi", "x-test": "1"}
    missing = await fetch(f"{base}/missing")
    assert (missing.status, missing.ok) == (404, False)  # an error status is a response
    with pytest.raises(OSError, match="404"):
        missing.raise_for_status()


async def test_redirects_follow_by_default_and_can_be_refused(
    provider: tuple[Provider, str],
) -> None:
    _state, base = provider
    followed = await fetch(f"{base}/moved")
    assert (followed.status, followed.redirected, followed.url) == (200, True, f"{base}/echo")
    manual = await fetch(f"{base}/moved", redirect="manual")
    assert (manual.status, manual.headers["location"]) == (302, "/echo")
    with pytest.raises(FetchError, match="redirect"):
        await fetch(f"{base}/moved", redirect="error")


async def test_an_event_stream_is_read_chunk_by_chunk(provider: tuple[Provider, str]) -> None:
    state, base = provider
    response = await fetch(f"{base}/events")
    reader = response.body.getReader()
    for step in ("one", "two"):
        state.gate.put_nowait(step)
        result = await asyncio.wait_for(reader.read(), 5)
        assert result.value.to_bytes() == f"data: {step}\n\n".encode()
    state.gate.put_nowait("end")
    assert (await asyncio.wait_for(reader.read(), 5)).done


async def test_abort_closes_the_upstream_connection(provider: tuple[Provider, str]) -> None:
    state, base = provider
    response = await fetch(f"{base}/events")
    state.gate.put_nowait("one")
    await response.body.getReader().read()
    response.abort()
    await asyncio.wait_for(state.disconnected.wait(), 5)  # the provider saw the client leave
    with pytest.raises(ValueError, match="abort_controller is not set"):
        Response("made here").abort()


async def test_unreachable_hosts_and_bad_urls_are_clear_errors() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed once the block ends: nothing listens there
    with pytest.raises(FetchError, match=f"127.0.0.1:{port}"):
        await fetch(f"http://127.0.0.1:{port}/x")
    with pytest.raises(FetchError, match="Invalid URL"):
        await fetch("not a url")
    with pytest.raises(FetchError, match="http: and https:"):
        await fetch("ftp://example.com/file")
    with pytest.raises(TypeError, match="unknown options"):
        await fetch("http://127.0.0.1/", bodyy="typo")


class Relay(DurableObject):
    """Streams a provider's events into its own response, as an agent relays an LLM stream."""

    async def fetch(self, request: Any) -> Any:
        upstream = await fetch(request.headers.get("x-upstream"), cf={"cacheTtl": 5})
        return Response(upstream.body, headers={"content-type": "text/event-stream"})


async def test_an_object_relays_a_provider_stream_as_it_comes(
    provider: tuple[Provider, str], runtime: Runtime
) -> None:
    state, base = provider
    async with serve(runtime) as srv, httpx.AsyncClient() as http:
        headers = {"x-upstream": f"{base}/events"}
        async with aconnect_sse(http, "GET", f"{srv.url}/RELAY/r/x", headers=headers) as source:
            events = source.aiter_sse()
            for step in ("alpha", "beta"):
                state.gate.put_nowait(step)
                assert (await asyncio.wait_for(anext(events), 5)).data == step
            state.gate.put_nowait("end")
            with pytest.raises(StopAsyncIteration):
                await asyncio.wait_for(anext(events), 5)
