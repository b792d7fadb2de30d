"""Durability levels and the output gate: where fsyncs happen, and what output waits for.

At the ``power`` level every commit that wrote is fsynced before anything that depends on it
leaves the object: an RPC result, a WebSocket frame, a stream chunk. These tests replace the
file layer's ``fsync_paths`` with a recorder that can hold fsyncs back, so they see *which*
files are synced, *when*, and that output really waits (not only that data survives a SIGKILL).
At both levels, output made while a ``transaction()`` holds the commit back waits for the
commit, and a commit that fails resets the object instead of being swallowed.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from js import TransformStream, WebSocketPair
from pyodide.ffi import create_proxy
from workers import DurableObject, Response, fetch

from doemu import clone
from doemu.alarms import service as alarm_service
from doemu.errors import ObjectResetError, StorageError
from doemu.storage import durability
from doemu.testing.plugin import HarnessFactory

from .polling import eventually


class FsyncRecorder:
    """Stands in for ``fsync_paths``: records each call's paths; ``hold()`` makes calls wait."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        #: The thread each call ran on.
        self.threads: list[tuple[str, tuple[str, ...]]] = []
        #: The paths each call synced data-only (``fdatasync``), beside ``calls``.
        self.data_only: list[bool] = []
        self._open = threading.Event()
        self._open.set()
        self._lock = threading.Lock()
        self.error: OSError | None = None

    def __call__(self, paths: Any, *, data_only: bool = False) -> None:
        paths = tuple(paths)
        with self._lock:
            self.calls.append(paths)
            self.data_only.append(data_only)
            self.threads.append((threading.current_thread().name, paths))
        assert self._open.wait(10), "an fsync was held for 10 s"
        if self.error is not None:
            raise self.error

    def hold(self) -> None:
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def synced(self, suffix: str) -> list[tuple[str, ...]]:
        """The calls that synced a path ending in ``suffix``."""
        with self._lock:
            return [c for c in self.calls if any(p.endswith(suffix) for p in c)]


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> Iterator[FsyncRecorder]:
    recorder = FsyncRecorder()
    monkeypatch.setattr(durability, "fsync_paths", recorder)
    monkeypatch.setattr(alarm_service, "fsync_paths", recorder)
    yield recorder
    recorder.release()


#: Events the test sets to let a waiting handler go on.
GATES: dict[str, asyncio.Event] = {}
#: What the test's WebSocket client received.
RECEIVED: list[str] = []


def gate(name: str) -> asyncio.Event:
    return GATES.setdefault(name, asyncio.Event())


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    GATES.clear()
    RECEIVED.clear()
    yield
    for event in GATES.values():
        event.set()


class Counter(DurableObject):
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v INTEGER)")

    def _bump(self) -> int:
        row = self.ctx.storage.sql.exec(
            "INSERT INTO t VALUES ('n', 1) ON CONFLICT(k) DO UPDATE SET v = v + 1 RETURNING v"
        ).one()
        return int(row["v"])

    async def incr(self) -> int:
        return self._bump()

    async def get(self) -> int:
        rows = self.ctx.storage.sql.exec("SELECT v FROM t WHERE k = 'n'").toArray()
        return int(rows[0]["v"]) if rows else 0

    async def fetch(self, request: Any) -> Any:
        if request.url.endswith("/stream"):
            ts = TransformStream.new()
            writer = ts.writable.getWriter()

            async def pump() -> None:
                self._bump()
                await writer.write(b"after the write")
                await writer.close()

            self.ctx.waitUntil(create_proxy(pump()))
            return Response(ts.readable)
        client, server = WebSocketPair.new().object_values()
        self.ctx.acceptWebSocket(server)
        return Response(None, status=101, web_socket=client)

    async def write_then_request(self, url: str) -> int:
        """Write, then call out: the request must not leave before the write is durable."""
        value = self._bump()
        response = await fetch(url)
        assert await response.text() == "ok"
        return value

    async def note(self, text: str) -> int:
        """Write, then tell every socket: the frame must not leave before the write."""
        value = self._bump()
        for ws in self.ctx.getWebSockets():
            ws.send(f"{text} {value}")
        return value

    async def send_inside_transaction(self) -> None:
        async def body(txn: Any) -> None:
            self._bump()
            for ws in self.ctx.getWebSockets():
                ws.send("inside")
            gate("in-txn").set()
            await gate("finish-txn").wait()

        await self.ctx.storage.transaction(body)

    async def answer_while_transaction_open(self) -> str:
        async def body(txn: Any) -> None:
            self._bump()
            gate("in-txn").set()
            await gate("finish-txn").wait()

        # Not awaited by the handler:
        self.ctx.waitUntil(create_proxy(self.ctx.storage.transaction(body)))
        await gate("in-txn").wait()
        return "answered"

    async def break_the_commit(self) -> str:
        sql = self.ctx.storage.sql
        sql.exec("CREATE TABLE IF NOT EXISTS parent (id INTEGER PRIMARY KEY)")
        sql.exec(
            "CREATE TABLE IF NOT EXISTS child (id INTEGER PRIMARY KEY, parent INTEGER "
            "REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)"
        )
        sql.exec("INSERT INTO child VALUES (1, 42)")  # checked only at COMMIT: it fails there
        await asyncio.sleep(0)  # the turn ends: the implicit commit runs (and fails)
        await asyncio.sleep(0)
        return "reported success for writes that are gone"


async def _socket(stub: Any) -> Any:
    response = await stub.fetch("http://do/ws", headers={"Upgrade": "websocket"})
    client = response._web_socket
    client.accept()
    client.addEventListener("message", lambda event: RECEIVED.append(str(event.data)))
    return client


def _wal(h: Any, name: str) -> str:
    return f"{h.runtime.host('C', name).storage.database_path}-wal"


# -- where the power level fsyncs ------------------------------------------------------------------
async def test_power_level_fsyncs_a_write_before_its_result_leaves(
    doemu_harness: HarnessFactory, fsyncs: FsyncRecorder
) -> None:
    h = await doemu_harness({"C": Counter}, durability="power")
    stub = h.env.C.getByName("a")
    assert await stub.incr() == 1  # a new object: its file and directory entries are synced
    wal = _wal(h, "a")
    first = fsyncs.synced(wal)
    assert len(first) == 1
    directory = str(Path(wal).parent)
    assert any(directory in call for call in fsyncs.calls), "the new file's directory entry"
    # The WAL's data (fdatasync, as SQLite syncs a WAL); the directory entry in full (fsync).
    kinds = dict(zip(fsyncs.calls, fsyncs.data_only, strict=True))
    assert kinds[(wal,)] is True
    assert all(kinds[c] is False for c in fsyncs.calls if directory in c and wal not in c)

    fsyncs.hold()
    call = asyncio.ensure_future(stub.incr())
    await eventually(lambda: len(fsyncs.synced(wal)) == len(first) + 1, what="the WAL fsync")
    for _ in range(20):
        await asyncio.sleep(0)
    assert not call.done(), "the result left before its commit was fsynced"
    fsyncs.release()
    assert await asyncio.wait_for(call, 10) == 2


async def test_reads_and_the_process_level_never_fsync(
    doemu_harness: HarnessFactory, fsyncs: FsyncRecorder
) -> None:
    h = await doemu_harness({"C": Counter}, durability="power")
    stub = h.env.C.getByName("a")
    await stub.incr()
    wal = _wal(h, "a")
    before = len(fsyncs.synced(wal))
    assert await stub.get() == 1
    assert await stub.get() == 1
    assert len(fsyncs.synced(wal)) == before  # nothing written, nothing to sync
    await h.close()

    fsyncs.calls.clear()
    p = await doemu_harness({"C": Counter}, durability="process", persist_dir=h.persist_dir / "p")
    stub = p.env.C.getByName("b")
    for _ in range(3):
        await stub.incr()
    await p.evict("C", "b")
    assert await stub.incr() == 4
    assert fsyncs.calls == []


async def test_one_fsync_covers_every_commit_made_while_another_runs(
    doemu_harness: HarnessFactory, fsyncs: FsyncRecorder
) -> None:
    h = await doemu_harness({"C": Counter}, durability="power")
    stub = h.env.C.getByName("a")
    await stub.incr()
    wal = _wal(h, "a")
    base = len(fsyncs.synced(wal))
    fsyncs.hold()
    first = asyncio.ensure_future(stub.incr())
    await eventually(lambda: len(fsyncs.synced(wal)) == base + 1, what="the first fsync")
    rest = [asyncio.ensure_future(stub.incr()) for _ in range(5)]
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(fsyncs.synced(wal)) == base + 1  # they wait for the one in flight to end
    assert not any(c.done() for c in [first, *rest])
    fsyncs.release()
    results = await asyncio.wait_for(asyncio.gather(first, *rest), 10)
    assert sorted(results) == [2, 3, 4, 5, 6, 7]
    assert len(fsyncs.synced(wal)) == base + 2  # one more fsync for all five


async def test_the_loop_serves_other_objects_while_an_fsync_runs(
    doemu_harness: HarnessFactory, fsyncs: FsyncRecorder
) -> None:
    h = await doemu_harness({"C": Counter}, durability="power")
    a, b = h.env.C.getByName("a"), h.env.C.getByName("b")
    await a.incr()
    await b.incr()
    fsyncs.hold()
    held = asyncio.ensure_future(a.incr())
    await eventually(lambda: len(fsyncs.synced(_wal(h, "a"))) == 2, what="a's fsync")
    assert await asyncio.wait_for(b.get(), 10) == 1  # another object answers meanwhile
    assert not held.done()
    fsyncs.release()
    assert await held == 2


async def test_a_frame_waits_for_the_fsync_of_the_write_before_it(
    doemu_harness: HarnessFactory, fsyncs: FsyncRecorder
) -> None:
    h = await doemu_harness({"C": Counter}, durability="power")
    stub = h.env.C.getByName("a")
    await _socket(stub)
    await stub.incr()
    fsyncs.hold()
    note = asyncio.ensure_future(stub.note("hello"))
    await eventually(lambda: len(fsyncs.synced(_wal(h, "a"))) >= 2, what="the note's fsync")
    for _ in range(20):
        await asyncio.sleep(0)
    assert RECEIVED == [], "the frame left before the write it follows was durable"
    fsyncs.release()
    assert await asyncio.wait_for(note, 10) == 2
    await eventually(lambda: RECEIVED == ["hello 2"], what="the frame")


async def test_an_outgoing_request_waits_for_the_fsync_of_the_write_before_it(
    doemu_harness: HarnessFactory, fsyncs: FsyncRecorder
) -> None:
    arrived = asyncio.Event()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        arrived.set()
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()

    upstream = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = upstream.sockets[0].getsockname()[1]
    try:
        h = await doemu_harness({"C": Counter}, durability="power")
        stub = h.env.C.getByName("a")
        await stub.incr()
        fsyncs.hold()
        call = asyncio.ensure_future(stub.write_then_request(f"http://127.0.0.1:{port}/"))
        await eventually(lambda: len(fsyncs.synced(_wal(h, "a"))) >= 2, what="the write's fsync")
        for _ in range(20):
            await asyncio.sleep(0)
        assert not arrived.is_set(), "the request left before the write it follows was durable"
        fsyncs.release()
        assert await asyncio.wait_for(call, 10) == 2
        assert arrived.is_set()
    finally:
        upstream.close()


async def test_a_stream_chunk_waits_for_the_fsync_of_the_write_before_it(
    doemu_harness: HarnessFactory, fsyncs: FsyncRecorder
) -> None:
    h = await doemu_harness({"C": Counter}, durability="power")
    stub = h.env.C.getByName("a")
    await stub.incr()
    fsyncs.hold()
    response = await stub.fetch("http://do/stream")
    reader = response.body.getReader()
    read = asyncio.ensure_future(reader.read())
    await eventually(lambda: len(fsyncs.synced(_wal(h, "a"))) >= 2, what="the pump's fsync")
    for _ in range(20):
        await asyncio.sleep(0)
    assert not read.done(), "the chunk left before the write it follows was durable"
    fsyncs.release()
    chunk = await asyncio.wait_for(read, 10)
    assert bytes(chunk.value) == b"after the write"


async def test_a_failed_fsync_resets_the_object_and_fails_the_caller(
    doemu_harness: HarnessFactory, fsyncs: FsyncRecorder
) -> None:
    h = await doemu_harness({"C": Counter}, durability="power")
    stub = h.env.C.getByName("a")
    await stub.incr()
    fsyncs.error = OSError(5, "Input/output error")
    with pytest.raises((StorageError, ObjectResetError), match=r"durable|storage failed"):
        await stub.incr()
    fsyncs.error = None
    assert not h.is_live("C", "a")


# -- output inside a transaction waits for its commit (both levels) --------------------------------
@pytest.mark.parametrize("level", ["process", "power"])
async def test_a_frame_sent_inside_a_transaction_waits_for_its_commit(
    doemu_harness: HarnessFactory, level: str
) -> None:
    h = await doemu_harness({"C": Counter}, durability=level)
    stub = h.env.C.getByName("a")
    await _socket(stub)
    running = asyncio.ensure_future(stub.send_inside_transaction())
    await gate("in-txn").wait()
    for _ in range(20):
        await asyncio.sleep(0)
    assert RECEIVED == [], "the frame left before the transaction committed"
    gate("finish-txn").set()
    await asyncio.wait_for(running, 10)
    await eventually(lambda: RECEIVED == ["inside"], what="the frame after the commit")
    assert await stub.get() == 1


@pytest.mark.parametrize("level", ["process", "power"])
async def test_a_result_waits_for_a_transaction_the_handler_did_not_await(
    doemu_harness: HarnessFactory, level: str
) -> None:
    h = await doemu_harness({"C": Counter}, durability=level)
    stub = h.env.C.getByName("a")
    answer = asyncio.ensure_future(stub.answer_while_transaction_open())
    await gate("in-txn").wait()
    for _ in range(20):
        await asyncio.sleep(0)
    assert not answer.done(), "the result left while the transaction was still open"
    gate("finish-txn").set()
    assert await asyncio.wait_for(answer, 10) == "answered"
    assert await stub.get() == 1


# -- a failing commit is loud ----------------------------------------------------------------------
@pytest.mark.parametrize("level", ["process", "power"])
async def test_a_commit_failing_at_the_end_of_a_turn_resets_the_object(
    doemu_harness: HarnessFactory, level: str
) -> None:
    h = await doemu_harness({"C": Counter}, durability=level)
    stub = h.env.C.getByName("a")
    await stub.incr()
    with pytest.raises(ObjectResetError, match="Could not commit storage writes"):
        await stub.break_the_commit()
    assert await stub.get() == 1  # a new instance; the failed turn's writes are gone
    assert await stub.incr() == 2


async def test_a_new_objects_file_and_its_entries_are_fsynced_off_the_loop(
    doemu_harness: HarnessFactory, fsyncs: FsyncRecorder
) -> None:
    """The database file, its WAL and the directory entries naming them are fsynced by the
    first commit's job in the pool; the thread making spare files syncs nothing (a burst of new
    objects must not run it dry), and nothing of an object is fsynced on the loop."""
    h = await doemu_harness({"C": Counter}, durability="power")
    await h.env.C.getByName("warm").incr()  # the namespace directory's own entry, once
    fsyncs.hold()
    first = asyncio.ensure_future(h.env.C.getByName("a").incr())
    await eventually(lambda: h.runtime.host("C", "a").storage is not None, what="activation")
    wal = _wal(h, "a")
    database = wal.removesuffix("-wal")
    directory = str(Path(database).parent)

    def synced() -> set[str]:
        return {path for call in fsyncs.calls for path in call}

    await eventually(lambda: {database, directory, wal} <= synced(), what="the three fsyncs")
    for _ in range(20):
        await asyncio.sleep(0)
    assert not first.done(), "the first result left before the new file was durable"
    fsyncs.release()
    assert await asyncio.wait_for(first, 10) == 1
    loop_thread = threading.current_thread().name
    on_loop = [paths for thread, paths in fsyncs.threads if thread == loop_thread]
    # Only the alarm tables' new files, once, as the runtime is built: never an object's.
    assert on_loop and all(paths[0].endswith("metadata.sqlite") for paths in on_loop)
    assert not any(thread == "doemu-files" for thread, _ in fsyncs.threads)


class Alarmed(DurableObject):
    async def arm(self, at: float) -> float | None:
        await self.ctx.storage.setAlarm(at)
        return await self.ctx.storage.getAlarm()

    async def alarm(self) -> None:
        pass


async def test_a_new_alarm_time_is_durable_in_the_table_before_the_object_commits_it(
    doemu_harness: HarnessFactory, fsyncs: FsyncRecorder
) -> None:
    """At the power level the namespace's alarm table (what start-up reads) must hold a new
    alarm before the object's own file can: the object's commit waits, off the loop, for the
    table's fsync, and the caller's answer waits for both."""
    h = await doemu_harness({"A": Alarmed}, durability="power")
    stub = h.env.A.getByName("a")
    await stub.arm(h.clock.now() + 60_000)
    database = str(h.runtime.host("A", "a").storage.database_path)
    table_wal = str(Path(database).parent / "metadata.sqlite-wal")

    def committed_alarm() -> float | None:
        with contextlib.closing(sqlite3.connect(database)) as db:
            row = db.execute("SELECT value FROM _cf_METADATA WHERE key = 'alarm'").fetchone()
        return None if row is None else float(clone.decode(row[0]))

    fsyncs.hold()
    at = h.clock.now() + 120_000
    armed = asyncio.ensure_future(stub.arm(at))
    await eventually(lambda: fsyncs.synced(table_wal), what="the table's fsync")
    for _ in range(20):
        await asyncio.sleep(0)
    assert committed_alarm() == h.clock.now() + 60_000, "the object committed before the table"
    assert not armed.done()
    fsyncs.release()
    assert await asyncio.wait_for(armed, 10) == at
    assert committed_alarm() == at


async def test_any_failure_of_an_fsync_reaches_its_waiter(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job whose fsync raised something other than an ``OSError`` (a recorder with the wrong
    signature did) killed its thread and left the commit waiting forever; it must be handed back
    as that job's error, and the pool keeps working."""
    calls: list[tuple[str, ...]] = []

    def flaky(paths: Any, **_: Any) -> None:
        calls.append(tuple(paths))
        if len(calls) == 1:
            raise ValueError("not an OSError")

    monkeypatch.setattr(durability, "fsync_paths", flaky)
    pool = durability.SyncPool(threads=1)
    loop = asyncio.get_running_loop()
    results: list[asyncio.Future[BaseException | None]] = [loop.create_future() for _ in range(2)]
    try:
        for future in results:
            pool.sync(("a",), future.set_result)
        first, second = await asyncio.wait_for(asyncio.gather(*results), 10)
    finally:
        pool.close()
    assert isinstance(first, ValueError) and second is None
