"""``doemu dev`` as a dev server, and the commands that did only exist in the admin API.

Real processes: ``doemu dev`` on a free port, the CLI as a second process in the project (as a
user runs it in a second terminal), ``doemu dev`` under a pseudo-terminal for the default
``--reload``.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx

from tests.polling import eventually_sync

from .test_cli import doemu, object_id, ok, unique
from .test_devx import _add_env_route


def test_run_alarm_clock_kv_and_tail_through_the_cli(
    dev_server: Any, counter_project: Path
) -> None:
    """1. ``doemu tail`` runs beside a ``--clock manual`` server.
    2. ``kv --put`` writes inside the object; ``kv`` reads it back (one key, or all).
    3. ``clock --advance 30s`` moves time; ``run-alarm`` delivers an alarm an hour away.
    4. ``tail`` printed the object's construction and its alarm as they happened."""
    server = dev_server(counter_project, "--clock", "manual")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOEMU_")}
    # Started with SIGINT ignored, as a background job of a non-interactive shell (a CI runner)
    # starts it: Ctrl-C must still stop it (it followed forever, and this test hung, in CI).
    tail = subprocess.Popen(
        [sys.executable, "-m", "doemu", "tail", "--format", "json", "--url", server.url],
        cwd=server.project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    events: list[dict[str, Any]] = []
    notices: list[str] = []
    threading.Thread(
        target=lambda: events.extend(json.loads(line) for line in tail.stdout or ()), daemon=True
    ).start()
    threading.Thread(target=lambda: notices.extend(tail.stderr or ()), daemon=True).start()
    try:
        eventually_sync(
            lambda: any("(following " in line for line in notices),
            within=30,
            what="tail to be connected (from then on no event is missed)",
        )
        name = unique("cli-control")
        written = json.loads(ok(doemu(server, "kv", "COUNTER", name, "colour", "--put", '"blue"')))
        assert written == {"id": object_id(name), "key": "colour", "put": True}
        ok(doemu(server, "kv", "COUNTER", name, "size", "--put", "3"))
        one = ok(doemu(server, "kv", "COUNTER", name, "colour", "--format", "json"))
        assert json.loads(one) == "blue"
        every = ok(doemu(server, "kv", "COUNTER", name, "--format", "table")).splitlines()
        assert [line.split() for line in every] == [
            ["key", "value"], ["colour", '"blue"'], ["size", "3"]
        ]  # fmt: skip
        removed = json.loads(ok(doemu(server, "kv", "COUNTER", name, "size", "--delete")))
        assert removed["deleted"] is True

        before = ok(doemu(server, "clock")).split()
        after = ok(doemu(server, "clock", "--advance", "30s")).split()
        assert float(after[0]) - float(before[0]) == 30_000 and after[-2:] == ["(manual", "clock)"]

        httpx.post(f"{server.url}/COUNTER/{name}/alarm?in_ms=3600000").raise_for_status()
        ran = ok(doemu(server, "run-alarm", "COUNTER", name))
        assert ran.strip() == f"ran the alarm of COUNTER {name} ({object_id(name)})"
        assert len(httpx.get(f"{server.url}/COUNTER/{name}/alarms").json()) == 1
        eventually_sync(
            lambda: {"constructed", "alarm.fired"} <= {e["type"] for e in events},
            within=30,
            what="tail to print the events",
        )
        mine = [e for e in events if e.get("id") == object_id(name)]
        assert mine[0]["type"] == "constructed" and mine[0]["name"] == name
    finally:
        tail.send_signal(signal.SIGINT)
        tail.wait(timeout=10)
    assert "Traceback" not in "".join(notices)


def test_control_commands_without_a_server_say_they_need_one(counter_project: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOEMU_")}
    for args in (["run-alarm", "COUNTER", "a"], ["clock"], ["kv", "COUNTER", "a", "k", "--delete"]):
        result = subprocess.run(
            [sys.executable, "-m", "doemu", *args, "--url", "http://127.0.0.1:9"],
            cwd=counter_project,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 1
        assert result.stderr.startswith("Error: no doemu server runs at"), result.stderr
        assert "needs a running `doemu dev`" in result.stderr


def test_wranglers_spellings_ip_log_level_and_env_file(
    dev_server: Any, counter_project: Path, tmp_path: Path
) -> None:
    """``--ip``, ``--log-level warn`` (no request lines) and ``--env-file`` (secrets read from
    it instead of ``.dev.vars``, never printed)."""
    _add_env_route(counter_project)
    (counter_project / ".dev.vars").write_text("TOKEN=from-dev-vars\n")
    secrets = tmp_path / "staging.env"
    secrets.write_text("TOKEN=from-env-file\n")
    server = dev_server(
        counter_project, "--ip", "127.0.0.1", "--log-level", "warn", "--env-file", str(secrets)
    )
    answer = httpx.get(f"{server.url}/COUNTER/a/env/TOKEN").json()
    assert answer == {"value": "from-env-file"}
    assert "var:     TOKEN = (hidden)" in server.output
    assert "from-env-file" not in server.output
    assert "doemu.http" not in server.output  # warn: no request log


def test_log_level_none_prints_only_the_banner(dev_server: Any, counter_project: Path) -> None:
    server = dev_server(counter_project, "--log-level", "none")
    httpx.get(f"{server.url}/COUNTER/a/nope")
    lines = server.output.splitlines()
    assert not [line for line in lines if " INFO " in line or " WARN " in line], lines


def test_reload_is_on_in_a_terminal_and_names_the_changed_file(
    counter_project: Path, tmp_path: Path
) -> None:
    """1. ``doemu dev`` with a terminal as its output, no flag: it watches for changes.
    2. A change to an excluded path (``--reload-exclude``) does nothing; a change to the
    Worker restarts it, and the line names that file alone."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "doemu", "dev", "--port", "0",
         "--persist-to", str(tmp_path / "state"), "--reload-exclude", "*/scratch/*"],
        cwd=counter_project,
        env={k: v for k, v in os.environ.items() if not k.startswith("DOEMU_")},
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        start_new_session=True,
    )  # fmt: skip
    os.close(follower)
    output: list[str] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                return
            if not chunk:
                return
            output.append(chunk.decode(errors="replace"))

    threading.Thread(target=read, daemon=True).start()
    try:
        eventually_sync(lambda: "doemu ready on" in "".join(output), what="the server")
        assert "watching" in "".join(output) and "--no-reload turns this off" in "".join(output)
        (counter_project / "scratch").mkdir()
        (counter_project / "scratch" / "notes.py").write_text("x = 1\n")
        entry = counter_project / "src" / "entry.py"
        entry.write_text(entry.read_text() + "\n# edited\n")
        eventually_sync(
            lambda: "changed; restarting" in "".join(output), within=30, what="a restart"
        )
        restarts = [ln for ln in "".join(output).splitlines() if "changed; restarting" in ln]
        assert all("src/entry.py changed" in ln and "scratch" not in ln for ln in restarts)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        os.close(leader)
