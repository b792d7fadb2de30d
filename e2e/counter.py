"""A side-effect counter for e2e tests: a loopback HTTP server that records every POST body.

A tool in a ``doemu dev`` worker POSTs here (``COUNTER_URL``) when it does its side effect, so a
test can count how often the effect really happened across SIGKILLs — from outside the process
that was killed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Counter", "counter"]


class Counter:
    """The POST bodies received, in order (JSON-decoded), and the URL to send them to."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.calls: list[Any] = []
        self.lock = threading.Lock()

    def snapshot(self) -> list[Any]:
        with self.lock:
            return list(self.calls)


@contextmanager
def counter() -> Iterator[Counter]:
    """A running :class:`Counter` on 127.0.0.1 (a free port), stopped on exit."""
    box: list[Counter] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length).decode() if length else ""
            try:
                body: Any = json.loads(raw)
            except ValueError:
                body = raw
            with box[0].lock:
                box[0].calls.append(body)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"ok": true}')

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    box.append(Counter(f"http://127.0.0.1:{server.server_address[1]}/effect"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield box[0]
    finally:
        server.shutdown()
        server.server_close()
