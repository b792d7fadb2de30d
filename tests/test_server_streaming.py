"""Streamed bodies over a real server: SSE to a real client, back-pressure, disconnects, uploads.

An object returns ``Response(ts.readable)`` and keeps writing from a ``waitUntil`` task, as
Python Workers do. A real HTTP client (httpx over loopback, with httpx-sse parsing the events)
must see each event while the producer is still running, the object must stay in memory while
its body is open, every chunk must leave only after the storage writes made before it are
durable, and a client that goes away must make the producer's next write fail.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sqlite3
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse
from js import TextEncoder, TransformStream
from pyodide.ffi import create_proxy
from workers import DurableObject, Response, WorkerEntrypoint

from doemu.errors import StreamError
from doemu.persist import object_file
from doemu.runtime import ClassSpec, Runtime

from .polling import eventually
from .servers import serve

#: Gates the producers wait on between events, so the test decides when each event is sent.
GATES: dict[str, asyncio.Queue[str]] = {}
#: What each producer observed ("cancelled: …" when a write failed after a disconnect).
SEEN: dict[str, list[str]] = {}


class Feed(DurableObject):
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS sent (n INTEGER)")

    async def fetch(self, request: Any) -> Any:
        path = request.url.rsplit("/", 1)[-1]
        if path == "upload":
            return await self.upload(request)
        if path == "nobody":
            return Response.json({"body": request.body is not None, "text": await request.text()})
        if path == "big":
            return self.big(int(request.headers.get("x-size") or 0))
        ts = TransformStream.new()
        writer = ts.writable.getWriter()
        self.ctx.waitUntil(create_proxy(self.produce(path, writer)))
        return Response(
            ts.readable, headers={"content-type": "text/event-stream", "cache-control": "no-cache"}
        )

    async def produce(self, name: str, writer: Any) -> None:
        seen = SEEN.setdefault(name, [])
        encoder = TextEncoder.new()
        try:
            n = 0
            while (step := await GATES[name].get()) != "end":
                n += 1
                self.ctx.storage.sql.exec("INSERT INTO sent VALUES (?)", n)  # durable before
                await writer.write(encoder.encode(f"event: tick\ndata: {step}\n\n"))
                seen.append(f"wrote {step}")
            await writer.close()
            seen.append("closed")
        except StreamError as exc:
            seen.append(f"cancelled: {exc}")

    def big(self, size: int) -> Any:
        ts = TransformStream.new()
        writer = ts.writable.getWriter()

        async def pump() -> None:
            chunk = b"z" * 65536
            for _ in range(size // len(chunk)):
                await writer.write(chunk)
            await writer.close()

        self.ctx.waitUntil(create_proxy(pump()))
        return Response(ts.readable)

    async def upload(self, request: Any) -> Any:
        sizes = [len(chunk.to_bytes()) async for chunk in request.body]
        return Response.json({"bytes": sum(sizes), "chunks": len(sizes), "largest": max(sizes)})


class Default(WorkerEntrypoint):
    async def fetch(self, request: Any) -> Any:
        name = request.url.rsplit("/", 1)[-1]
        return await self.env.FEED.getByName("via-entry").fetch(f"http://feed/{name}")


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    runtime = Runtime(
        worker_name="streaming",
        classes={"Feed": ClassSpec(Feed)},
        bindings={"FEED": "Feed"},
        persist_dir=tmp_path,
    )
    yield runtime
    await runtime.close()


def _gate(name: str) -> asyncio.Queue[str]:
    GATES[name] = asyncio.Queue()
    SEEN.pop(name, None)
    return GATES[name]


async def _next_event(events: Any) -> Any:
    return await asyncio.wait_for(anext(events), 5)


async def test_events_arrive_one_by_one_while_the_producer_still_runs(runtime: Runtime) -> None:
    gate = _gate("sse-1")
    async with serve(runtime) as srv, httpx.AsyncClient() as http:
        url = f"{srv.url}/FEED/one/sse-1"
        async with aconnect_sse(http, "GET", url) as source:
            response = source.response
            assert response.headers["content-type"] == "text/event-stream"
            assert "content-length" not in response.headers
            assert response.headers.get("transfer-encoding") == "chunked"
            events = source.aiter_sse()
            for step in ("a", "b", "c"):
                gate.put_nowait(step)
                event = await _next_event(events)
                assert (event.event, event.data) == ("tick", step)
                # The next event has not been produced yet: this one came on its own.
                assert SEEN["sse-1"] == [f"wrote {s}" for s in "abc"[: "abc".index(step) + 1]]
            gate.put_nowait("end")
            with pytest.raises(StopAsyncIteration):
                await _next_event(events)
    assert SEEN["sse-1"][-1] == "closed"


async def test_a_chunk_leaves_only_after_the_writes_before_it_are_durable(
    runtime: Runtime,
) -> None:
    gate = _gate("gated")
    async with serve(runtime) as srv, httpx.AsyncClient() as http:
        host = runtime.host("FEED", "durable")
        async with aconnect_sse(http, "GET", f"{srv.url}/FEED/durable/gated") as source:
            events = source.aiter_sse()
            for n, step in enumerate("xyz", start=1):
                gate.put_nowait(step)
                await _next_event(events)
                # Another connection (as after a crash) already sees the row written before it.
                with sqlite3.connect(object_file(host.kind.directory, host.hex_id)) as db:
                    assert db.execute("SELECT max(n) FROM sent").fetchone()[0] == n
            gate.put_nowait("end")


async def test_the_object_stays_in_memory_while_its_body_is_open(runtime: Runtime) -> None:
    gate = _gate("held")
    async with serve(runtime) as srv, httpx.AsyncClient() as http:
        async with aconnect_sse(http, "GET", f"{srv.url}/FEED/held/held") as source:
            events = source.aiter_sse()
            gate.put_nowait("one")
            await _next_event(events)
            host = runtime.host("FEED", "held")
            assert host.busy  # the handler returned long ago; the open body keeps it
            eviction = asyncio.ensure_future(srv.control.evict("FEED", "held"))
            await asyncio.sleep(0)
            assert not eviction.done()
            gate.put_nowait("end")
            await eventually(lambda: eviction.done(), what="the eviction once the body ended")
    assert eviction.result() is True


async def test_a_client_that_disconnects_cancels_the_producer(runtime: Runtime) -> None:
    gate = _gate("gone")
    async with serve(runtime) as srv:
        async with (
            httpx.AsyncClient() as http,
            aconnect_sse(http, "GET", f"{srv.url}/FEED/gone/gone") as source,
        ):
            gate.put_nowait("first")
            await _next_event(source.aiter_sse())

        # The client is gone: a producer that keeps producing gets an error from its next write
        # once the server has noticed (instead of waiting forever on a body nobody reads).
        def keep_producing() -> bool:
            if gate.empty():
                gate.put_nowait("more")
            return any(s.startswith("cancelled") for s in SEEN.get("gone", []))

        await eventually(keep_producing, what="the producer to see the disconnect")
        assert "the client disconnected" in SEEN["gone"][-1]
        assert not runtime.host("FEED", "gone").busy
        # The server and other objects are untouched.
        other = await httpx.AsyncClient().get(f"{srv.url}/FEED/other/big", headers={"x-size": "0"})
        assert other.status_code == 200


async def test_large_bodies_cross_in_chunks_both_ways(runtime: Runtime) -> None:
    size = 8 * 1024 * 1024
    async with serve(runtime) as srv, httpx.AsyncClient(timeout=30) as http:
        received = 0
        async with http.stream(
            "GET", f"{srv.url}/FEED/big/big", headers={"x-size": str(size)}
        ) as r:
            assert "content-length" not in r.headers
            async for chunk in r.aiter_raw():
                received += len(chunk)
        assert received == size

        async def upload() -> AsyncIterator[bytes]:
            for _ in range(64):
                yield b"u" * 65536

        answer = await http.post(f"{srv.url}/FEED/up/upload", content=upload())
        body = answer.json()
        assert body["bytes"] == 64 * 65536
        assert body["chunks"] > 1 and body["largest"] < 4 * 1024 * 1024  # never whole


async def test_a_stub_fetch_passes_a_streamed_body_through(runtime: Runtime) -> None:
    gate = _gate("relay")
    async with serve(runtime, entry=Default) as srv, httpx.AsyncClient() as http:
        async with aconnect_sse(http, "GET", f"{srv.url}/relay") as source:
            events = source.aiter_sse()
            for step in ("1", "2"):
                gate.put_nowait(step)
                assert (await _next_event(events)).data == step
            gate.put_nowait("end")


async def test_head_of_a_streamed_response_sends_headers_only(runtime: Runtime) -> None:
    async with serve(runtime) as srv, httpx.AsyncClient() as http:
        response = await http.head(f"{srv.url}/FEED/h/big", headers={"x-size": "131072"})
    assert response.status_code == 200
    assert response.content == b""


async def test_a_request_with_neither_length_nor_chunks_has_no_body(runtime: Runtime) -> None:
    """RFC 9112 section 6.3: a POST with neither Content-Length nor Transfer-Encoding has no
    body. It gets none (not an empty stream), and answering thousands of them keeps nothing
    alive (the stream machinery it used to get left a finalizer and a core behind each time)."""
    async with serve(runtime) as srv:
        host, port = srv.url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))

        async def post() -> bytes:
            writer.write(b"POST /FEED/n/nobody HTTP/1.1\r\nHost: doemu\r\n\r\n")
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            return await reader.readexactly(length)

        assert json.loads(await post()) == {"body": False, "text": ""}
        gc.collect()
        before = sum(isinstance(o, weakref.finalize) for o in gc.get_objects())
        for _ in range(300):
            await post()
        gc.collect()
        after = sum(isinstance(o, weakref.finalize) for o in gc.get_objects())
        writer.close()
    assert after - before < 30
