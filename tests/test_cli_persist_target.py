"""``--persist-to DIR`` names whose state a client command reads: the server DIR records, or the
files — never whatever answers on the settings' port.

Before: with the recorded server dead (a SIGKILL leaves its record behind, with a dead pid), the
CLI fell back to ``127.0.0.1:8787``, where another project's ``doemu dev`` may be serving, and
printed *that* project's rows as if they were DIR's.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from click.testing import CliRunner, Result

from doemu.cli import main
from doemu.server.banner import SERVER_RECORD
from doemu.testing.plugin import HarnessFactory

from .test_cli import write_state

COUNTER = Path(__file__).resolve().parent.parent / "examples" / "counter"
#: Above the default pid_max: no such process (a server that was SIGKILLed).
DEAD_PID = 2**22 + 12345


class _OtherProject(http.server.BaseHTTPRequestHandler):
    """A doemu admin API serving someone else's state: every answer is "wrong"."""

    hits: ClassVar[list[str]] = []

    def _answer(self) -> None:
        type(self).hits.append(f"{self.command} {self.path}")
        if self.path.endswith("/sql"):
            payload: object = {"columns": ["value"], "rows": [["another project's row"]]}
        else:
            payload = [{"binding": "COUNTER", "id": "cd" * 32, "state": "live",
                        "name": "another-project", "alarm": None}]  # fmt: skip
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def other_port() -> Iterator[int]:
    _OtherProject.hits = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OtherProject)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, other_port: int) -> Path:
    target = tmp_path / "counter"
    shutil.copytree(COUNTER, target, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    monkeypatch.chdir(target)
    for var in [v for v in os.environ if v.startswith("DOEMU_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("DOEMU_PORT", str(other_port))  # the settings' port: the other project
    return target


def doemu(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


def killed_server_state(doemu_harness: HarnessFactory, project: Path, state: Path) -> None:
    """``state`` as a SIGKILLed ``doemu dev`` leaves it: data, and a record naming a dead pid."""
    write_state(doemu_harness, state, project, {"mine": ["incr", "incr", "incr"]})
    (state / SERVER_RECORD).write_text(json.dumps({"url": "http://127.0.0.1:9", "pid": DEAD_PID}))


def test_sql_on_a_named_persist_dir_reads_its_files_not_the_settings_port(
    project: Path, tmp_path: Path, doemu_harness: HarnessFactory
) -> None:
    state = tmp_path / "state"
    killed_server_state(doemu_harness, project, state)
    query = "SELECT value FROM counter"
    result = doemu("sql", "COUNTER", "mine", query, "--persist-to", str(state))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rows"] == [[3]]
    assert f"no running doemu server is recorded in {state}" in result.stderr
    by_env = doemu("sql", "COUNTER", "mine", query, env={"DOEMU_PERSIST_TO": str(state)})
    assert json.loads(by_env.stdout)["rows"] == [[3]]
    listed = doemu("objects", "--persist-to", str(state))
    assert "mine" in listed.stdout and "another-project" not in listed.stdout
    assert _OtherProject.hits == []  # never asked


def test_what_needs_a_server_says_none_is_recorded(
    project: Path, tmp_path: Path, doemu_harness: HarnessFactory
) -> None:
    state = tmp_path / "state"
    killed_server_state(doemu_harness, project, state)
    write = doemu("sql", "--write", "COUNTER", "mine", "DELETE FROM counter",
                  "--persist-to", str(state))  # fmt: skip
    assert write.exit_code == 1 and "no running doemu server is recorded" in write.stderr
    evict = doemu("evict", "--all", "--persist-to", str(state))
    assert evict.exit_code == 1 and "nothing is live to evict" in evict.stderr
    assert _OtherProject.hits == []


def test_without_a_named_persist_dir_the_settings_port_is_still_asked(project: Path) -> None:
    """A ``doemu dev --no-persist`` records its URL in a temporary dir: the settings' port is
    how the client commands find it, so the fallback stays when no persist dir was named."""
    result = doemu("objects")
    assert result.exit_code == 0, result.output
    assert "another-project" in result.stdout
    assert _OtherProject.hits == ["GET /__doemu/api/objects"]
