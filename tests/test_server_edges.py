"""Bad input at the edges of ``doemu dev``: raw bytes against the real server, answered in order.

The server is a real ``doemu dev`` process (:class:`e2e.harness.DevServer`) on a copy of the
counter example (plus a ``Gate`` object that holds a request until told to let it through), so
the uvicorn configuration under test is exactly the one ``doemu dev`` builds: its HTTP protocol,
its WebSocket protocol and the app. The bytes go through plain sockets because HTTP clients
neither pipeline nor send broken handshakes.

* A WebSocket handshake that is not a valid RFC 6455 one (no ``Connection: upgrade``, no key, a
  wrong version, not a GET) gets a 4xx whose JSON ``error`` names the problem, never a 500.
* A valid request followed by garbage in the same write is answered in full, then the garbage
  gets a 400 and the connection is closed.
"""

from __future__ import annotations

import json
import shutil
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from js import WebSocketPair
from websockets.sync.client import connect
from workers import DurableObject, Response

from doemu.server.app import DoemuApp
from doemu.testing.plugin import HarnessFactory
from e2e.harness import DevServer

from .polling import eventually_sync

COUNTER = Path(__file__).resolve().parent.parent / "examples" / "counter"
KEY = "dGhlIHNhbXBsZSBub25jZQ=="  # RFC 6455's sample key: 16 bytes, base64-encoded
TIMEOUT = 10.0
INVALID = "Invalid HTTP request received."  # what uvicorn logs as it refuses garbage

GATE_BINDING = """
[[durable_objects.bindings]]
name = "GATE"
class_name = "Gate"

[[migrations]]
tag = "v2"
new_sqlite_classes = ["Gate"]
"""

GATE_CLASS = """

import asyncio

GATES = {}


class Gate(DurableObject):
    # GET /GATE/<name>/wait answers once /GATE/<name>/open was called; /waiting counts them.

    async def fetch(self, request):
        name, action = self.ctx.id.name, urlparse(request.url).path.rsplit("/", 1)[-1]
        gate = GATES.setdefault(name, {"event": asyncio.Event(), "waiting": 0})
        if action == "open":
            gate["event"].set()
            return Response.json({"opened": name})
        if action == "waiting":
            return Response.json({"waiting": gate["waiting"]})
        gate["waiting"] += 1
        await gate["event"].wait()
        return Response.json({"passed": name})
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """One ``doemu dev`` for the module; every test ends by checking that it still serves."""
    root = tmp_path_factory.mktemp("edges")
    project = root / "counter"
    shutil.copytree(COUNTER, project, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    with (project / "wrangler.toml").open("a") as config:
        config.write(GATE_BINDING)
    with (project / "src" / "entry.py").open("a") as entry:
        entry.write(GATE_CLASS)
    dev = DevServer(project, root / "state", args=["--no-reload"])
    with dev:
        yield dev
    assert "Traceback" not in dev.output, dev.output


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        assert self.headers.get("content-type") == "application/json", self
        return json.loads(self.body)


class Raw:
    """A client socket that sends exact bytes and parses responses one at a time."""

    def __init__(self, server: DevServer) -> None:
        self.sock = socket.create_connection((server.host, server.port), timeout=TIMEOUT)
        self.buffer = b""
        self.eof = False

    def send(self, data: bytes) -> Raw:
        self.sock.sendall(data)
        return self

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)  # raises TimeoutError if the server says nothing
        if not chunk:
            self.eof = True
        self.buffer += chunk

    def response(self) -> Answer:
        """The next response on the connection (it must carry a Content-Length)."""
        while b"\r\n\r\n" not in self.buffer:
            assert not self.eof, f"connection closed mid-response: {self.buffer!r}"
            self._fill()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        size = int(headers["content-length"])
        while len(self.buffer) < size:
            assert not self.eof, f"connection closed mid-body: {head!r} {self.buffer!r}"
            self._fill()
        body, self.buffer = self.buffer[:size], self.buffer[size:]
        return Answer(int(status_line.split(" ")[1]), headers, body)

    def closed_by_server(self) -> bool:
        """True once the server has closed the connection with nothing more to say."""
        while not self.eof:
            self._fill()
        return self.buffer == b""

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw(server: DevServer) -> Iterator[Any]:
    opened: list[Raw] = []

    def open_() -> Raw:
        opened.append(Raw(server))
        return opened[-1]

    yield open_
    for conn in opened:
        conn.close()


def still_serves(server: DevServer, name: str) -> None:
    """A new connection gets a normal answer, and a real WebSocket still opens and echoes."""
    conn = Raw(server)
    try:
        conn.send(f"GET /COUNTER/{name}/value HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        answer = conn.response()
        assert answer.status == 200, answer
        assert answer.json()["name"] == name
    finally:
        conn.close()
    with connect(f"{server.ws_url}/COUNTER/{name}/ws", open_timeout=TIMEOUT) as ws:
        ws.send("hi")
        assert str(ws.recv(timeout=TIMEOUT)).startswith("hi #1")


def handshake(*, method: str = "GET", drop: str = "", **replace: str) -> bytes:
    """A WebSocket handshake for the counter's ``ws`` route, with headers dropped or replaced."""
    headers = {
        "Host": "x",
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Key": KEY,
        "Sec-WebSocket-Version": "13",
    }
    headers.update({name.replace("_", "-"): value for name, value in replace.items()})
    lines = [f"{method} /COUNTER/hs/ws HTTP/1.1"]
    lines += [f"{name}: {value}" for name, value in headers.items() if name != drop]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


# -- 1. WebSocket handshakes that RFC 6455 refuses ------------------------------------------------


@pytest.mark.parametrize("connection", [None, "keep-alive"], ids=["no-connection", "keep-alive"])
def test_an_upgrade_without_connection_upgrade_gets_a_json_426(
    server: DevServer, raw: Any, connection: str | None
) -> None:
    """RFC 6455 4.2.1: a handshake's Connection header must include ``upgrade``. Without it the
    request reaches ``fetch`` as plain HTTP; when ``fetch`` accepts the WebSocket anyway, the
    client is told what is wrong (not a 500), and the keep-alive connection stays usable."""
    request = (
        handshake(drop="Connection") if connection is None else handshake(Connection=connection)
    )
    conn = raw().send(request)
    answer = conn.response()
    assert answer.status == 426, answer
    assert answer.headers["upgrade"] == "websocket"
    error = answer.json()["error"]
    assert "Connection" in error and "upgrade" in error, error
    conn.send(b"GET /COUNTER/hs/value HTTP/1.1\r\nHost: x\r\n\r\n")
    assert conn.response().json() == {"value": 0, "name": "hs"}
    still_serves(server, "after-426")


class Acceptor(DurableObject):
    """Accepts a WebSocket on every request, whatever its headers (``/count`` counts them)."""

    async def fetch(self, request: Any) -> Any:
        if request.url.endswith("/count"):
            return Response.json({"sockets": len(self.ctx.getWebSockets())})
        client, server = WebSocketPair.new().object_values()
        self.ctx.acceptWebSocket(server)
        return Response(None, status=101, web_socket=client)


@pytest.mark.parametrize(
    ("headers", "status", "fragment"),
    [
        ({}, 500, "fetch() returned a 101 WebSocket response to a plain HTTP request"),
        ({"upgrade": "websocket"}, 426, "no Connection header"),
        ({"upgrade": "WebSocket", "connection": "close"}, 426, "('close') does not include"),
        ({"upgrade": "websocket, h2c", "connection": "upgrade"}, 426, "exactly 'websocket'"),
    ],
    ids=["plain", "no-connection", "connection-close", "two-protocols"],
)
async def test_a_101_to_a_request_that_was_not_upgraded(
    doemu_harness: HarnessFactory, headers: dict[str, str], status: int, fragment: str
) -> None:
    """In the app: a 101 to a plain request is the worker's bug (500); to a request that asked
    for a WebSocket without a valid handshake, the client's (426). Either way the socket the
    object accepted is forgotten, as it never reaches the network."""
    h = await doemu_harness({"ACC": Acceptor})
    transport = httpx.ASGITransport(app=DoemuApp(h.runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://local") as http:
        del http.headers["connection"]  # httpx's default keep-alive: send only the case's own
        answer = await http.get("/ACC/a/ws", headers=headers)
        assert answer.status_code == status, answer.text
        assert fragment in answer.json()["error"]
        assert (await http.get("/ACC/a/count")).json() == {"sockets": 0}


@pytest.mark.parametrize(
    ("request_bytes", "status", "fragment"),
    [
        (handshake(drop="Sec-WebSocket-Key"), 400, "missing Sec-WebSocket-Key header"),
        (handshake(Sec_WebSocket_Key="short"), 400, "invalid Sec-WebSocket-Key header: short"),
        (handshake(Sec_WebSocket_Version="8"), 400, "invalid Sec-WebSocket-Version header: 8"),
        (handshake(drop="Sec-WebSocket-Version"), 400, "missing Sec-WebSocket-Version header"),
        (handshake(method="POST", Content_Length="0"), 405, "unsupported HTTP method: POST"),
    ],
    ids=["no-key", "bad-key", "version-8", "no-version", "post"],
)
def test_a_malformed_handshake_gets_a_json_4xx_and_the_connection_closes(
    server: DevServer, raw: Any, request_bytes: bytes, status: int, fragment: str
) -> None:
    conn = raw().send(request_bytes)
    answer = conn.response()
    assert answer.status == status, answer
    error = answer.json()["error"]
    assert error.startswith("WebSocket handshake refused: ") and fragment in error, error
    if "Version" in fragment:  # RFC 6455 4.4: name the version this server speaks
        assert answer.headers["sec-websocket-version"] == "13"
    assert conn.closed_by_server()
    still_serves(server, f"after-{status}")


# -- 2. A valid request pipelined before garbage -------------------------------------------------

GARBAGE = b"NOT HTTP GARBAGE\r\n\r\n"


def test_requests_pipelined_before_garbage_are_answered_in_order_then_400(
    server: DevServer, raw: Any
) -> None:
    body = b'{"n": 1}'
    conn = raw().send(
        b"GET /COUNTER/p1/value HTTP/1.1\r\nHost: x\r\n\r\n"
        b"POST /COUNTER/p2/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body) + GARBAGE
    )
    first = conn.response()
    assert (first.status, first.json()) == (200, {"value": 0, "name": "p1"})
    second = conn.response()
    assert (second.status, second.json()) == (200, {"echo": {"n": 1}})
    third = conn.response()
    assert (third.status, third.json()) == (400, {"error": INVALID})
    assert third.headers["connection"] == "close"
    assert conn.closed_by_server()
    still_serves(server, "after-pipeline")


def test_a_request_broken_mid_body_is_never_run_and_the_earlier_one_is_answered(
    server: DevServer, raw: Any
) -> None:
    """The bad chunk is part of the second request: that request gets the 400, not ``fetch``."""
    conn = raw().send(
        b"GET /COUNTER/m1/value HTTP/1.1\r\nHost: x\r\n\r\n"
        b"POST /COUNTER/m2/incr HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"zz\r\nnot a chunk\r\n"
    )
    first = conn.response()
    assert (first.status, first.json()) == (200, {"value": 0, "name": "m1"})
    second = conn.response()
    assert (second.status, second.json()) == (400, {"error": INVALID})
    assert conn.closed_by_server()
    check = raw().send(b"GET /COUNTER/m2/value HTTP/1.1\r\nHost: x\r\n\r\n").response()
    assert check.json() == {"value": 0, "name": "m2"}  # the broken POST never incremented it
    still_serves(server, "after-broken-body")


def test_garbage_read_while_a_request_runs_is_refused_after_its_answer(
    server: DevServer, raw: Any
) -> None:
    """The garbage comes in a later read, while the request before it is still being answered."""
    conn = raw().send(b"GET /GATE/g1/wait HTTP/1.1\r\nHost: x\r\n\r\n")
    eventually_sync(
        lambda: httpx.get(f"{server.url}/GATE/g1/waiting").json()["waiting"] == 1,
        what="the request to wait at the gate",
    )
    refused = server.output.count(INVALID)
    conn.send(GARBAGE)
    eventually_sync(lambda: server.output.count(INVALID) > refused, what="the garbage read")
    assert httpx.post(f"{server.url}/GATE/g1/open").json() == {"opened": "g1"}
    first = conn.response()
    assert (first.status, first.json()) == (200, {"passed": "g1"})
    second = conn.response()
    assert (second.status, second.json()) == (400, {"error": INVALID})
    assert conn.closed_by_server()
    still_serves(server, "after-gate")


def test_garbage_alone_still_gets_a_400_at_once(server: DevServer, raw: Any) -> None:
    conn = raw().send(GARBAGE)
    answer = conn.response()
    assert (answer.status, answer.json()) == (400, {"error": INVALID})
    assert conn.closed_by_server()
    still_serves(server, "after-garbage")
