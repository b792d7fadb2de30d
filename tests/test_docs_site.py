"""The documentation site builds strict, and strict means something: a broken link, a missing
anchor or a page left out of the navigation fails ``make docs`` (and so ``make test``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def build(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(root / "site")],
        cwd=root, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.fixture
def site(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    return tmp_path


def test_the_site_builds_strict(site: Path) -> None:
    result = build(site)
    assert result.returncode == 0, result.stderr
    assert (site / "site" / "chat" / "index.html").is_file()


def test_a_broken_link_or_anchor_fails_the_build(site: Path) -> None:
    page = site / "docs" / "runtime.md"
    page.write_text(page.read_text() + "\nSee [the missing page](nowhere.md).\n")
    result = build(site)
    assert result.returncode != 0 and "nowhere.md" in result.stderr
    page.write_text(page.read_text().replace("nowhere.md", "chat.md#no-such-heading"))
    result = build(site)
    assert result.returncode != 0 and "no-such-heading" in result.stderr


def test_a_page_left_out_of_the_navigation_fails_the_build(site: Path) -> None:
    (site / "docs" / "orphan.md").write_text("# Orphan\n")
    result = build(site)
    assert result.returncode != 0 and "orphan.md" in result.stderr


def test_every_page_links_from_the_landing_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.name != "index.md")
    assert [p for p in pages if f"](docs/{p})" not in readme] == []
