"""What installing doemu gives a user's project beyond the ``doemu`` command.

* ``import agents`` / ``workers`` / ``js`` / ``pyodide.ffi`` work in any interpreter of the venv
  (it failed with ``No module named 'workers'`` outside a running server), through a finder that
  never shadows a real module of those names, is not fooled by a ``js/`` folder of scripts in
  the current directory (``cannot import name 'Date' from 'js'``), and imports nothing of doemu
  when the interpreter starts (it imported doemu in every interpreter, and pytest warned
  ``Module already imported so cannot be rewritten: doemu`` in every new project);
* the built wheel ships that ``.pth``, ``py.typed`` and the stub packages, so ``mypy --strict``
  resolves ``from workers import …`` in a user's file (it failed: no stubs, no ``py.typed`` for
  agents);
* doemu's pytest plugin runs ``async def`` tests by itself (they failed without pytest-asyncio).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from .wheels import make_venv

IMPORTS = "import agents, workers, workers.workflows, js; from pyodide.ffi import to_js"


def python(code: str, cwd: Path, exe: str = sys.executable, **env: str) -> str:
    result = subprocess.run(
        [exe, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_cloudflare_modules_import_in_a_plain_interpreter(tmp_path: Path) -> None:
    out = python(
        IMPORTS + "; import sys, doemu.compat as c, json;"
        "print(json.dumps([sys.modules[n] is c.MODULES[n] for n in c.MODULES]))",
        cwd=tmp_path,  # not the repository: only what is installed is importable
    )
    assert json.loads(out) == [True] * 5  # doemu's own modules, never copies


def test_a_real_module_of_the_same_name_wins(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "js" / "jquery").mkdir(parents=True)  # a `js` namespace package, as fanstatic's
    (site / "js" / "jquery" / "__init__.py").write_text("")
    (site / "workers.py").write_text("REAL = True\n")
    out = python(
        "import js.jquery, workers, pyodide.ffi, json;"
        "print(json.dumps([js.__file__, workers.REAL, pyodide.ffi.__name__]))",
        cwd=tmp_path,
        PYTHONPATH=str(site),
    )
    assert json.loads(out) == [None, True, "doemu.compat.pyodide.ffi"]


def test_a_js_folder_of_scripts_does_not_shadow_the_stand_in(tmp_path: Path) -> None:
    """A project's ``js/`` folder (scripts, no Python) in the current directory is importable
    as a namespace package; the stand-in wins over it, and ``agents.chat`` imports."""
    (tmp_path / "js" / "vendor").mkdir(parents=True)
    (tmp_path / "js" / "app.js").write_text("console.log(1)\n")
    out = python(
        "from js import Date; import agents.chat, js, json, doemu.compat as c;"
        "print(json.dumps([js is c.MODULES['js'], Date is c.js.Date]))",
        cwd=tmp_path,
    )
    assert json.loads(out) == [True, True]


def _imported_modules(exe: str, cwd: Path) -> set[str]:
    """The modules an interpreter imports to run nothing (``-X importtime``)."""
    result = subprocess.run(
        [exe, "-X", "importtime", "-c", "pass"], cwd=cwd, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("import time:")]
    assert len(lines) > 10, result.stderr  # the report is there: the check below can fail
    return {line.rsplit("|", 1)[1].strip() for line in lines}


@pytest.mark.parametrize("venv", ["editable", "wheel"])
def test_starting_an_interpreter_imports_nothing_of_doemu(
    venv: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The ``.pth`` line runs in every interpreter of the venv: it defines its finder and
    imports no module of doemu's until ``workers``/``js``/``pyodide`` is imported."""
    exe = sys.executable
    if venv == "wheel":
        exe = str(request.getfixturevalue("wheel_venv") / "bin" / "python")
    modules = _imported_modules(exe, tmp_path)
    ours = sorted(m for m in modules if m.split(".")[0] in {"doemu", "agents"})
    assert ours == [], ours
    out = python("import workers, sys; print('doemu.compat' in sys.modules)", tmp_path, exe)
    assert out.strip() == "True"  # ... and the stand-ins still come when asked for


@pytest.fixture(scope="module")
def wheel_venv(doemu_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding doemu's built (non-editable) wheel (see :func:`tests.wheels.make_venv`)."""
    names = set(zipfile.ZipFile(doemu_wheel).namelist())
    assert {"doemu-standins.pth", "doemu/py.typed", "agents/py.typed"} <= names
    assert {"workers-stubs/__init__.pyi", "js-stubs/__init__.pyi", "pyodide-stubs/ffi.pyi"} <= names
    assert "doemu/scaffold/template/tests/test_counter.py" in names
    venv = tmp_path_factory.mktemp("wheel") / "venv"
    make_venv(venv, doemu_wheel)
    return venv


def test_the_wheel_makes_the_modules_importable(wheel_venv: Path, tmp_path: Path) -> None:
    exe = str(wheel_venv / "bin" / "python")
    out = python(IMPORTS + "; import doemu; print(doemu.__file__)", tmp_path, exe)
    assert out.startswith(str(wheel_venv))  # the wheel's doemu, not the repository's


def test_a_new_projects_pytest_prints_no_assert_rewrite_warning(
    wheel_venv: Path, tmp_path: Path
) -> None:
    """``doemu init``'s project, tested with the wheel's venv: its tests pass and pytest does
    not warn that doemu (its plugin) was imported before pytest could rewrite it."""
    from doemu.scaffold import write_project

    project = tmp_path / "fresh"
    write_project(project)
    result = subprocess.run(
        [str(wheel_venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST")},
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert " passed" in output, output
    assert "PytestAssertRewriteWarning" not in output, output
    assert "already imported" not in output, output


USER_FILE = """\
from js import Date
from pyodide.ffi import to_js
from workers import DurableObject, Response, WorkerEntrypoint

from agents import Agent


class Counter(DurableObject):
    async def fetch(self, request: object) -> Response:
        # Response.json is typed Any (a descriptor in doemu.compat), hence the annotation.
        response: Response = Response.json({"now": Date.now(), "proxy": str(to_js([1]))})
        return response


class Default(WorkerEntrypoint):
    pass


class Helper(Agent):
    pass
"""


def test_mypy_strict_resolves_the_cloudflare_modules_in_a_user_file(
    wheel_venv: Path, tmp_path: Path
) -> None:
    (tmp_path / "entry.py").write_text(USER_FILE)
    (tmp_path / "wrong.py").write_text("from workers import Response\n\nn: int = Response('x')\n")
    mypy = [sys.executable, "-m", "mypy", "--strict", "--no-incremental"]
    mypy += ["--python-executable", str(wheel_venv / "bin" / "python")]
    env = {k: v for k, v in os.environ.items() if k != "MYPYPATH"}
    ok = subprocess.run(
        [*mypy, "entry.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # The names have real types, not Any: a wrong use is reported.
    wrong = subprocess.run(
        [*mypy, "wrong.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env
    )
    expected = '(expression has type "Response", variable has type "int")'
    assert wrong.returncode == 1 and expected in wrong.stdout, wrong.stdout


# -- the pytest plugin runs async tests on its own ------------------------------------------------

ASYNC_TESTS = """
import asyncio

from workers import DurableObject


class Tally(DurableObject):
    async def add(self):
        n = (await self.ctx.storage.get("n") or 0) + 1
        await self.ctx.storage.put("n", n)
        return n


async def test_passes(doemu_harness, doemu_clock):
    h = await doemu_harness({"TALLY": Tally})
    assert h.clock is doemu_clock
    assert await h.env.TALLY.getByName("t").add() == 1
    await asyncio.sleep(0)


async def test_fails():
    await asyncio.sleep(0)
    raise AssertionError("an async failure is reported")
"""

INNER = ("-W", "ignore::pytest.PytestAssertRewriteWarning")


def test_async_tests_run_without_an_async_plugin(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(ASYNC_TESTS)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest(*INNER, "-p", "doemu.testing.plugin")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: an async failure is reported*"])


@pytest.mark.parametrize("mode", ["strict", "auto"])
def test_async_tests_run_beside_pytest_asyncio(pytester: pytest.Pytester, mode: str) -> None:
    """Unmarked tests in strict mode run through doemu's plugin; in auto mode pytest-asyncio
    runs them (either way they run, once)."""
    pytester.makepyfile(ASYNC_TESTS)
    result = pytester.runpytest(
        *INNER, "-o", f"asyncio_mode={mode}", "-o", "asyncio_default_fixture_loop_scope=function"
    )
    result.assert_outcomes(passed=1, failed=1)
