"""What the workerd runner generates, checked by a Worker on both targets (apps/plumbing).

The same answers from ``doemu dev`` and from workerd prove the generated config matches what
``doemu dev`` makes of the project: vars layered ``[vars]`` < ``.dev.vars`` < the caller's, a
non-string var as JSON, a KV-only class (``new_classes``) without SQL beside a SQLite-backed
one, and outbound ``workers.fetch`` reaching a server on loopback (workerd's default outbound
refuses private addresses; the runner's network service allows them).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..targets import TargetServer
from .conftest import running

APP = Path(__file__).resolve().parent / "apps" / "plumbing"


@pytest.fixture(scope="module")
def plumbing(serve: Any) -> TargetServer:
    server: TargetServer = serve(APP, vars={"FROM_CALLER": "given by the test"})
    return server


class _Upstream(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"upstream saw {self.path}".encode()
        self.send_response(203)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[str]:
    """A plain HTTP server on loopback, in this process."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def get(server: TargetServer, path: str, **kw: Any) -> Any:
    answer = httpx.get(f"{running(server).url}{path}", timeout=30, **kw)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_vars_are_layered_like_wrangler_dev(plumbing: TargetServer) -> None:
    """[vars] < .dev.vars < the caller's vars; a TOML table is a JSON var."""
    assert get(plumbing, "/vars") == {
        "PLAIN": "from wrangler.toml",
        "OVERRIDDEN": "from .dev.vars",
        "SECRET": "s3cret",
        "LIMITS": {"retries": 3, "names": ["a", "b"]},
        "FROM_CALLER": "given by the test",
    }


def test_sql_only_for_sqlite_classes(plumbing: TargetServer, target: str) -> None:
    """new_sqlite_classes → storage.sql works; new_classes → KV only, sql refused."""
    assert get(plumbing, f"/storage/LEDGER/l-{target}") == {"kv": "yes", "sql": True}
    assert get(plumbing, f"/storage/NOTES/n-{target}") == {"kv": "yes", "sql": False}


def test_outbound_fetch_reaches_loopback(plumbing: TargetServer, upstream: str) -> None:
    """workers.fetch to a server on 127.0.0.1: its status and body come back."""
    answer = get(plumbing, "/fetch", params={"url": f"{upstream}/ping?x=1"})
    assert answer == {"status": 203, "body": "upstream saw /ping?x=1"}
