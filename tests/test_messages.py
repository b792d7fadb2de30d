"""Messages that say what to do, each through the real ``doemu`` command (a subprocess in a
project) or where the mistake surfaces at run time.

Before: "no wrangler.toml found" with no next step; a busy port with no way out; a migration
hint squeezed into one sentence (see ``tests/test_migrations.py`` for the pasteable TOML and
``tests/test_config.py`` for "did you mean"); ``--persist-to .`` accepted, strewing object files
among the sources; a forgotten ``await`` reported as a serialization error inside doemu; CLI
errors prefixed with ``admin API POST /objects/…: 400``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

import pytest
from workers import DurableObject

from doemu.errors import DataCloneError
from doemu.jsboundary import JsException
from doemu.testing.plugin import HarnessFactory

COUNTER = Path(__file__).resolve().parent.parent / "examples" / "counter"


def doemu(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOEMU_")}
    return subprocess.run(
        [sys.executable, "-m", "doemu", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    (line,) = [ln for ln in result.stderr.splitlines() if ln.startswith("Error: ")]
    return line


@pytest.fixture
def project(tmp_path: Path) -> Path:
    target = tmp_path / "counter"
    shutil.copytree(COUNTER, target, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    return target


def test_no_config_says_run_doemu_init(tmp_path: Path) -> None:
    line = one_line_error(doemu(tmp_path, "dev"))
    assert "no wrangler.json, wrangler.jsonc or wrangler.toml found" in line
    assert "run `doemu init` to create a project here" in line


def test_a_busy_port_suggests_port_0(project: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        line = one_line_error(doemu(project, "dev", "--port", str(port), "--no-reload"))
    assert f"cannot listen on http://127.0.0.1:{port}" in line
    assert "pass --port 0 to pick a free port" in line


@pytest.mark.parametrize(
    ("value", "what"),
    [(".", "that is the project's folder"), ("src", "that is the folder of the main module"),
     ("..", "that holds the project's folder")],
)  # fmt: skip
def test_persist_to_the_sources_is_refused(project: Path, value: str, what: str) -> None:
    line = one_line_error(doemu(project, "dev", "--persist-to", value, "--no-reload"))
    assert line.startswith("Error: --persist-to "), line
    assert what in line and "such as .doemu/state (the default)" in line
    assert not list(project.rglob("*.sqlite"))


def test_an_unknown_config_key_gets_a_did_you_mean(project: Path) -> None:
    config = project / "wrangler.toml"
    config.write_text(config.read_text().replace("main =", "mian = 'x'\nmain =", 1))
    result = doemu(project, "classes")
    assert result.returncode == 0, result.stderr
    assert '"mian" (did you mean "main"?)' in result.stderr


class Ledger(DurableObject):
    async def balance(self) -> Any:
        return self.ctx.storage.get("balance")  # no await: a storage result, not a value

    async def doubled(self) -> Any:
        value = self.ctx.storage.get("balance")
        return value * 2


async def test_a_forgotten_await_names_the_users_method_and_line(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"LEDGER": Ledger})
    with pytest.raises(JsException) as returned:
        await h.env.LEDGER.getByName("a").balance()
    text = returned.value.message
    assert "cannot be sent over RPC" in text and "did you forget `await`" in text
    assert f"Ledger.balance ({Path(__file__)}:" in text
    with pytest.raises(JsException) as used:
        await h.env.LEDGER.getByName("a").doubled()
    assert "return value * 2" in used.value.message  # the user's line, the object's frames
    assert "did you forget `await`" in used.value.message


async def test_a_forgotten_await_when_lenient(doemu_harness: HarnessFactory, lenient: None) -> None:
    h = await doemu_harness({"LEDGER": Ledger}, lenient=True)
    with pytest.raises(DataCloneError) as returned:
        await h.env.LEDGER.getByName("a").balance()
    note = "\n".join(returned.value.__notes__)
    assert "did you forget `await`" in note and f"Ledger.balance ({Path(__file__)}:" in note
    with pytest.raises(TypeError) as used:
        await h.env.LEDGER.getByName("a").doubled()
    printed = "".join(traceback.format_exception(used.value))
    assert "return value * 2" in printed and "did you forget `await`" in printed
