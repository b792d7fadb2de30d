"""``SessionStream``: a session's chunks, numbered gap-free, replayed then streamed live.

A minimal :class:`~agents.Agent` hosts the stream with the routes the agent server gives it
(``/sse``, ``/history``, WebSocket upgrades with ``?fromSequence=N``). Readers are real: httpx
with httpx-sse against a uvicorn server for SSE, the ``websockets`` client for WebSockets, and
in-process bodies read through the runtime's own streams where a test must decide exactly when
the client reads. Crashes are ``ctx.abort`` / ``h.reset`` (uncommitted writes dropped).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from httpx_sse import aconnect_sse
from websockets.asyncio.client import ClientConnection, connect
from workers import Response

from agents import Agent, Connection, ConnectionContext
from agents.server import SessionStream, StreamRangeError
from doemu.persist import object_file
from doemu.runtime import ClassSpec, Runtime
from doemu.testing.plugin import HarnessFactory

from .polling import eventually
from .servers import Served, serve

#: The latest sequence seen inside an open transaction, once it hangs there.
HANGING: list[int] = []


def _query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query, keep_blank_values=True).items()}


class Session(Agent):
    """One session: the stream, the routes, and RPC methods standing in for the agent loop."""

    heartbeat_ms = 60_000
    stream_class = SessionStream

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.stream = self.stream_class(self, heartbeat_ms=self.heartbeat_ms)

    def should_send_protocol_messages(self, connection: Connection, ctx: ConnectionContext) -> bool:
        return False  # stream readers get stream events only

    async def on_connect(self, connection: Connection, ctx: ConnectionContext) -> None:
        try:
            start = self.stream.check_from_sequence(
                _query(str(ctx.request.url)).get("fromSequence")
            )
        except StreamRangeError as exc:
            connection.close(4000 + exc.status, str(exc)[:120])
            return
        self.stream.attach(connection, start)

    async def on_message(self, connection: Connection, message: Any) -> None:
        if not self.stream.handle_message(connection, message):
            connection.send(json.dumps({"type": "unhandled", "message": message}))

    async def on_request(self, request: Any) -> Any:
        path = urlsplit(str(request.url)).path.rsplit("/", 1)[-1]
        query = _query(str(request.url))
        try:
            start = self.stream.check_from_sequence(query.get("fromSequence"))
        except StreamRangeError as exc:
            return Response.json({"error": str(exc)}, status=exc.status)
        if path == "sse":
            return self.stream.sse(start)
        if path == "history":
            return Response.json(self.stream.history(start, int(query.get("limit", "100"))))
        return Response("not found", status=404)

    # -- the agent loop's side, over RPC ---------------------------------------------------------
    def push(self, chunk: Any) -> int:
        return self.stream.append(chunk)

    async def push_many(self, count: int, size: int = 0, yielding: bool = False) -> list[int]:
        sequences = []
        for i in range(count):
            sequences.append(self.stream.append({"type": "text_delta", "i": i, "pad": "x" * size}))
            if yielding:
                await asyncio.sleep(0)
        return sequences

    def end_run(self, output: Any) -> None:
        self.stream.finish(output)

    def fail_run(self, error: str) -> None:
        self.stream.fail(error)

    def new_run(self) -> None:
        self.stream.reopen()

    def crash_after_pushing(self, count: int) -> None:
        for i in range(count):
            self.stream.append({"type": "doomed", "i": i})
        self.ctx.abort("simulated crash before the turn committed")

    async def push_in_open_transaction(self, count: int) -> None:
        async def body(_txn: Any) -> None:
            for i in range(count):
                self.stream.append({"type": "doomed", "i": i})
            HANGING.append(self.stream.latest_sequence)
            await asyncio.Event().wait()  # hangs with the transaction open: nothing committed

        await self.ctx.storage.transaction(body)

    def errors(self) -> list[list[str]]:
        """What the stream refuses, as [class name, message] pairs."""
        attempts: list[Any] = [
            lambda: self.stream.append({"bad": {1, 2}}),
            lambda: self.stream.append(["not", "an", "object"]),
            lambda: self.stream.append({"nan": float("nan")}),
            lambda: self.stream.append({"big": "x" * (SessionStream.MAX_CHUNK_BYTES + 1)}),
            lambda: self.stream.finish(object()),
        ]
        out = []
        for attempt in attempts:
            try:
                attempt()
                out.append(["ok", ""])
            except Exception as exc:
                out.append([type(exc).__name__, str(exc)])
        return out

    def closed_errors(self) -> list[str]:
        out = []
        for attempt in (lambda: self.stream.append({"late": 1}), lambda: self.stream.fail("again")):
            try:
                attempt()
            except Exception as exc:
                out.append(f"{type(exc).__name__}: {exc}")
        return out

    def check(self, value: Any) -> Any:
        try:
            return self.stream.check_from_sequence(value)
        except StreamRangeError as exc:
            return f"{type(exc).__name__} {exc.status}"

    def status(self) -> dict[str, Any]:
        return {
            "latest": self.stream.latest_sequence,
            "terminal": self.stream.terminal,
            "sse": self.stream.sse_readers,
        }

    def buffered(self) -> int:
        return self.stream.sse_buffered_bytes


class FastBeat(Session):
    heartbeat_ms = 20


class SmallPageStream(SessionStream):
    REPLAY_PAGE = 10


class SmallPages(Session):
    stream_class = SmallPageStream


class SmallBacklogStream(SessionStream):
    MAX_SSE_BACKLOG_BYTES = 128 * 1024


class SmallBacklog(Session):
    stream_class = SmallBacklogStream


CLASSES = {"SESSION": Session, "BEAT": FastBeat, "PAGES": SmallPages, "BACKLOG": SmallBacklog}


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    runtime = Runtime(
        worker_name="streams",
        classes={name: ClassSpec(cls) for name, cls in CLASSES.items()},
        bindings={binding: binding for binding in CLASSES},
        persist_dir=tmp_path,
    )
    yield runtime
    await runtime.close()


def chunk_events(events: list[dict[str, Any]]) -> list[int]:
    return [e["sequence"] for e in events if e["type"] == "chunk"]


async def sse_events(srv: Served, path: str, into: list[dict[str, Any]]) -> None:
    """Read one SSE response to its end, each event parsed into ``into``."""
    async with httpx.AsyncClient(timeout=30) as http:
        async with aconnect_sse(http, "GET", f"{srv.url}/{path}") as source:
            assert source.response.headers["content-type"] == "text/event-stream"
            async for event in source.aiter_sse():
                into.append(json.loads(event.data))


async def ws_events(ws: ClientConnection, count: int) -> list[dict[str, Any]]:
    return [json.loads(await asyncio.wait_for(ws.recv(), 5)) for _ in range(count)]


# -- sequences ------------------------------------------------------------------------------------


async def test_sequences_are_gap_free_across_crashes_and_a_restart(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness(CLASSES)
    stub = h.env.SESSION.getByName("crashy")
    assert await stub.status() == {"latest": -1, "terminal": None, "sse": 0}
    assert await stub.push_many(3) == [0, 1, 2]

    with pytest.raises(Exception, match="simulated crash"):
        await stub.crash_after_pushing(2)  # 3 and 4 were taken, then rolled back
    assert await stub.push({"type": "after-abort"}) == 3

    hanging = asyncio.ensure_future(stub.push_in_open_transaction(5))
    HANGING.clear()
    await eventually(lambda: HANGING, what="the appends inside the open transaction")
    assert HANGING == [8] and not hanging.done()
    h.reset("SESSION", "crashy", "SIGKILL")  # the open transaction's rows die with it
    with pytest.raises(Exception, match="SIGKILL"):
        await hanging
    assert await stub.push({"type": "after-reset"}) == 4

    await h.restart()
    stub = h.env.SESSION.getByName("crashy")
    assert await stub.push({"type": "after-restart"}) == 5
    response = await stub.fetch("http://session/history?fromSequence=0&limit=100")
    history = json.loads(await response.text())
    assert [c["sequence"] for c in history["chunks"]] == list(range(6))
    assert [c["chunk"]["type"] for c in history["chunks"]] == [
        "text_delta", "text_delta", "text_delta", "after-abort", "after-reset", "after-restart",
    ]  # fmt: skip
    assert history["latestSequence"] == 5 and history["hasMore"] is False


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


# -- history and fromSequence ---------------------------------------------------------------------


async def _get(stub: Any, query: str) -> tuple[int, Any]:
    response = await stub.fetch(f"http://session/history?{query}")
    return response.status, json.loads(await response.text())


async def test_history_pages_with_has_more_and_a_clamped_limit(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness(CLASSES)
    stub = h.env.SESSION.getByName("pages")
    assert await _get(stub, "") == (200, {"chunks": [], "hasMore": False, "latestSequence": -1})
    await stub.push_many(1005)

    status, page = await _get(stub, "fromSequence=0&limit=10")
    assert status == 200 and page["hasMore"] is True and page["latestSequence"] == 1004
    assert page["chunks"][3] == {"sequence": 3, "chunk": {"type": "text_delta", "i": 3, "pad": ""}}
    assert [c["sequence"] for c in page["chunks"]] == list(range(10))
    _, tail = await _get(stub, "fromSequence=1000&limit=10")
    assert [c["sequence"] for c in tail["chunks"]] == list(range(1000, 1005))
    assert tail["hasMore"] is False
    _, exact = await _get(stub, "fromSequence=995&limit=10")  # ends on the last chunk exactly
    assert len(exact["chunks"]) == 10 and exact["hasMore"] is False
    _, at_end = await _get(stub, "fromSequence=1005")
    assert at_end == {"chunks": [], "hasMore": False, "latestSequence": 1004}
    _, one = await _get(stub, "fromSequence=7&limit=0")  # clamped up to 1
    assert [c["sequence"] for c in one["chunks"]] == [7] and one["hasMore"] is True
    _, most = await _get(stub, "limit=5000")  # clamped down to 1000
    assert len(most["chunks"]) == 1000 and most["hasMore"] is True
    _, default = await _get(stub, "fromSequence=2")
    assert [c["sequence"] for c in default["chunks"]] == list(range(2, 102))


@pytest.mark.parametrize(
    ("value", "status", "said"),
    [
        ("-1", 416, "fromSequence '-1' is out of range: it must be a whole number from 0 to 3"),
        ("4", 416, "fromSequence '4' is out of range: it must be a whole number from 0 to 3"),
        ("9" * 40, 416, "is out of range: it must be a whole number from 0 to 3"),
        ("abc", 400, "fromSequence must be a whole number from 0 to 3 (latestSequence 2 + 1)"),
        ("1.5", 400, "got '1.5'"),
        ("", 400, "got ''"),
        ("+1", 400, "got '+1'"),
        (" 1", 400, "got ' 1'"),
    ],
)
async def test_a_bad_from_sequence_is_refused_naming_the_value_and_the_range(
    doemu_harness: HarnessFactory, value: str, status: int, said: str
) -> None:
    h = await doemu_harness(CLASSES)
    stub = h.env.SESSION.getByName("ranges")
    await stub.push_many(3)
    for path in ("history", "sse"):
        response = await stub.fetch(
            f"http://session/{path}?" + httpx.QueryParams({"fromSequence": value}).__str__()
        )
        assert response.status == status
        assert said in json.loads(await response.text())["error"]


async def test_check_from_sequence_accepts_the_whole_valid_range(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness(CLASSES)
    stub = h.env.SESSION.getByName("valid")
    assert await stub.check(None) == 0  # absent: from the start
    assert await stub.check("0") == 0  # an empty stream can be read from 0 (its future)
    await stub.push_many(3)
    assert [await stub.check(v) for v in ("0", "2", "3", 3, "002")] == [0, 2, 3, 3, 2]
    assert await stub.check(True) == "StreamRangeError 400"
    assert await stub.check(1.5) == "StreamRangeError 400"  # (1.0 crosses RPC as 1)
    assert await stub.check(-3) == "StreamRangeError 416"


# -- runs, and what the stream refuses ------------------------------------------------------------


async def test_reopen_starts_a_new_run_whose_sequences_continue(runtime: Runtime) -> None:
    stub = runtime.env.SESSION.getByName("runs")
    await stub.push_many(3)
    await stub.end_run("first")
    assert (await stub.status())["terminal"] == {"type": "end", "finalOutput": "first"}
    refusal = (
        "StreamClosedError: the session's stream holds the last run's 'end' event: call "
        "reopen() before a new run appends, finishes or fails"
    )
    assert await stub.closed_errors() == [refusal, refusal]
    await stub.new_run()
    assert await stub.status() == {"latest": 2, "terminal": None, "sse": 0}
    events: list[dict[str, Any]] = []
    async with serve(runtime) as srv:
        reader = asyncio.ensure_future(sse_events(srv, "SESSION/runs/sse?fromSequence=2", events))
        await eventually(lambda: events, what="the replay of chunk 2")
        assert await stub.push({"type": "second run"}) == 3
        await stub.end_run("second")
        await asyncio.wait_for(reader, 5)
    assert chunk_events(events) == [2, 3]  # the first run's end is not replayed: it was reopened
    assert events[-1] == {"type": "end", "finalOutput": "second"}


async def test_a_chunk_that_is_no_json_object_is_refused_and_nothing_is_stored(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness(CLASSES)
    stub = h.env.SESSION.getByName("strict")
    refused = await stub.errors()
    assert [name for name, _ in refused] == ["StreamPayloadError"] * 5
    assert "a stream chunk must be JSON-serialisable" in refused[0][1]
    assert "must be a JSON object (a mapping), got list" in refused[1][1]
    assert "a stream chunk must be JSON-serialisable" in refused[2][1]  # NaN is not JSON
    assert "over the 1800000-byte limit of one stored row" in refused[3][1]
    assert "the run's final output must be JSON-serialisable" in refused[4][1]
    assert await stub.status() == {"latest": -1, "terminal": None, "sse": 0}
    assert await stub.push({"type": "fine"}) == 0
