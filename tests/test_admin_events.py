"""The admin API's event stream (SSE) in-process and over a real server, and the CLI's client."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator, MutableMapping
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from doemu.errors import DoemuError
from doemu.server.admin.client import AdminClient, AdminRefused, AdminUnavailable
from doemu.server.app import DoemuApp

from .admin_helpers import API, T0, Admin, admin_on
from .polling import eventually


@pytest.fixture
async def admin(tmp_path: Path) -> AsyncIterator[Admin]:
    async with admin_on(tmp_path) as ready:
        yield ready


# -- server-sent events ---------------------------------------------------------------------------


class RawStream:
    """One ASGI request driven by hand, so a response that never ends can be read as it streams."""

    def __init__(self, app: DoemuApp, path: str, spec_version: str) -> None:
        self.messages: asyncio.Queue[MutableMapping[str, Any]] = asyncio.Queue()
        self.disconnect = asyncio.Event()
        self.requested = False
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": spec_version},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(b"host", b"127.0.0.1:8787"), (b"accept", b"text/event-stream")],
            "client": ("127.0.0.1", 1234),
            "server": ("127.0.0.1", 8787),
        }
        self.task = asyncio.ensure_future(app(scope, self._receive, self._send))
        self.buffer = b""

    async def _receive(self) -> dict[str, Any]:
        if not self.requested:
            self.requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self.disconnect.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: MutableMapping[str, Any]) -> None:
        await self.messages.put(message)

    async def start(self) -> MutableMapping[str, Any]:
        async with asyncio.timeout(5):
            return await self.messages.get()

    async def next_block(self) -> str:
        """The next SSE block (up to a blank line), within a deadline."""
        async with asyncio.timeout(5):
            while b"\n\n" not in self.buffer:
                message = await self.messages.get()
                assert message["type"] == "http.response.body" and message.get("more_body")
                self.buffer += message["body"]
        block, self.buffer = self.buffer.split(b"\n\n", 1)
        return block.decode()

    async def close(self) -> None:
        self.disconnect.set()
        async with asyncio.timeout(5):
            await self.task  # raises if the app failed


def parse_event(block: str) -> tuple[str, dict[str, Any]]:
    fields = dict(line.split(": ", 1) for line in block.splitlines())
    return fields["event"], json.loads(fields["data"])


@pytest.mark.parametrize("spec_version", ["2.3", "2.4"])
async def test_events_stream_delivers_lifecycle_events_and_closes(
    admin: Admin, spec_version: str
) -> None:
    stream = RawStream(admin.app, f"{API}/events", spec_version)
    start = await stream.start()
    assert start["status"] == 200
    headers = dict(start["headers"])
    assert headers[b"content-type"] == b"text/event-stream; charset=utf-8"
    assert headers[b"cache-control"] == b"no-cache"
    assert await stream.next_block() == ": doemu lifecycle events"
    assert len(admin.runtime.events._subscribers) == 1

    await admin.stub("BOX", "sse").put("k", 1)
    kind, event = parse_event(await stream.next_block())
    hex_id = admin.id_of("BOX", "sse")
    assert (kind, event) == (
        "constructed",
        {"type": "constructed", "timestamp": T0, "binding": "BOX", "id": hex_id, "name": "sse"},
    )
    response = await admin.http.post(f"{API}/objects/BOX/sse/evict")
    assert response.json()["evicted"] is True
    kind, event = parse_event(await stream.next_block())
    assert (kind, event) == (
        "evicted",
        {"type": "evicted", "timestamp": T0, "binding": "BOX", "id": hex_id, "name": "sse"},
    )

    await stream.close()  # ends promptly although no further event arrives
    assert admin.runtime.events._subscribers == set()
    admin.runtime.events.emit("evicted", binding="BOX", id=hex_id)  # nobody listening: no error


async def test_events_head_request_ends_at_once(admin: Admin) -> None:
    response = await admin.http.head(f"{API}/events")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert admin.runtime.events._subscribers == set()


# -- over a real server --------------------------------------------------------------------------


async def test_events_and_admin_client_over_a_real_server(admin: Admin) -> None:
    """SSE over real HTTP ends when the client hangs up (else shutdown would wait on it), and the
    CLI's stdlib client decodes answers and refusals."""
    config = uvicorn.Config(
        admin.app, host="127.0.0.1", port=0, lifespan="off", log_level="warning"
    )
    server = uvicorn.Server(config)
    serving = asyncio.ensure_future(server.serve())
    try:
        await eventually(lambda: server.started or serving.done(), what="uvicorn to start")
        if serving.done():
            await serving  # raises why it could not start
        port = server.servers[0].sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=url, timeout=5) as http:
            async with http.stream("GET", f"{API}/events") as response:
                assert response.status_code == 200
                lines = response.aiter_lines()
                async with asyncio.timeout(5):
                    assert await anext(lines) == ": doemu lifecycle events"
                    assert await anext(lines) == ""
                    await admin.stub("BOX", "real").put("k", 1)
                    await http.post(f"{API}/objects/BOX/real/evict")
                    seen = []
                    while "event: evicted" not in seen:
                        seen.append(await anext(lines))
                assert "event: constructed" in seen
            # The client hung up: the server's stream must end and unsubscribe by itself.
            await eventually(
                lambda: not admin.runtime.events._subscribers, what="the stream to unsubscribe"
            )

        admin_client = AdminClient(url)
        health = await asyncio.to_thread(admin_client.get, "/health")
        assert health["ok"] is True
        rows = await asyncio.to_thread(
            admin_client.post, "/objects/BOX/real/sql", {"query": "SELECT count(*) FROM items"}
        )
        assert rows == {"columns": ["count(*)"], "rows": [[0]]}
        with pytest.raises(AdminRefused, match=r"^unknown Durable Object binding 'NOPE'") as info:
            await asyncio.to_thread(admin_client.get, "/objects?binding=NOPE")
        assert (info.value.status, info.value.path) == (404, "/objects?binding=NOPE")
    finally:
        server.should_exit = True
        async with asyncio.timeout(5):
            await serving


@pytest.fixture
def fake_server() -> Iterator[Callable[[int, bytes], str]]:
    """A stdlib HTTP server answering every request with one canned status and body."""
    answer: dict[str, Any] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(answer["status"])
            self.send_header("content-length", str(len(answer["body"])))
            self.end_headers()
            self.wfile.write(answer["body"])

        def log_message(self, *args: Any) -> None:
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()

    def set_answer(status: int, body: bytes) -> str:
        answer.update(status=status, body=body)
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield set_answer
    httpd.shutdown()
    httpd.server_close()


def test_admin_client_tells_no_server_from_a_refusal(fake_server: Any) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    with pytest.raises(AdminUnavailable, match="no doemu server at"):
        AdminClient(f"http://127.0.0.1:{free}", timeout=2).get("/health")

    url = fake_server(200, b"<html>not doemu</html>")
    with pytest.raises(AdminUnavailable, match="something other than JSON"):
        AdminClient(url, timeout=2).get("/health")

    url = fake_server(400, b'{"error": "the reason"}')
    with pytest.raises(DoemuError) as info:
        AdminClient(url, timeout=2).get("/health")
    assert str(info.value) == "the reason"  # the server's words, no HTTP plumbing
    assert not isinstance(info.value, AdminUnavailable)

    url = fake_server(502, b"<html>bad gateway</html>")
    with pytest.raises(DoemuError) as info:
        AdminClient(url, timeout=2).get("/health")
    assert (
        str(info.value)
        == f"the server at {url}/__doemu/api answered GET /health with 502 Bad Gateway"
    )

    url = fake_server(200, b'{"ok": true}')
    assert AdminClient(url + "/", timeout=2).get("/health") == {"ok": True}
