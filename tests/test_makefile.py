"""``make dev`` installs what serving needs, nothing more; the toolchain belongs to ``make test``.

The commands are read from ``make -n`` (what make would run, on a venv path that does not
exist, so every step shows); a real ``make dev`` in a fresh clone was measured for the report.
"""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


def planned(target: str, venv: Path) -> str:
    result = subprocess.run(
        ["make", "-n", target, f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_make_dev_installs_doemu_without_the_dev_extra(tmp_path: Path) -> None:
    plan = planned("dev", tmp_path / "venv")
    installs = [line for line in plan.splitlines() if "pip install" in line]
    assert any(line.rstrip().endswith("-e .") for line in installs), plan
    assert "[dev]" not in plan, plan
    assert "doemu dev" in plan


def test_make_test_installs_the_dev_extra(tmp_path: Path) -> None:
    plan = planned("test", tmp_path / "venv")
    assert "-e '.[dev]'" in plan, plan
    assert "pytest" in plan and "mypy" in plan and "ruff" in plan


def test_serving_needs_no_tool_of_the_dev_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    serving = " ".join(project["dependencies"])
    for tool in ("pytest", "mypy", "ruff", "playwright", "openai", "anthropic", "import-linter"):
        assert tool not in serving
