"""``SessionStream`` over SSE: replay then live, late and reconnecting readers, heartbeats, many
readers, slow and stalled ones, and readers that go away.

Readers are real: httpx with httpx-sse against a uvicorn server, or in-process bodies read
through the runtime's own streams where a test must decide exactly when the client reads.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from doemu.persist import object_file
from doemu.runtime import Runtime
from doemu.testing.plugin import HarnessFactory

from .polling import eventually
from .servers import serve
from .session_stream_app import (
    CLASSES,
    SmallBacklogStream,
    chunk_events,
    session_runtime,
    sse_events,
)


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    async with session_runtime(tmp_path) as runtime:
        yield runtime


# -- SSE ------------------------------------------------------------------------------------------


async def test_sse_replays_then_streams_live_each_row_durable_first_and_closes_at_the_end(
    runtime: Runtime,
) -> None:
    stub = runtime.env.SESSION.getByName("live")
    assert await stub.push_many(3) == [0, 1, 2]
    events: list[dict[str, Any]] = []
    async with serve(runtime) as srv:
        reader = asyncio.ensure_future(sse_events(srv, "SESSION/live/sse?fromSequence=1", events))
        await eventually(lambda: len(events) == 2, what="the replay of 1 and 2")
        assert events == [
            {"type": "chunk", "sequence": n, "chunk": {"type": "text_delta", "i": n, "pad": ""}}
            for n in (1, 2)
        ]
        host = runtime.host("SESSION", "live")
        for n in (3, 4, 5):
            assert await stub.push({"type": "live", "n": n}) == n
            await eventually(lambda: len(events) == n, what=f"live chunk {n}")  # noqa: B023
            assert events[-1] == {"type": "chunk", "sequence": n, "chunk": {"type": "live", "n": n}}
            # Another connection (as after a crash) already sees the row the event carries.
            with sqlite3.connect(object_file(host.kind.directory, host.hex_id)) as db:
                row = db.execute("SELECT max(sequence) FROM cf_server_stream_chunks").fetchone()
            assert row[0] == n
        assert not reader.done()
        await stub.end_run({"summary": "done", "sources": ["a"]})
        await asyncio.wait_for(reader, 5)  # the response closed after the terminal
        assert chunk_events(events) == [1, 2, 3, 4, 5]
        assert events[-1] == {"type": "end", "finalOutput": {"summary": "done", "sources": ["a"]}}
        assert (await stub.status())["sse"] == 0


async def test_a_late_sse_client_gets_replay_and_the_terminal_then_the_response_closes(
    runtime: Runtime,
) -> None:
    stub = runtime.env.SESSION.getByName("late")
    await stub.push_many(4)
    await stub.fail_run("model overloaded")
    async with serve(runtime) as srv:
        late: list[dict[str, Any]] = []
        await asyncio.wait_for(sse_events(srv, "SESSION/late/sse?fromSequence=0", late), 5)
        assert chunk_events(late) == [0, 1, 2, 3]
        assert late[-1] == {"type": "fail", "error": "model overloaded"}
        caught_up: list[dict[str, Any]] = []  # saw everything already: just the terminal
        await asyncio.wait_for(sse_events(srv, "SESSION/late/sse?fromSequence=4", caught_up), 5)
        assert caught_up == [{"type": "fail", "error": "model overloaded"}]
        assert (await stub.status())["terminal"] == {"type": "fail", "error": "model overloaded"}


#: Non-ASCII, a line separator and a newline: all must arrive inside one ``data:`` line.
DELTA = "hé \u2028 \n"


async def test_a_live_fail_closes_every_sse_response(runtime: Runtime) -> None:
    stub = runtime.env.SESSION.getByName("failing")
    async with serve(runtime) as srv:
        streams = [[], []]  # type: ignore[var-annotated]
        readers = [
            asyncio.ensure_future(sse_events(srv, "SESSION/failing/sse", into)) for into in streams
        ]
        await eventually(lambda: _sse_count(stub, 2), what="both SSE readers registered")
        await stub.push({"type": "text_delta", "delta": DELTA})
        await stub.fail_run("boom")
        await asyncio.wait_for(asyncio.gather(*readers), 5)
    for events in streams:
        assert events == [
            {"type": "chunk", "sequence": 0, "chunk": {"type": "text_delta", "delta": DELTA}},
            {"type": "fail", "error": "boom"},
        ]


async def _sse_count(stub: Any, count: int) -> bool:
    return bool((await stub.status())["sse"] == count)


async def test_after_a_crash_a_reconnecting_client_carries_on_gap_free(runtime: Runtime) -> None:
    stub = runtime.env.SESSION.getByName("phoenix")
    events: list[dict[str, Any]] = []
    async with serve(runtime) as srv:
        first = asyncio.ensure_future(sse_events(srv, "SESSION/phoenix/sse", events))
        await eventually(lambda: _sse_count(stub, 1), what="the reader")
        await stub.push_many(3)
        await eventually(lambda: len(events) == 3, what="chunks 0..2")
        assert srv.control.reset("SESSION", "phoenix", "SIGKILL")
        with pytest.raises(httpx.HTTPError):  # the response dies with the object
            await asyncio.wait_for(first, 5)
        assert await stub.push_many(2) == [3, 4]  # a new activation continues the numbering
        after = chunk_events(events)[-1] + 1
        second = asyncio.ensure_future(
            sse_events(srv, f"SESSION/phoenix/sse?fromSequence={after}", events)
        )
        await eventually(lambda: len(events) == 5, what="the replay of 3 and 4")
        await stub.push({"type": "live again"})
        await stub.end_run("recovered")
        await asyncio.wait_for(second, 5)
    assert chunk_events(events) == [0, 1, 2, 3, 4, 5]
    assert events[-1] == {"type": "end", "finalOutput": "recovered"}


async def test_a_client_that_goes_away_is_dropped_without_an_error(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    stub = runtime.env.SESSION.getByName("leaver")
    async with serve(runtime) as srv:
        async with httpx.AsyncClient() as http:
            async with aconnect_sse(http, "GET", f"{srv.url}/SESSION/leaver/sse") as source:
                events = source.aiter_sse()
                await stub.push({"type": "hello"})
                first = await asyncio.wait_for(anext(events), 5)
                assert json.loads(first.data)["sequence"] == 0
                assert (await stub.status())["sse"] == 1
        # The client hung up: its reader is dropped, and the stream goes on for everyone else.
        await eventually(lambda: _sse_count(stub, 0), what="the reader to be dropped")
        assert await stub.push({"type": "after"}) == 1
        await eventually(lambda: not runtime.host("SESSION", "leaver").busy, what="idle object")
    assert "Traceback" not in caplog.text
    assert "never retrieved" not in caplog.text


async def test_heartbeats_flow_while_the_response_is_open(runtime: Runtime) -> None:
    stub = runtime.env.BEAT.getByName("beat")
    lines: list[str] = []

    async def read() -> None:
        async with httpx.AsyncClient() as http:
            async with http.stream("GET", f"{srv.url}/BEAT/beat/sse") as response:
                async for line in response.aiter_lines():
                    lines.append(line)

    async with serve(runtime) as srv:
        reader = asyncio.ensure_future(read())
        await eventually(lambda: lines.count(": heartbeat") >= 2, what="two heartbeats")
        await stub.push({"type": "between beats"})
        await eventually(lambda: any(line.startswith("data: ") for line in lines))
        count = lines.count(": heartbeat")
        await eventually(lambda: lines.count(": heartbeat") > count, what="beats after a chunk")
        await stub.end_run(None)
        await asyncio.wait_for(reader, 5)
        assert [json.loads(line[6:]) for line in lines if line.startswith("data: ")] == [
            {"type": "chunk", "sequence": 0, "chunk": {"type": "between beats"}},
            {"type": "end", "finalOutput": None},
        ]
        assert all(line in {": heartbeat", ""} or line.startswith("data: ") for line in lines)
        assert (await stub.status())["sse"] == 0  # no reader left: the timer stopped


async def test_ten_sse_clients_each_get_every_chunk_in_order(runtime: Runtime) -> None:
    stub = runtime.env.SESSION.getByName("crowd")
    total, batch = 2000, 250
    streams: list[list[dict[str, Any]]] = [[] for _ in range(10)]
    async with serve(runtime) as srv:
        readers = [
            asyncio.ensure_future(sse_events(srv, "SESSION/crowd/sse?fromSequence=0", into))
            for into in streams[:5]
        ]
        await eventually(lambda: _sse_count(stub, 5), what="the first five readers")
        for start in range(0, total, batch):
            if start == total // 2:  # five more join mid-run: replay, then live
                readers += [
                    asyncio.ensure_future(sse_events(srv, "SESSION/crowd/sse", into))
                    for into in streams[5:]
                ]
            assert await stub.push_many(batch, 40, True) == list(range(start, start + batch))
        await stub.end_run({"chunks": total})
        await asyncio.wait_for(asyncio.gather(*readers), 30)
    for events in streams:
        assert chunk_events(events) == list(range(total))
        assert [e["chunk"]["i"] for e in events[:-1]] == [n % batch for n in range(total)]
        assert events[-1] == {"type": "end", "finalOutput": {"chunks": total}}


async def test_a_slow_reader_replays_at_its_own_pace_without_a_gap_or_a_duplicate(
    doemu_harness: HarnessFactory,
) -> None:
    """In process, the test is the client and reads only when it decides: the replay fills the
    body past its high-water mark and waits; chunks appended meanwhile, and the run's end, are
    picked up by the replay itself."""
    h = await doemu_harness(CLASSES)
    stub = h.env.PAGES.getByName("slow")
    await stub.push_many(100, 1000)  # ~100 KB: more than one body's worth of buffer
    response = await stub.fetch("http://session/sse?fromSequence=0")
    body = response.body.getReader()
    await stub.push_many(50, 1000, True)  # while the replay waits for the reader
    await stub.end_run("fin")
    text = b""
    while not (result := await asyncio.wait_for(body.read(), 5)).done:
        text += result.value.to_bytes()
    events = [json.loads(part[6:]) for part in text.decode().split("\n\n") if part]
    assert chunk_events(events) == list(range(150))
    assert events[-1] == {"type": "end", "finalOutput": "fin"}
    assert (await stub.status())["sse"] == 0


async def test_a_stalled_sse_reader_is_dropped_past_its_backlog_and_nine_live_ones_get_it_all(
    doemu_harness: HarnessFactory,
) -> None:
    """Memory stays flat with one reader that stops reading: bytes waiting for it never pass
    ``MAX_SSE_BACKLOG_BYTES`` (here 128 KiB, plus the response stream's own 64 KiB), it is
    dropped there and told to replay, and the nine that read get every chunk. Measured in
    bytes buffered (``sse_buffered_bytes``), sampled after every batch of the run."""
    h = await doemu_harness(CLASSES)
    stub = h.env.BACKLOG.getByName("stalled")
    bodies = [
        (await stub.fetch("http://session/sse?fromSequence=0")).body.getReader() for _ in range(10)
    ]
    stalled, live = bodies[0], bodies[1:]
    received = [b""] * len(live)

    async def read(i: int) -> None:
        while not (result := await live[i].read()).done:
            received[i] += result.value.to_bytes()

    readers = [asyncio.ensure_future(read(i)) for i in range(len(live))]
    limit = SmallBacklogStream.MAX_SSE_BACKLOG_BYTES
    samples = []
    total = 0
    for _ in range(40):  # 40 x 25 chunks of ~1 KB: ~1 MB, eight times the backlog allowed
        await stub.push_many(25, 1000, True)
        total += 25
        samples.append(await stub.buffered())
    await stub.end_run("fin")
    await asyncio.wait_for(asyncio.gather(*readers), 30)
    assert max(samples) <= limit, f"bytes buffered for the stalled reader grew to {max(samples)}"
    assert (await stub.status())["sse"] == 0  # the stalled one was dropped, the others ended
    with pytest.raises(Exception, match="fell more than 131072 bytes behind; reconnect"):
        while not (await asyncio.wait_for(stalled.read(), 5)).done:
            pass
    for text in received:
        events = [json.loads(part[6:]) for part in text.decode().split("\n\n") if part]
        assert chunk_events(events) == list(range(total))
        assert events[-1] == {"type": "end", "finalOutput": "fin"}
