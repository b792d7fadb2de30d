"""``doemu dev``'s start-up garbage-collector pause, seen from the command line and from real
servers: paused only while the server starts, frozen and collecting again once it is ready,
resumed on every failure, never held by ``--reload``'s watching parent.

The pause lives in :func:`doemu.server.devserver.run` (see ``_StartupGcPause`` there).
"""

from __future__ import annotations

import gc
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from doemu import cli
from e2e.harness import DevServer

COUNTER = Path(__file__).resolve().parent.parent / "examples" / "counter"
DOEMU = Path(sys.executable).with_name("doemu")

GC_ROUTE = """

from workers import WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        import gc

        if request.url.endswith("/__gc"):
            return Response.json({"gc": gc.isenabled(), "frozen": gc.get_freeze_count() > 0})
        ns = self.env.COUNTER
        name = request.url.split("/")[4]
        return await ns.get(ns.idFromName(name)).fetch(request)
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the counter example whose entry worker reports the collector's state."""
    target = tmp_path / "counter"
    shutil.copytree(COUNTER, target, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    entry = target / "src" / "entry.py"
    entry.write_text(entry.read_text() + GC_ROUTE)
    monkeypatch.chdir(target)
    for var in [v for v in os.environ if v.startswith("DOEMU_")]:
        monkeypatch.delenv(var)
    return target


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_every_failed_start_is_one_error_line_and_collects_again(
    project: Path, busy_port: int
) -> None:
    """Failures before the pause (a missing config), at its start (a busy port) and inside the
    event loop (the worker does not export a bound class) are click's one-line ``Error: …``
    with exit code 1, and the collector runs again afterwards, with nothing frozen."""
    broken = project / "broken.toml"
    broken.write_text(
        (project / "wrangler.toml")
        .read_text()
        .replace('class_name = "Counter"', 'class_name = "Nope"')
    )
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    for args, fragment in [
        (["--config", str(project / "nope.toml")], "nope.toml"),
        (
            ["--port", str(busy_port), "--no-persist"],
            f"cannot listen on http://127.0.0.1:{busy_port}",
        ),
        (
            ["--config", str(broken), "--port", "0", "--no-persist"],
            "is not exported by src/entry.py",
        ),
    ]:
        result = CliRunner().invoke(cli.main, ["dev", *args])
        assert result.exit_code == 1, result.output
        assert result.output.startswith("Error: ") or "\nError: " in result.output
        assert fragment in result.output and "Traceback" not in result.output
        assert gc.isenabled()
        assert gc.get_freeze_count() == frozen


def test_the_reload_parent_never_pauses_the_collector(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--reload``'s parent watches files for the whole session: it collects all along."""
    seen: list[bool] = []

    def run_with_reload(worker: Any, settings: Any, *rest: Any, **options: Any) -> None:
        seen.append(gc.isenabled())

    monkeypatch.setattr(cli, "run_with_reload", run_with_reload)
    result = CliRunner().invoke(cli.main, ["dev", "--reload", "--no-persist"])
    assert result.exit_code == 0, result.output
    assert seen == [True]


def _gc_state(url: str) -> Any:
    return httpx.get(f"{url}/__gc").json()


def test_a_server_started_by_the_doemu_script_answers_and_collects_after_ready(
    project: Path, tmp_path: Path
) -> None:
    """``python -m doemu dev`` and the ``doemu`` script serve the same state; in both the
    collector runs once the server is ready, with start-up's objects frozen."""
    server = DevServer(project, tmp_path / "state")
    server.start()
    try:
        assert _gc_state(server.url) == {"gc": True, "frozen": True}
        assert httpx.post(f"{server.url}/COUNTER/c/incr").json()["value"] == 1
    finally:
        server.kill()
    script = subprocess.Popen(
        [str(DOEMU), "dev", "--port", "0", "--persist-to", str(tmp_path / "state")],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        assert script.stdout is not None
        url = next(line.split()[-1] for line in script.stdout if line.startswith("doemu ready on "))
        assert _gc_state(url) == {"gc": True, "frozen": True}
        assert httpx.post(f"{url}/COUNTER/c/incr").json()["value"] == 2
    finally:
        os.killpg(script.pid, 9)
        script.wait(timeout=10)


def test_a_reload_child_collects_after_ready(project: Path, tmp_path: Path) -> None:
    """The child ``--reload`` runs is started like any server: paused, then frozen and
    collecting once ready."""
    server = DevServer(project, tmp_path / "state", args=["--reload"])
    server.start()
    try:
        assert _gc_state(server.url) == {"gc": True, "frozen": True}
        assert httpx.post(f"{server.url}/COUNTER/c/incr").json()["value"] == 1
    finally:
        server.kill()
