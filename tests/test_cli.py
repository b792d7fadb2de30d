"""The ``doemu`` command in-process (click's ``CliRunner``) on a copy of ``examples/counter``.

No server runs here: ``dev`` is only driven into its early errors, and the inspection commands
are pointed at a closed port so that they read the persist dir written by an in-process runtime.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import shutil
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from doemu import __version__
from doemu.cli import main
from doemu.ids import IdFactory
from doemu.server.devserver import loop_factory
from doemu.testing.plugin import HarnessFactory

COUNTER = Path(__file__).resolve().parent.parent / "examples" / "counter"
UNIQUE_KEY = "counter-example-Counter"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the counter example as the cwd, with no ``DOEMU_*`` variable set."""
    target = tmp_path / "counter"
    shutil.copytree(COUNTER, target, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    monkeypatch.chdir(target)
    for var in [v for v in os.environ if v.startswith("DOEMU_")]:
        monkeypatch.delenv(var)
    return target


@pytest.fixture
def closed_url() -> str:
    """A loopback URL nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port some other socket is listening on for the duration of the test."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def doemu(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


def assert_fails(result: Result, *fragments: str) -> None:
    """Exit code 1, an ``Error:`` naming every fragment, and no traceback."""
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert any(line.startswith("Error: ") for line in result.stderr.splitlines()), result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)


def write_state(
    doemu_harness: HarnessFactory,
    persist_dir: Path,
    project: Path,
    actions: dict[str, list[str]],
) -> dict[str, dict[str, Any]]:
    """Run the project's objects in-process on ``persist_dir``: ``{name: [action, ...]}``.

    Actions are the counter's routes (``incr``, ``alarm``); returns each object's last answers.
    """

    async def run() -> dict[str, dict[str, Any]]:
        answers: dict[str, dict[str, Any]] = {}
        config = project / "wrangler.toml"
        async with doemu_harness(config=config, persist_dir=persist_dir) as harness:
            for name, steps in actions.items():
                stub = harness.stub("COUNTER", name)
                for step in steps:
                    query = "?in_ms=600000" if step == "alarm" else ""
                    url = f"http://local/COUNTER/{name}/{step}{query}"
                    response = await stub.fetch(url, method="POST")
                    answers.setdefault(name, {}).update(await response.json())
        return answers

    return asyncio.run(run())


def test_version_and_help() -> None:
    assert doemu("--version").output == f"doemu, version {__version__}\n"
    result = doemu("--help")
    assert result.exit_code == 0
    for command in ("dev", "classes", "objects", "sql", "alarms", "evict", "reset"):
        assert f"  {command} " in result.output
    dev_help = doemu("dev", "-h").output
    for flag in ("--port", "--persist-to", "--no-persist", "--idle-timeout", "--admin-token"):
        assert flag in dev_help


def test_classes_lists_the_counter(project: Path) -> None:
    result = doemu("classes")
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == ["Counter", "COUNTER", "sql", "main", "module", "src/entry.py"]


def test_classes_warns_about_a_migrated_class_main_does_not_export(project: Path) -> None:
    config = project / "wrangler.toml"
    config.write_text(config.read_text().replace('["Counter"]', '["Counter", "Ghost"]'))
    result = doemu("classes")
    assert result.exit_code == 0, result.output
    assert "warning:" in result.stderr and "Ghost" in result.stderr


@pytest.mark.parametrize(
    "args",
    [["classes"], ["dev"], ["objects"], ["alarms"], ["sql", "COUNTER", "x", "SELECT 1"]],
)
def test_no_config_file_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert_fails(doemu(*args), "no wrangler.json, wrangler.jsonc or wrangler.toml found")


def test_a_missing_config_path_is_a_clear_error(project: Path) -> None:
    assert_fails(doemu("classes", "--config", "nope.toml"), "nope.toml: no such file")


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ('name = "unterminated\n', ["wrangler.toml: invalid TOML", "line 1"]),
        ('name = 5\nmain = "src/entry.py"\n', ["wrangler.toml", "name"]),
    ],
)
def test_a_broken_config_is_a_clear_error(project: Path, text: str, fragments: list[str]) -> None:
    (project / "wrangler.toml").write_text(text)
    for args in (["classes"], ["dev"], ["objects"]):
        assert_fails(doemu(*args), *fragments)


def test_dev_rejects_bad_settings_naming_them(project: Path) -> None:
    assert_fails(doemu("dev", "--idle-timeout", "abc"), "--idle-timeout='abc'", "70-140")
    assert_fails(doemu("dev", env={"DOEMU_PORT": "abc"}), "DOEMU_PORT='abc'", "port number")
    assert_fails(doemu("dev", env={"DOEMU_IDLE_TIMEOUT": "9-1"}), "DOEMU_IDLE_TIMEOUT='9-1'")
    (project / "pyproject.toml").write_text('[tool.doemu]\nidle-timeout = "soon"\n')
    assert_fails(doemu("dev"), "pyproject.toml [tool.doemu] idle-timeout='soon'")


def test_dev_rejects_a_bad_loop_and_a_missing_uvloop(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = doemu("dev", "--loop", "trio")
    assert result.exit_code == 2 and "Invalid value for '--loop'" in result.stderr
    assert_fails(doemu("dev", env={"DOEMU_LOOP": "trio"}), "DOEMU_LOOP='trio'", "auto, asyncio")
    monkeypatch.setitem(sys.modules, "uvloop", None)  # what a missing package looks like
    assert_fails(doemu("dev", "--loop", "uvloop"), "--loop='uvloop': uvloop is not installed")


def test_loop_factory_prefers_uvloop() -> None:
    uvloop = pytest.importorskip("uvloop", reason="uvloop is not installed")
    assert loop_factory("asyncio") is None  # asyncio's own loop
    assert loop_factory("uvloop") is uvloop.new_event_loop
    assert loop_factory("auto") is uvloop.new_event_loop


def test_loop_factory_without_uvloop_falls_back_only_for_auto(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # what a missing package looks like
    assert loop_factory("asyncio") is None
    assert loop_factory("auto") is None
    with pytest.raises(click.ClickException, match="uvloop cannot be imported"):
        loop_factory("uvloop")


def test_dev_on_a_busy_port_is_a_one_line_error(project: Path, busy_port: int) -> None:
    result = doemu("dev", "--port", str(busy_port), "--no-persist", "--log-level", "trace")
    assert_fails(result, f"cannot listen on http://127.0.0.1:{busy_port}", "in use")


def test_offline_objects_sql_and_alarms_read_the_default_persist_dir(
    project: Path,
    closed_url: str,
    unique_name: Callable[[str], str],
    doemu_harness: HarnessFactory,
) -> None:
    """1. Run two objects in-process on ``.doemu/state`` next to the config (the default);
    one with an alarm.  2. With no server at ``--url``, every read command reads the files."""
    alarmed, plain = unique_name("cli-alarmed"), unique_name("cli-plain")
    answers = write_state(
        doemu_harness,
        project / ".doemu" / "state",
        project,
        {alarmed: ["incr", "incr", "alarm"], plain: ["incr"]},
    )
    alarm_ms = answers[alarmed]["alarm"]
    ids = IdFactory(UNIQUE_KEY)
    alarmed_id, plain_id = str(ids.from_name(alarmed)), str(ids.from_name(plain))

    result = doemu("objects", "--url", closed_url)
    assert result.exit_code == 0, result.output
    assert "no doemu server" in result.stderr and "reading .doemu/state" in result.stderr
    header, *lines = result.stdout.splitlines()
    assert header.split() == ["binding", "name", "id", "state", "alarm", "(ms)", "alarm", "(UTC)"]
    rows = {line.split()[2]: line.split() for line in lines}
    assert rows[alarmed_id][:5] == ["COUNTER", alarmed, alarmed_id, "evicted", f"{alarm_ms:.0f}"]
    assert rows[plain_id] == ["COUNTER", plain, plain_id, "evicted", "-", "-"]
    assert doemu("objects", "COUNTER", "--url", closed_url).stdout == result.stdout
    assert_fails(doemu("objects", "NOPE", "--url", closed_url), "unknown binding 'NOPE'")

    query = "SELECT value FROM counter"
    for address in (alarmed, alarmed_id, alarmed_id.upper()):
        result = doemu("sql", "COUNTER", address, query, "--url", closed_url)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == {"columns": ["value"], "rows": [[2]]}

    result = doemu("alarms", "--url", closed_url)
    assert result.exit_code == 0, result.output
    header, line = result.stdout.splitlines()
    assert header.split()[:3] == ["binding", "name", "id"]
    assert line.split()[:4] == ["COUNTER", alarmed, alarmed_id, f"{alarm_ms:.0f}"]


def test_offline_sql_errors_are_clear(
    project: Path,
    closed_url: str,
    unique_name: Callable[[str], str],
    doemu_harness: HarnessFactory,
) -> None:
    name = unique_name("cli-sql")
    write_state(doemu_harness, project / ".doemu" / "state", project, {name: ["incr"]})
    url = ("--url", closed_url)
    assert_fails(
        doemu("sql", "COUNTER", name, "INSERT INTO boots VALUES (1)", "--write", *url),
        "--write needs a running server",
    )
    assert_fails(
        doemu("sql", "COUNTER", name, "INSERT INTO boots VALUES (1)", *url),
        "read-only SQL",
        "--write needs a running server",
    )
    assert_fails(doemu("sql", "COUNTER", name, "SELECT nope FROM counter", *url), "no such column")
    assert_fails(doemu("sql", "COUNTER", "never-used", "SELECT 1", *url), "has no storage")
    assert_fails(doemu("sql", "NOPE", name, "SELECT 1", *url), "unknown binding 'NOPE'")
    assert_fails(doemu("sql", "COUNTER", "0" * 64, "SELECT 1", *url), "not valid for this")


def test_offline_reads_follow_persist_to_and_the_environment(
    project: Path,
    tmp_path: Path,
    closed_url: str,
    unique_name: Callable[[str], str],
    doemu_harness: HarnessFactory,
) -> None:
    name = unique_name("cli-elsewhere")
    elsewhere = tmp_path / "elsewhere"
    write_state(doemu_harness, elsewhere, project, {name: ["incr"]})
    assert doemu("objects", "--url", closed_url).stdout == ""
    assert not (project / ".doemu").exists()  # reading never creates the persist dir
    by_flag = doemu("objects", "--url", closed_url, "--persist-to", str(elsewhere))
    by_env = doemu("objects", "--url", closed_url, env={"DOEMU_PERSIST_TO": str(elsewhere)})
    assert name in by_flag.stdout and by_flag.stdout == by_env.stdout
    result = doemu(
        "sql", "COUNTER", name, "SELECT value FROM counter", "--url", closed_url,
        env={"DOEMU_PERSIST_TO": str(elsewhere)},
    )  # fmt: skip
    assert json.loads(result.stdout)["rows"] == [[1]]


def test_evict_and_reset_need_a_server(project: Path, closed_url: str) -> None:
    for args in (["evict", "COUNTER", "x"], ["reset", "--all"], ["evict", "--all"]):
        assert_fails(doemu(*args, "--url", closed_url), "no doemu server runs", closed_url)
    assert_fails(doemu("evict", "--url", closed_url), "give BINDING NAME, or --all")
    assert_fails(doemu("reset", "COUNTER", "--url", closed_url), "give BINDING NAME, or --all")
    assert_fails(doemu("reset", "--all", "COUNTER", "x", "--url", closed_url), "not both")


class _NotDoemu(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html>hello</html>"
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_server_that_is_not_doemu_counts_as_no_server(project: Path) -> None:
    """Something else answering at ``--url`` (HTML, not JSON) is no doemu server: reads go to
    the persist dir and a refused ``reset`` is a one-line error."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotDoemu)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        result = doemu("objects", "--url", url)
        assert result.exit_code == 0, result.output
        assert "no doemu server" in result.stderr and result.stdout == ""
        assert_fails(doemu("reset", "--all", "--url", url), "answered POST /reset-all with 501")
    finally:
        server.shutdown()
        server.server_close()
