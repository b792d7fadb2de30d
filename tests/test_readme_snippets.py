"""The documentation's project snippets run as written, and match what ``doemu init`` writes.

A fenced block right after a ``<!-- file: PATH -->`` comment is a file of one project (in
``docs/getting-started.md``, "Your own project", and ``docs/testing.md``). The test writes every
such block to ``PATH`` under ``tmp_path`` and runs ``pytest`` there in a subprocess, as a user who
copied them would: their imports (``from entry import Counter``), the plugin's fixtures and async
tests must all work with nothing else. Snippets of other sections are not marked and not run.
"""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from doemu.config import load_config
from doemu.loader import load_worker, unload_user_modules
from doemu.scaffold import TEMPLATE_FILES, write_project

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SNIPPET = re.compile(r"^<!-- file: (?P<path>\S+) -->\n```[a-z]*\n(?P<body>.*?)^```$", re.M | re.S)
# The two pages whose blocks are marked; each must contribute at least one file.
PAGES = ("getting-started.md", "testing.md")


def marked_blocks() -> dict[str, tuple[str, str]]:
    """Every marked block of the documentation: its path -> (page, body)."""
    files: dict[str, tuple[str, str]] = {}
    for page in sorted(DOCS.glob("*.md")):
        for match in SNIPPET.finditer(page.read_text(encoding="utf-8")):
            assert match["path"] not in files, f"docs: two blocks for {match['path']}"
            files[match["path"]] = (page.name, match["body"])
    return files


def readme_files() -> dict[str, str]:
    return {path: body for path, (_, body) in marked_blocks().items()}


def section_of(path: str) -> str:
    return marked_blocks()[path][0]


def write(root: Path, files: dict[str, str]) -> None:
    for path, body in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(body, encoding="utf-8")


def test_each_section_has_runnable_snippets() -> None:
    files = readme_files()
    assert {"wrangler.toml", "src/entry.py", "tests/test_counter.py"} <= set(files)
    assert {section_of(p) for p in files} == set(PAGES)


def test_the_readme_project_runs_as_written(tmp_path: Path) -> None:
    """The marked blocks form a project whose tests pass with plain ``pytest`` (which failed:
    ``from myworker import Counter``, methods the snippet's class lacked, async tests without an
    async plugin)."""
    files = readme_files()
    write(tmp_path, files)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    tests = sum(body.count("\nasync def test_") for p, body in files.items() if p[:5] == "tests")
    assert f"{tests} passed" in result.stdout, result.stdout


def normalised(text: str) -> str:
    return re.sub(r'(?m)^compatibility_date = "[0-9-]+"$', 'compatibility_date = "…"', text)


def test_doemu_init_writes_what_the_readme_shows(tmp_path: Path) -> None:
    project = tmp_path / "my-worker"
    write_project(project, today=datetime(2026, 1, 1, tzinfo=UTC))
    shown = readme_files()
    for target in TEMPLATE_FILES.values():
        if target in shown:
            assert normalised((project / target).read_text()) == normalised(shown[target]), target


@pytest.fixture
def _forget_user_modules() -> object:
    yield None
    unload_user_modules()


@pytest.mark.usefixtures("_forget_user_modules")
def test_wrangler_toml_example_binds_only_what_the_readme_defines(tmp_path: Path) -> None:
    """``wrangler.toml.example`` next to the README's ``src/entry.py`` loads with every binding
    resolved and no warning (it bound ``Researcher`` and ``ChatAgent``, which nothing defined)."""
    write(tmp_path, {"src/entry.py": readme_files()["src/entry.py"]})
    (tmp_path / "wrangler.toml").write_text((ROOT / "wrangler.toml.example").read_text())
    config = load_config(tmp_path / "wrangler.toml")
    assert not config.warnings
    loaded = load_worker(config)
    assert not loaded.warnings
    assert {b.class_name for b in config.bindings} == {"Counter"}
    assert all(loaded.classes[b.class_name].sql for b in config.bindings)
