"""``agents`` beside OpenAI's ``openai-agents`` (same import name ``agents``): loud, not broken.

pip merges two distributions that both ship a top-level ``agents`` package into one folder and
``pip check`` says nothing; ``from agents import Runner`` or doemu's own modules then fail with
errors that name neither library. Each test installs real wheels with pip into a throwaway venv
(doemu's own wheel and a small wheel of the other distribution, with its real ``RECORD``) and
runs what a user runs: ``import agents`` and the ``doemu`` command.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from doemu.scaffold import write_project

from .wheels import make_venv, make_wheel

OPENAI_AGENTS = {
    "agents/__init__.py": "from .run import Runner\n",
    "agents/run.py": "class Runner:\n    pass\n",
}


def run(exe: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(exe), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_project(tmp_path / "project")
    return tmp_path / "project"


def test_openai_agents_installed_first_then_doemu(
    doemu_wheel: Path, tmp_path: Path, project: Path
) -> None:
    """doemu's ``agents/__init__.py`` overwrote the other one: importing it says what happened
    and how to separate them, and so does ``doemu`` before it loads the Worker."""
    other = make_wheel(tmp_path, "openai-agents", "0.9.0", OPENAI_AGENTS)
    exe = make_venv(tmp_path / "venv", other, doemu_wheel)
    imported = run(exe, "-c", "import agents", cwd=tmp_path)
    assert imported.returncode == 1
    assert "ImportError: doemu's `agents` package and OpenAI's `openai-agents`" in imported.stderr
    assert "separate virtual environments" in imported.stderr
    command = run(exe.parent / "doemu", "classes", cwd=project)
    assert command.returncode == 1
    assert command.stderr.startswith("Error: doemu's `agents` package and OpenAI's"), command.stderr
    assert "Traceback" not in command.stderr


def test_doemu_installed_first_then_openai_agents(
    doemu_wheel: Path, tmp_path: Path, project: Path
) -> None:
    """The other ``__init__.py`` won (it imports as OpenAI's): ``doemu dev`` refuses to start,
    naming the other distribution, instead of failing inside the Worker's import."""
    other = make_wheel(tmp_path, "openai-agents", "0.9.0", OPENAI_AGENTS)
    exe = make_venv(tmp_path / "venv", doemu_wheel, other)
    command = run(exe.parent / "doemu", "dev", "--port", "0", cwd=project)
    assert command.returncode == 1
    assert "OpenAI's `openai-agents` are installed in the same environment" in command.stderr
    assert "doemu ready" not in command.stdout


def test_another_distributions_files_in_the_agents_folder(
    doemu_wheel: Path, tmp_path: Path
) -> None:
    """Any distribution writing into ``agents/`` is found from doemu's ``RECORD`` and named."""
    other = make_wheel(tmp_path, "agents-extras", "1.0", {"agents/extras.py": "X = 1\n"})
    exe = make_venv(tmp_path / "venv", doemu_wheel, other)
    imported = run(exe, "-c", "import agents", cwd=tmp_path)
    assert imported.returncode == 1
    assert "holds files that doemu did not install (extras.py)" in imported.stderr
    assert "another distribution (agents-extras)" in imported.stderr


def test_alone_it_imports(doemu_wheel: Path, tmp_path: Path) -> None:
    """The control: the same venv without the other distribution imports ``agents``."""
    exe = make_venv(tmp_path / "venv", doemu_wheel)
    imported = run(exe, "-c", "import agents; print(agents.Agent.__name__)", cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip() == "Agent"
