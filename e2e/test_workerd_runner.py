"""The workerd runner itself (``doemu.testing.workerd.WorkerdServer``), on real workerd.

What the differential suite takes for granted: a Worker that cannot load makes ``start()`` fail
with workerd's log, Python traceback included (here: entropy at import time, which Cloudflare
refuses), and leaves no process or open port behind; a graceful ``stop()`` ends workerd; a
``restart()`` keeps the port.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from doemu.errors import DoemuError
from doemu.testing.workerd import WorkerdServer, WorkerdStartError

from .targets import pyworkerd_or_skip

TOML = """\
name = "runner-check"
main = "src/entry.py"
compatibility_date = "2026-11-01"
compatibility_flags = ["python_workers"]
"""

ENTRY = """\
from workers import Response, WorkerEntrypoint
{extra}

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return Response("ok " + request.url.split("/", 3)[-1])
"""


def project(tmp_path: Path, extra: str = "") -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "wrangler.toml").write_text(TOML)
    (root / "src" / "entry.py").write_text(ENTRY.format(extra=extra))
    return root


def test_a_worker_that_cannot_load_fails_start_with_its_traceback(tmp_path: Path) -> None:
    """1. The main module draws entropy at import (secrets.token_hex): workerd refuses it.
    2. start() raises WorkerdStartError (a DoemuError) whose text has the Python traceback.
    3. Nothing is left running and the port is closed."""
    paths = pyworkerd_or_skip()
    extra = "import secrets\nTOKEN = secrets.token_hex(4)"
    server = WorkerdServer(project(tmp_path, extra), tmp_path / "state", paths=paths)
    with pytest.raises(WorkerdStartError) as info:
        server.start()
    assert isinstance(info.value, DoemuError)
    assert "Cannot get entropy outside of request context" in str(info.value)
    assert 'File "/session/metadata/entry.py"' in info.value.log
    assert not server.running
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.url, timeout=5)


def test_stop_restart_and_port(tmp_path: Path) -> None:
    """1. Port 0: a free port, bound before workerd starts. 2. The Worker answers.
    3. stop() ends workerd gracefully; the port is closed. 4. restart() serves on the same port."""
    paths = pyworkerd_or_skip()
    with WorkerdServer(project(tmp_path), tmp_path / "state", paths=paths) as server:
        assert server.port != 0
        url = server.url
        assert httpx.get(f"{url}/a", timeout=30).text == "ok a"
        code = server.stop()
        assert not server.running
        assert code == 0  # workerd exits cleanly on SIGTERM
        with pytest.raises(httpx.ConnectError):
            httpx.get(url, timeout=5)
        server.restart()
        assert server.url == url
        assert httpx.get(f"{url}/b", timeout=30).text == "ok b"
        assert len(server.outputs) == 1  # the first run's log is kept
    assert not server.running
