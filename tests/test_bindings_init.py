"""``doemu init --with kv,…``: the project binds what was asked, loads with no warning, and its own
tests (which use the bindings) pass with plain ``pytest``; without ``--with`` nothing changes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from doemu.cli import main
from doemu.config import load_config
from doemu.loader import load_worker, unload_user_modules
from doemu.scaffold import BINDING_CHOICES, TEMPLATE_FILES, write_project


@pytest.fixture(autouse=True)
def _forget_user_modules() -> Iterator[None]:
    yield
    unload_user_modules()


def test_without_with_the_project_has_no_binding_and_no_marker(tmp_path: Path) -> None:
    write_project(tmp_path / "plain")
    text = "".join((tmp_path / "plain" / f).read_text() for f in TEMPLATE_FILES.values())
    assert "{{" not in text and "kv_namespaces" not in text and "CACHE" not in text


@pytest.mark.parametrize("chosen", [[name] for name in BINDING_CHOICES] + [list(BINDING_CHOICES)])
def test_with_bindings_the_project_loads_and_its_tests_pass(
    tmp_path: Path, chosen: list[str]
) -> None:
    project = tmp_path / "p"
    result = CliRunner().invoke(main, ["init", str(project), "--with", ",".join(chosen)])
    assert result.exit_code == 0, result.output
    text = "".join((project / f).read_text() for f in TEMPLATE_FILES.values())
    assert "{{" not in text
    config = load_config(project / "wrangler.toml")
    assert not config.warnings
    assert ("kv" in chosen) == bool(config.resources.kv)
    assert ("d1" in chosen) == bool(config.resources.d1)
    assert ("r2" in chosen) == bool(config.resources.r2)
    assert not load_worker(config).warnings
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    tests = (project / "tests" / "test_counter.py").read_text().count("\nasync def test_")
    assert f"{tests} passed" in run.stdout


def test_an_unknown_binding_is_refused_by_name(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["init", str(tmp_path / "p"), "--with", "kv,queues"])
    assert result.exit_code == 1
    assert "--with queues: doemu init can add kv, d1, r2" in result.output
    assert not (tmp_path / "p").exists()
