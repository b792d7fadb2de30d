"""``doemu dev`` as a developer sees it, with real processes: the request log, ``.dev.vars``
kept out of the output, ``--clock manual``, the recorded URL, the user's own traceback at
start-up, and ``--reload`` waiting for a fix."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from tests.polling import eventually_sync

from .harness import DevServer

REQUEST_LINE = r"INFO  doemu\.http: {method} {path} {status} \d+\.\d ms$"


def _add_env_route(project: Path) -> None:
    """The counter answers ``GET /COUNTER/<name>/env/<KEY>`` with ``env.KEY`` (for the test)."""
    entry = project / "src" / "entry.py"
    entry.write_text(
        entry.read_text().replace(
            '        if action == "value":',
            '        if action == "env":\n'
            '            return Response.json({"value": getattr(self.env, parts[3])})\n'
            '        if action == "value":',
            1,
        )
    )


def test_request_log_one_line_per_request_and_websocket(
    dev_server: Callable[..., DevServer], counter_project: Path
) -> None:
    """Before: nothing was logged per request at the default level. Now each request is
    ``METHOD PATH STATUS DURATION`` on the log, uncoloured on a pipe; a WebSocket logs its 101
    and its close; SIGTERM ends with a shutdown line."""
    server = dev_server(counter_project)
    assert httpx.post(f"{server.url}/COUNTER/log/incr").json() == {"value": 1}
    httpx.get(f"{server.url}/COUNTER/log/nothing-here")
    server.wait_for_line(REQUEST_LINE.format(method="POST", path="/COUNTER/log/incr", status=200))
    server.wait_for_line(
        REQUEST_LINE.format(method="GET", path="/COUNTER/log/nothing-here", status=404)
    )
    with connect(f"{server.ws_url}/COUNTER/log/ws") as ws:
        ws.send("hi")
        ws.recv(timeout=10)
    server.wait_for_line(REQUEST_LINE.format(method="GET", path="/COUNTER/log/ws", status=101))
    server.wait_for_line(r"doemu\.http: WS /COUNTER/log/ws closed after \d+\.\d s$")
    assert "\x1b[" not in server.output  # not a terminal: no colours
    assert server.stop() == 0
    server.wait_for_line(r"INFO  doemu: stopped: storage committed$")


def test_log_level_warning_silences_the_request_log(
    dev_server: Callable[..., DevServer], counter_project: Path
) -> None:
    server = dev_server(counter_project, "--log-level", "warning")
    httpx.post(f"{server.url}/COUNTER/quiet/incr").raise_for_status()
    assert server.stop() == 0
    assert not any("doemu.http" in line for line in server.lines), server.output


def test_dev_vars_reach_the_worker_and_are_never_printed(
    dev_server: Callable[..., DevServer], counter_project: Path
) -> None:
    """Before: ``.dev.vars`` was not read and ``--var`` did not exist."""
    _add_env_route(counter_project)
    (counter_project / ".dev.vars").write_text("API_KEY=s3cret-d3v-value\nGREETING=overridden\n")
    server = dev_server(counter_project, "--var", "MODE:ci:1")

    def env(key: str) -> Any:
        return httpx.get(f"{server.url}/COUNTER/v/env/{key}").json()["value"]

    assert env("API_KEY") == "s3cret-d3v-value"
    assert env("GREETING") == "overridden"  # .dev.vars over [vars]
    assert env("MODE") == "ci:1"
    banner = server.output
    assert "var:     API_KEY = (hidden)" in banner and "var:     MODE = 'ci:1'" in banner
    assert "s3cret-d3v-value" not in banner and "overridden" not in banner


def test_manual_clock_moves_only_when_told(
    dev_server: Callable[..., DevServer], counter_project: Path
) -> None:
    """Before: the clock route said to start with a manual clock, and nothing could."""
    server = dev_server(counter_project, "--clock", "manual")
    clock = f"{server.url}/__doemu/api/clock"
    before = httpx.get(clock).json()
    assert before["manual"] is True
    moved = httpx.post(clock, json={"advance_ms": 60_000})
    assert moved.status_code == 200, moved.text
    assert moved.json()["now"] == before["now"] + 60_000


def test_client_commands_find_a_server_on_another_port(
    dev_server: Callable[..., DevServer], counter_project: Path, tmp_path: Path
) -> None:
    """Before: ``doemu objects`` looked at 8787 and read the persist dir instead."""
    server = dev_server(counter_project)  # --port 0: a port the CLI cannot guess
    httpx.post(f"{server.url}/COUNTER/found/incr").raise_for_status()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOEMU_")}
    result = subprocess.run(
        [sys.executable, "-m", "doemu", "objects", "--persist-to", str(server.persist_dir)],
        cwd=counter_project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert re.search(r"COUNTER\s+found\s+[0-9a-f]{64}\s+live", result.stdout), result.stdout
    assert "reading" not in result.stderr
    assert server.stop() == 0
    assert not (server.persist_dir / ".doemu-server.json").exists()


@pytest.fixture
def spawn() -> Iterator[Callable[..., tuple[subprocess.Popen[str], list[str]]]]:
    """``doemu dev`` processes that need not become ready; every one is killed after the test."""
    procs: list[subprocess.Popen[str]] = []

    def start(project: Path, *args: str) -> tuple[subprocess.Popen[str], list[str]]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "doemu", "dev", "--port", "0", *args],
            cwd=project,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        procs.append(proc)
        lines: list[str] = []

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line.rstrip("\n"))

        threading.Thread(target=read, daemon=True).start()
        return proc, lines

    yield start
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _break(project: Path) -> tuple[Path, str, int]:
    entry = project / "src" / "entry.py"
    good = entry.read_text()
    broken = good + "\n\ndef broken(:\n    pass\n"
    entry.write_text(broken)
    return entry, good, broken.splitlines().index("def broken(:") + 1


def test_a_syntax_error_at_start_up_shows_the_users_file_and_line(
    spawn: Callable[..., tuple[subprocess.Popen[str], list[str]]],
    counter_project: Path,
    tmp_path: Path,
) -> None:
    """Before: some forty lines of click, asyncio and loader frames."""
    _, _, line = _break(counter_project)
    proc, lines = spawn(counter_project, "--persist-to", str(tmp_path / "state"))
    assert proc.wait(timeout=60) == 1
    out = "\n".join(lines)
    assert f'File "src/entry.py", line {line}' in out, out
    assert "def broken(:" in out and "SyntaxError: invalid syntax" in out
    assert "Traceback (most recent call last)" not in out and "click" not in out, out


def test_reload_waits_for_the_fix_and_says_so(
    spawn: Callable[..., tuple[subprocess.Popen[str], list[str]]],
    counter_project: Path,
    tmp_path: Path,
) -> None:
    """1. A Worker with a syntax error, served with --reload: the error is shown and the
    watcher keeps running.
    2. Meanwhile the port answers (no "connection refused"): a browser gets an HTML page with
    the error and the user's line, an API client JSON, both 500.
    3. Saving a fix serves the Worker; the reload line names the changed file."""
    entry, good, line = _break(counter_project)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc, lines = spawn(
        counter_project, "--reload", "--port", str(port), "--persist-to", str(tmp_path / "state")
    )
    eventually_sync(
        lambda: any("restarts when you save a fix" in ln for ln in lines),
        within=30,
        what="the reloader to say it waits for a fix",
    )
    out = "\n".join(lines)
    assert f'File "src/entry.py", line {line}' in out
    assert proc.poll() is None  # the watcher still runs
    base = f"http://127.0.0.1:{port}"
    page = eventually_sync(
        lambda: httpx.get(f"{base}/COUNTER/x/value", headers={"accept": "text/html"}),
        within=15,
        what="the error page",
        ignoring=(httpx.TransportError,),
    )
    assert page.status_code == 500 and page.headers["content-type"].startswith("text/html")
    assert "failed to import" in page.text and f"line {line}" in page.text
    api = httpx.post(f"{base}/COUNTER/x/incr")
    assert api.status_code == 500 and "SyntaxError" in api.json()["error"]
    entry.write_text(good)
    ready = eventually_sync(
        lambda: next((ln for ln in lines if ln.startswith("doemu ready on ")), None),
        within=30,
        what="the fixed Worker to be served",
    )
    url = ready.removeprefix("doemu ready on ").strip()
    answer = eventually_sync(
        lambda: httpx.post(f"{url}/COUNTER/fixed/incr").json(),
        within=15,
        what="an answer",
        ignoring=(httpx.TransportError,),
    )
    assert answer == {"value": 1}
    assert any(ln.endswith("src/entry.py changed; restarting") for ln in lines), lines
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    out = "\n".join(lines)
    assert "process already dead" not in out and "watchfiles" not in out, out
