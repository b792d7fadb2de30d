"""A user's own project from the first minute: ``doemu init`` → ``doemu dev`` → ``pytest``.

Nothing new is installed: the repository's venv (where doemu is installed) provides the
``doemu`` command and pytest, exactly what a user's venv would. The project is served and tested
as ``doemu init`` wrote it, with no edit; ``--port 0`` is the only flag (a free port), and the
state goes where it would for the user, ``.doemu/`` in the project, which its ``.gitignore``
keeps out.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx

from tests.polling import eventually_sync

from .harness import READY

BIN = Path(sys.executable).parent
DOEMU = str(BIN / "doemu")


def test_init_then_dev_then_pytest(tmp_path: Path) -> None:
    project = tmp_path / "my-worker"
    init = subprocess.run([DOEMU, "init", str(project)], capture_output=True, text=True, timeout=60)
    assert init.returncode == 0, init.stderr
    assert "doemu dev" in init.stdout

    lines: list[str] = []
    server = subprocess.Popen(
        [DOEMU, "dev", "--port", "0"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert server.stdout is not None
    stdout = server.stdout
    reader = threading.Thread(target=lambda: lines.extend(ln.rstrip("\n") for ln in stdout))
    reader.start()
    try:
        ready = eventually_sync(
            lambda: next((m for ln in list(lines) if (m := READY.match(ln))), None),
            within=30,
            what="doemu ready",
        )
        assert ready is not None, "\n".join(lines)
        url = f"http://{ready['host']}:{ready['port']}"
        assert httpx.post(f"{url}/counter/alice").json() == {"name": "alice", "value": 1}
        assert httpx.post(f"{url}/counter/alice").json() == {"name": "alice", "value": 2}
        assert httpx.get(f"{url}/counter/alice").json() == {"name": "alice", "value": 2}
        assert httpx.get(f"{url}/nowhere").status_code == 404
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
        try:
            code = server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
            raise
        reader.join(timeout=5)
    assert code == 0, "\n".join(lines)
    assert (project / ".doemu" / "state").is_dir()  # the default persist dir, git-ignored

    tests = subprocess.run(
        [str(BIN / "pytest"), "-q", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "3 passed" in tests.stdout, tests.stdout
