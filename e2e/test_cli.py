"""The ``doemu`` command against a real ``doemu dev``: inspection, control, banner, shutdown.

The CLI runs as its own process (``python -m doemu … --url``) in the project copy, as a user
would run it in a second terminal.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from doemu.ids import IdFactory
from tests.polling import eventually_sync

from .harness import DevServer, port_is_open

UNIQUE_KEY = "counter-example-Counter"
HAS_UVLOOP = importlib.util.find_spec("uvloop") is not None  # doemu's default where it installs


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def object_id(name: str) -> str:
    return str(IdFactory(UNIQUE_KEY).from_name(name))


def doemu(server: DevServer, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI in the server's project against the server's URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOEMU_")}
    return subprocess.run(
        [sys.executable, "-m", "doemu", *args, "--url", server.url],
        cwd=server.project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (result.args, result.stdout, result.stderr)
    assert "no doemu server" not in result.stderr, result.stderr  # it did talk to the server
    return result.stdout


def refused(result: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert result.returncode == 1, (result.args, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert fragment in result.stderr, result.stderr


def listed(server: DevServer, name: str) -> list[str]:
    """``doemu objects COUNTER``'s row for ``name`` (found by its id), split into fields; the
    header row names the columns, the name before the id."""
    lines = ok(doemu(server, "objects", "COUNTER")).splitlines()
    assert lines[0].split() == ["binding", "name", "id", "state", "alarm", "(ms)", "alarm", "(UTC)"]
    [row] = [r for r in (line.split() for line in lines[1:]) if r[2] == object_id(name)]
    return row


def test_objects_sql_and_alarms_on_a_live_server(dev_server: Any, counter_project: Path) -> None:
    """1. Increment an object twice and give it an alarm through HTTP.
    2. ``objects`` and ``alarms`` show it live, named, with its alarm.
    3. ``sql`` reads rows, refuses an INSERT, and ``sql --write`` inserts inside the object."""
    server = dev_server(counter_project)
    name = unique("cli-live")
    for _ in range(2):
        httpx.post(f"{server.url}/COUNTER/{name}/incr").raise_for_status()
    alarm = httpx.post(f"{server.url}/COUNTER/{name}/alarm?in_ms=600000").json()["alarm"]

    assert listed(server, name)[:5] == [
        "COUNTER", name, object_id(name), "live", f"{alarm:.0f}",
    ]  # fmt: skip
    every = ok(doemu(server, "objects"))
    assert object_id(name) in every
    alarm_rows = [line.split() for line in ok(doemu(server, "alarms")).splitlines()]
    assert alarm_rows[0][:3] == ["binding", "name", "id"]
    assert ["COUNTER", name, object_id(name), f"{alarm:.0f}"] in [r[:4] for r in alarm_rows]

    read = json.loads(ok(doemu(server, "sql", "COUNTER", name, "SELECT value FROM counter")))
    assert read == {"columns": ["value"], "rows": [[2]]}
    by_id = doemu(server, "sql", "COUNTER", object_id(name), "SELECT value FROM counter")
    assert json.loads(ok(by_id)) == read

    insert = "INSERT INTO boots (at) VALUES (-42)"
    refused(doemu(server, "sql", "COUNTER", name, insert), "read-only")
    written = json.loads(ok(doemu(server, "sql", "--write", "COUNTER", name, insert)))
    assert written["rowsWritten"] == 1
    count = "SELECT count(*) AS n FROM boots WHERE at = -42"
    assert json.loads(ok(doemu(server, "sql", "COUNTER", name, count)))["rows"] == [[1]]
    refused(doemu(server, "sql", "COUNTER", name, "SELECT nope"), "no such column")


def test_evict_and_reset_through_the_cli(dev_server: Any, counter_project: Path) -> None:
    """1. ``evict COUNTER <name>``: the object is evicted, its storage intact.
    2. Two objects live again; ``reset --all`` resets both and they are no longer live."""
    server = dev_server(counter_project)
    first, second = unique("cli-evict"), unique("cli-reset")
    httpx.post(f"{server.url}/COUNTER/{first}/incr").raise_for_status()
    assert listed(server, first)[3] == "live"

    answer = json.loads(ok(doemu(server, "evict", "COUNTER", first)))
    assert answer == {"id": object_id(first), "evicted": True}
    assert listed(server, first)[3] == "evicted"
    assert httpx.get(f"{server.url}/COUNTER/{first}/value").json()["value"] == 1  # rebuilt

    httpx.post(f"{server.url}/COUNTER/{second}/incr").raise_for_status()
    assert json.loads(ok(doemu(server, "reset", "--all"))) == {"reset": 2}
    assert listed(server, first)[3] == "evicted"
    assert listed(server, second)[3] == "evicted"
    refused(doemu(server, "evict", "NOPE", "x"), "unknown Durable Object binding 'NOPE'")


def banner(server: DevServer) -> list[str]:
    """The lines ``doemu dev`` printed before its ready line."""
    ready = next(i for i, line in enumerate(server.lines) if line.startswith("doemu ready on"))
    return server.lines[:ready]


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_banner_and_a_graceful_stop_that_keeps_state(
    dev_server: Any, counter_project: Path, stop_signal: signal.Signals
) -> None:
    """1. The banner names the URL, the inspector page (which serves), the persist dir and the
    binding's class.
    2. SIGTERM / SIGINT: exit code 0, port closed.
    3. A new server on the same persist dir has the value written before."""
    server = dev_server(counter_project)
    lines = banner(server)
    assert f"  url:     {server.url}" in lines
    inspect = [line for line in lines if line.startswith("  inspect: ")]
    assert inspect and inspect[0].split()[1] == f"{server.url}/__doemu/"
    page = httpx.get(f"{server.url}/__doemu/")
    assert page.status_code == 200 and "<title>doemu inspector</title>" in page.text
    assert f"  persist: {server.persist_dir} (persistent)" in lines
    assert "  durable: power (each commit fsynced before its output leaves)" in lines
    assert "  COUNTER → Counter (sql; main module src/entry.py)" in lines
    assert server.lines[len(lines)] == f"doemu ready on {server.url}"

    name = unique("cli-stop")
    assert httpx.post(f"{server.url}/COUNTER/{name}/incr").json() == {"value": 1}
    assert server.proc is not None
    os.killpg(server.proc.pid, stop_signal)
    assert server.proc.wait(timeout=15) == 0, server.output
    assert not port_is_open(server.host, server.port)
    assert "Traceback" not in server.output

    server.start()
    assert httpx.get(f"{server.url}/COUNTER/{name}/value").json()["value"] == 1
    assert server.stop() == 0


@pytest.mark.parametrize(
    ("args", "env", "loop"),
    [
        ((), {"DOEMU_LOOP": ""}, "uvloop" if HAS_UVLOOP else "asyncio"),  # auto
        (("--loop", "asyncio"), {}, "asyncio"),
        ((), {"DOEMU_LOOP": "asyncio"}, "asyncio"),
    ],
)
def test_the_loop_setting_picks_the_event_loop(
    dev_server: Any, counter_project: Path, args: tuple[str, ...], env: dict[str, str], loop: str
) -> None:
    """The banner names the event loop the server runs on, and the server serves on it."""
    server = dev_server(counter_project, *args, env=env)
    assert f"  loop:    {loop}" in banner(server)
    assert httpx.post(f"{server.url}/COUNTER/{unique('loop')}/incr").json() == {"value": 1}
    assert server.stop() == 0, server.output


def test_no_persist_removes_its_temp_dir_on_a_graceful_stop(
    dev_server: Any, counter_project: Path
) -> None:
    """1. ``--no-persist``: the banner names a temporary directory that holds the objects.
    2. After SIGTERM (exit 0) the directory is gone."""
    server = dev_server(counter_project, "--no-persist")
    line = next(ln for ln in banner(server) if ln.startswith("  persist: "))
    match = re.fullmatch(r"  persist: (?P<path>\S+) \(temporary: removed on exit\)", line)
    assert match is not None, line
    temp = Path(match["path"])
    assert temp != server.persist_dir and not server.persist_dir.exists()
    httpx.post(f"{server.url}/COUNTER/{unique('cli-temp')}/incr").raise_for_status()
    eventually_sync(
        lambda: any((temp / UNIQUE_KEY).glob("*.sqlite")), within=15, what="the object's file"
    )
    assert server.stop() == 0, server.output
    assert not temp.exists()


def test_reload_with_no_persist_keeps_state_across_reloads_and_stops_cleanly(
    dev_server: Any, counter_project: Path
) -> None:
    """1. ``--reload --no-persist``: the parent owns one temp dir for every child.
    2. After a source edit restarts the child, the value is still there.
    3. SIGTERM to the group: exit 0, no traceback (no forced shutdown), temp dir removed.
    4. Each child runs on the loop and at the durability the parent was asked for (not the
    defaults)."""
    server = dev_server(
        counter_project, "--reload", "--no-persist", "--loop", "asyncio", "--durability", "process"
    )
    line = server.wait_for_line(r"doemu.reload: --no-persist: state in ")
    temp = Path(line.split("state in ", 1)[1].split(",", 1)[0])
    name = unique("cli-reload")
    assert httpx.post(f"{server.url}/COUNTER/{name}/incr").json() == {"value": 1}
    entry = counter_project / "src" / "entry.py"
    entry.write_text(entry.read_text() + "\n# edited\n")
    eventually_sync(
        lambda: sum(ln.startswith("doemu ready on") for ln in server.lines) >= 2,
        within=30,
        what="the reloaded child to be ready",
    )
    assert httpx.get(f"{server.url}/COUNTER/{name}/value").json()["value"] == 1
    assert server.lines.count("  loop:    asyncio") == 2, server.output
    durable = "  durable: process (commits survive a crash of doemu, not of the machine)"
    assert server.lines.count(durable) == 2, server.output
    assert temp.is_dir()
    assert server.stop() == 0, server.output
    assert "Traceback" not in server.output, server.output
    assert not temp.exists()
