"""The CLI's developer experience, in-process: help texts, empty listings, the SQL table, a
server found through the URL it recorded, refused ``--persist-to`` values, and the user's own
traceback when their Worker fails to import."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from doemu.cli import main
from doemu.server.banner import SERVER_RECORD, read_server_record
from doemu.testing.plugin import HarnessFactory

from .test_cli import write_state

COUNTER = Path(__file__).resolve().parent.parent / "examples" / "counter"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    target = tmp_path / "counter"
    shutil.copytree(COUNTER, target, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    monkeypatch.chdir(target)
    for var in [v for v in os.environ if v.startswith("DOEMU_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("DOEMU_PORT", "1")  # nothing listens on port 1: commands go offline
    return target


def doemu(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_every_option_has_help_and_shows_its_default() -> None:
    """Before: --log-level, --url, --admin-token (client commands) had no help, and several
    options did not say their default."""
    assert isinstance(main, click.Group)
    missing = []
    for name, command in main.commands.items():
        for param in command.params:
            if not isinstance(param, click.Option) or param.hidden:
                continue
            if param.name == "help" or (param.is_flag and not param.secondary_opts):
                continue  # an on/off flag's default is off
            text = param.help or ""
            if not text or ("[default:" not in text and not param.show_default):
                missing.append(f"{name} {param.opts[0]}: {text!r}")
    assert missing == []


def test_objects_and_alarms_say_when_there_is_nothing(project: Path) -> None:
    """Before: both printed nothing at all."""
    result = doemu("objects")
    assert result.exit_code == 0, result.output
    assert result.stdout == "" and "no objects yet" in result.stderr
    result = doemu("alarms")
    assert result.exit_code == 0, result.output
    assert result.stdout == "" and "no pending alarms" in result.stderr


def test_sql_prints_a_table(project: Path, doemu_harness: HarnessFactory) -> None:
    """Before: only JSON. A pipe still gets JSON by default (scripts parse it)."""
    write_state(doemu_harness, project / ".doemu" / "state", project, {"t": ["incr", "incr"]})
    query = "SELECT value, NULL AS empty, 'x' AS word FROM counter"
    table = doemu("sql", "--format", "table", "COUNTER", "t", query)
    assert table.exit_code == 0, table.output
    assert table.stdout.splitlines() == [
        "value  empty  word",
        "-----  -----  ----",
        "2      NULL   x",
        "(1 row)",
    ]
    piped = doemu("sql", "COUNTER", "t", query)
    assert json.loads(piped.stdout) == {
        "columns": ["value", "empty", "word"],
        "rows": [[2, None, "x"]],
    }


class _FakeAdmin(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps(
            [
                {
                    "binding": "COUNTER",
                    "id": "ab" * 32,
                    "state": "live",
                    "name": "seen",
                    "alarm": None,
                }
            ]
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeAdmin)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_client_commands_find_the_server_its_persist_dir_records(
    project: Path, fake_server: str
) -> None:
    """Before: a server on another --port was missed (the offline reader answered instead)."""
    state = project / ".doemu" / "state"
    state.mkdir(parents=True)
    (state / SERVER_RECORD).write_text(json.dumps({"url": fake_server, "pid": os.getpid()}))
    assert read_server_record(state) == fake_server
    result = doemu("objects")
    assert result.exit_code == 0, result.output
    assert "seen" in result.stdout and "reading" not in result.stderr


def test_a_record_left_by_a_dead_server_is_ignored(project: Path, tmp_path: Path) -> None:
    state = project / ".doemu" / "state"
    state.mkdir(parents=True)
    dead = 2**22 + 12345  # above the default pid_max: no such process
    (state / SERVER_RECORD).write_text(json.dumps({"url": "http://127.0.0.1:9", "pid": dead}))
    assert read_server_record(state) is None


@pytest.mark.parametrize(
    ("value", "message"),
    [("", "persist into the current folder"), ("wrangler.toml", "not a directory")],
)
def test_dev_refuses_an_empty_or_file_persist_to(project: Path, value: str, message: str) -> None:
    result = doemu("dev", "--port", "0", "--persist-to", value)
    assert result.exit_code == 1 and message in result.stderr, result.output
    assert list(project.glob("*.sqlite")) == [] and list(project.glob("counter-example-*")) == []


def test_a_syntax_error_shows_the_users_file_and_line_only(project: Path) -> None:
    """Before: a forty-line traceback through click, asyncio and the loader."""
    entry = project / "src" / "entry.py"
    lines = entry.read_text().splitlines()
    entry.write_text("\n".join([*lines, "def broken(:", "    pass", ""]))
    result = doemu("dev", "--port", "0", "--no-persist")
    assert result.exit_code == 1
    err = result.stderr
    assert f'File "src/entry.py", line {len(lines) + 1}' in err, err
    assert "SyntaxError" in err and "def broken(:" in err
    for noise in ("click", "asyncio", "doemu/loader", "importlib"):
        assert noise not in err, (noise, err)


def test_an_import_error_shows_the_users_own_frames(project: Path) -> None:
    (project / "src" / "helper.py").write_text("import not_a_real_module_xyz\n")
    entry = project / "src" / "entry.py"
    entry.write_text(entry.read_text() + "\nimport helper\n")
    result = doemu("dev", "--port", "0", "--no-persist")
    assert result.exit_code == 1
    err = result.stderr
    assert 'File "src/entry.py"' in err and 'File "src/helper.py", line 1' in err, err
    assert "ModuleNotFoundError: No module named 'not_a_real_module_xyz'" in err
    assert "click" not in err and "doemu/" not in err


def test_unknown_env_is_a_one_line_error(project: Path) -> None:
    result = doemu("dev", "--port", "0", "--env", "nope")
    assert result.exit_code == 1 and "no [env.nope] section" in result.stderr
