"""Start-up of a real ``doemu dev`` after a SIGKILL: what a client sees before the ready line.

``doemu dev`` binds and listens before it imports the server, the runtime or the worker, so a
restarting server queues connections instead of refusing them; requests queued that early are
answered once the server can, from the state the crash left. These tests hold a restart at a
known point with a gate: the worker's module opens a FIFO at import time and blocks until the
test opens it for writing, which is after the socket listens and before anything is served.
"""

from __future__ import annotations

import json
import os
import socket
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from e2e.harness import DevServer, port_is_open
from tests.polling import eventually_sync

ENTRY = """
import os

from js import Date
from workers import DurableObject, Response

_gate = os.environ.get("STARTUP_GATE")
if _gate:  # a FIFO: blocks until the test opens it for writing (see tests/test_startup.py)
    with open(_gate) as fifo:
        fifo.read()


class Counter(DurableObject):
    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        sql = ctx.storage.sql
        sql.exec("CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY, value INTEGER)")
        sql.exec("INSERT OR IGNORE INTO counter (id, value) VALUES (1, 0)")
        sql.exec("CREATE TABLE IF NOT EXISTS fired (at REAL, scheduled REAL)")

    async def fetch(self, request):
        action = request.url.rstrip("/").rsplit("/", 1)[-1].split("?")[0]
        sql = self.ctx.storage.sql
        if action == "incr":
            row = sql.exec("UPDATE counter SET value = value + 1 RETURNING value").one()
            return Response.json({"value": row["value"]})
        if action == "alarm":
            at = Date.now() + float(request.url.split("in_ms=")[1])
            await self.ctx.storage.setAlarm(at)
            return Response.json({"alarm": at})
        if action == "fired":
            rows = sql.exec("SELECT at, scheduled FROM fired").toArray()
            return Response.json([[r["at"], r["scheduled"]] for r in rows])
        row = sql.exec("SELECT value FROM counter WHERE id = 1").one()
        return Response.json({"value": row["value"]})

    async def alarm(self, alarm_info=None):
        self.ctx.storage.sql.exec(
            "INSERT INTO fired (at, scheduled) VALUES (?, ?)", Date.now(), alarm_info.scheduledTime
        )
"""

WRANGLER = """
name = "startup"
main = "src/entry.py"
compatibility_date = "2026-11-01"
compatibility_flags = ["python_workers"]

[[durable_objects.bindings]]
name = "COUNTER"
class_name = "Counter"

[[migrations]]
tag = "v1"
new_sqlite_classes = ["Counter"]
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "wrangler.toml").write_text(WRANGLER)
    (root / "src" / "entry.py").write_text(textwrap.dedent(ENTRY))
    return root


@pytest.fixture
def server(project: Path, tmp_path: Path) -> Iterator[DevServer]:
    """A ``doemu dev`` on a fixed free port (a restart must come back on the same one)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dev = DevServer(project, tmp_path / "state", args=["--port", str(port)])
    yield dev
    if dev.proc is not None and dev.proc.poll() is None:
        dev.kill()


class GatedStart:
    """``server.start()`` in a thread, its worker import held by a FIFO until :meth:`open`."""

    def __init__(self, server: DevServer, fifo: Path) -> None:
        os.mkfifo(fifo)
        self.fifo = fifo
        server.env["STARTUP_GATE"] = str(fifo)
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._start, args=(server,), daemon=True)
        self.thread.start()

    def _start(self, server: DevServer) -> None:
        try:
            server.start()
        except BaseException as exc:  # reported by join()
            self.errors.append(exc)

    def open(self) -> None:
        with open(self.fifo, "w"):
            pass  # the reader's read() returns at end of file

    def join(self) -> None:
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "doemu dev did not become ready"
        if self.errors:
            raise self.errors[0]


def _send(port: int, path: str) -> socket.socket:
    """Connect and send ``GET path``; the caller reads the answer."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    return sock


def _answer(sock: socket.socket) -> tuple[int, Any]:
    data = b""
    with sock:
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body)


def _nothing_yet(sock: socket.socket) -> bool:
    """No answer (nor a close) has arrived on ``sock`` so far; nothing is consumed."""
    sock.setblocking(False)
    try:
        sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return True
    finally:
        sock.settimeout(30)
    return False


def test_requests_queued_while_a_restart_imports_are_answered_from_the_crashed_state(
    server: DevServer, tmp_path: Path
) -> None:
    """1. Three acknowledged increments, then SIGKILL.
    2. Restart with the worker's import held: the port already accepts a connection, and a
       request sent on it waits (no ready line, no answer) instead of being refused.
    3. Release the import: that request is answered with the value from before the crash."""
    server.start()
    for expected in (1, 2, 3):
        response = httpx.post(f"{server.url}/COUNTER/c/incr")
        assert response.json() == {"value": expected}
    server.kill()

    gated = GatedStart(server, tmp_path / "gate")
    eventually_sync(
        lambda: port_is_open(server.host, server.port), within=30, what="the port to listen"
    )
    queued = _send(server.port, "/COUNTER/c/value")
    assert _nothing_yet(queued)  # the worker is still being imported: nothing can answer
    assert not any(line.startswith("doemu ready") for line in server.lines)
    gated.open()
    assert _answer(queued) == (200, {"value": 3})
    gated.join()


def test_an_object_woken_before_ready_still_gets_its_overdue_alarm_once(
    server: DevServer, tmp_path: Path
) -> None:
    """1. Set an alarm 300 ms ahead; once the admin API reports it pending, SIGKILL.
    2. Restart with the worker's import held until the alarm is overdue, with a request to the
       object queued meanwhile: the object is activated by that request as the server comes up,
       right when the persisted alarms are loaded and armed.
    3. The request is answered, and the alarm fires exactly once, for its original time."""
    server.start()
    alarm_at = httpx.post(f"{server.url}/COUNTER/a/alarm?in_ms=300").json()["alarm"]
    api = f"{server.url}/__doemu/api/objects/COUNTER/a/alarm"
    eventually_sync(lambda: httpx.get(api).json()["scheduled_time"], what="the pending alarm")
    server.kill()

    gated = GatedStart(server, tmp_path / "gate")
    eventually_sync(
        lambda: port_is_open(server.host, server.port), within=30, what="the port to listen"
    )
    queued = _send(server.port, "/COUNTER/a/fired")
    eventually_sync(lambda: time.time() * 1000 > alarm_at + 50, what="the alarm to be overdue")
    gated.open()
    status, fired = _answer(queued)
    assert status == 200 and len(fired) <= 1
    gated.join()
    rows = eventually_sync(
        lambda: httpx.get(f"{server.url}/COUNTER/a/fired").json(), what="the alarm to fire"
    )
    assert len(rows) == 1 and rows[0][1] == alarm_at
    assert httpx.get(api).json()["scheduled_time"] is None  # delivered, not pending any more
    assert len(httpx.get(f"{server.url}/COUNTER/a/fired").json()) == 1
