"""Malformed requests each get a clear 4xx, and the server keeps serving."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from .harness import DevServer

FOREIGN_ID = "0" * 64


def raw_http(server: DevServer, payload: bytes) -> bytes:
    """Send bytes on a fresh connection and return what comes back (status line first)."""
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


HTTP_CASES = [
    ("GET", "/", None, 404, "no route"),
    ("GET", "/COUNTER", None, 404, "no route"),
    ("GET", "/NOPE/x/value", None, 404, "unknown binding 'NOPE'"),
    ("GET", f"/__doemu/api/objects/COUNTER/{FOREIGN_ID}/kv", None, 400, "not valid for this"),
    ("GET", "/__doemu/api/objects/NOPE/x/kv", None, 404, "unknown Durable Object binding"),
    ("GET", "/__doemu/api/nothing-here", None, 404, "no admin route"),
    ("POST", "/__doemu/api/objects/COUNTER/x/sql", b"{not json", 400, "expected a JSON body"),
    ("POST", "/__doemu/api/objects/COUNTER/x/sql", b'{"query": 1}', 400, "expected a JSON"),
    ("POST", "/__doemu/api/clock", b'{"advance_ms": 5}', 409, "the clock is real"),
]


def test_bad_requests_get_4xx_and_the_server_keeps_serving(
    dev_server: Any, counter_project: Path
) -> None:
    """1. Send each malformed request.  2. Check its status and JSON error.
    3. A normal request still works afterwards."""
    server = dev_server(counter_project)
    httpx.post(f"{server.url}/COUNTER/x/incr").raise_for_status()
    with httpx.Client(base_url=server.url) as http:
        for method, path, body, status, fragment in HTTP_CASES:
            headers = {"content-type": "application/json"} if body is not None else None
            response = http.request(method, path, content=body, headers=headers)
            assert response.status_code == status, (path, response.text)
            assert fragment in response.json()["error"], (path, response.text)
        # A user error inside fetch() is a JSON 500, and the object still works.
        response = http.post("/COUNTER/x/echo", content=b"{broken json")
        assert response.status_code == 500
        assert "JSONDecodeError" in response.json()["error"]
        assert http.post("/COUNTER/x/echo", json={"a": 1}).json() == {"echo": {"a": 1}}
        assert http.post("/COUNTER/x/incr").json() == {"value": 2}


def test_oversized_and_broken_requests(dev_server: Any, counter_project: Path) -> None:
    server = dev_server(counter_project)
    huge = raw_http(
        server,
        b"POST /COUNTER/big/incr HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999999\r\n\r\nab",
    )
    assert huge.startswith(b"HTTP/1.1 413"), huge[:200]
    assert b"exceeds" in huge
    garbage = raw_http(server, b"NOT-HTTP\r\n\r\n")
    assert garbage.startswith(b"HTTP/1.1 400"), garbage[:200]
    no_key = raw_http(
        server,
        b"GET /COUNTER/ws1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
        b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    assert no_key.split(b" ")[1].startswith(b"4"), no_key[:200]
    assert httpx.post(f"{server.url}/COUNTER/big/incr").json() == {"value": 1}


@pytest.mark.parametrize(
    ("path", "status"),
    [("/NOPE/x/ws", 404), ("/COUNTER/ws2/value", 200), ("/COUNTER/ws2/nothing", 404)],
)
def test_websocket_handshakes_that_fetch_refuses(
    dev_server: Any, counter_project: Path, path: str, status: int
) -> None:
    server = dev_server(counter_project)
    with pytest.raises(InvalidStatus) as info:
        connect(f"{server.ws_url}{path}", open_timeout=5)
    assert info.value.response.status_code == status
    assert httpx.get(f"{server.url}/COUNTER/ws2/value").status_code == 200
