"""``doemu init [DIR]``: the project it writes loads as a Worker, and it never overwrites silently.

That the project serves (``doemu dev``) and tests (``pytest``) with no edits is proven end to end
in ``e2e/test_own_project.py``; what the files say is checked against the README in
``tests/test_readme_snippets.py``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from doemu.cli import main
from doemu.config import load_config
from doemu.loader import load_worker, unload_user_modules
from doemu.scaffold import TEMPLATE_FILES, project_name

FILES = sorted(TEMPLATE_FILES.values())
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(autouse=True)
def _forget_user_modules() -> Iterator[None]:
    yield
    unload_user_modules()


def init(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["init", *args])
    return result.exit_code, result.output


def files_under(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_init_writes_a_project_that_loads(tmp_path: Path) -> None:
    project = tmp_path / "My Worker"
    code, output = init(str(project))
    assert code == 0, output
    assert files_under(project) == FILES
    assert "Next steps" in output and "doemu dev" in output and "pytest" in output
    assert ".doemu/" in (project / ".gitignore").read_text().splitlines()
    config = load_config(project / "wrangler.toml")
    assert config.name == "my-worker" and not config.warnings
    loaded = load_worker(config)
    assert not loaded.warnings
    assert loaded.entry is not None and loaded.entry.__name__ == "Default"
    counter = loaded.class_for("COUNTER")
    assert counter.name == "Counter" and counter.sql  # SQLite-backed, as the migration says
    assert "{{" not in "".join((project / f).read_text() for f in FILES)


def test_init_defaults_to_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".git").mkdir()  # hidden entries do not make a directory "not empty"
    monkeypatch.chdir(tmp_path)
    code, output = init()
    assert code == 0, output
    assert "cd " not in output
    assert files_under(tmp_path) == FILES


def test_init_refuses_a_non_empty_directory_and_force_keeps_other_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "wrangler.toml").write_text("name = 'mine'\n")
    code, output = init(str(tmp_path))
    assert code == 1
    assert "is not empty (notes.txt, wrangler.toml)" in output and "--force" in output
    assert (tmp_path / "wrangler.toml").read_text() == "name = 'mine'\n"
    assert files_under(tmp_path) == ["notes.txt", "wrangler.toml"]

    code, output = init(str(tmp_path), "--force")
    assert code == 0, output
    assert "wrangler.toml  (replaced)" in output and "entry.py  (replaced)" not in output
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert files_under(tmp_path) == sorted([*FILES, "notes.txt"])


def test_init_refuses_a_file_and_a_directory_in_a_files_place(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    code, output = init(str(tmp_path / "file"))
    assert code == 1 and "is not a directory" in output
    (tmp_path / "p" / "wrangler.toml").mkdir(parents=True)
    code, output = init(str(tmp_path / "p"), "--force")
    assert code == 1 and "is a directory" in output
    assert files_under(tmp_path / "p") == []  # nothing half-written


@pytest.mark.parametrize(
    ("directory", "name"),
    [("My_Worker.v2", "my-worker-v2"), ("__", "my-worker"), ("x" * 80, "x" * 63)],
)
def test_project_name_is_a_valid_worker_name(tmp_path: Path, directory: str, name: str) -> None:
    assert project_name(tmp_path / directory) == name


PYPROJECT = """\
[project]
name = "mine"
dependencies = ["requests>=2"]

[tool.pytest.ini_options]
addopts = "-q"
"""


def test_force_merges_an_existing_pyproject_and_gitignore(tmp_path: Path) -> None:
    """The user's pyproject.toml keeps every byte (its dependencies, its pytest table); the
    tables it lacks are appended, and init says what its own pytest table lacks. A
    .gitignore gets doemu's missing patterns, `.dev.vars` among them."""
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / ".gitignore").write_text("node_modules/\n.venv/\n")
    code, output = init(str(tmp_path), "--force")
    assert code == 0, output
    merged = (tmp_path / "pyproject.toml").read_text()
    assert merged.startswith(PYPROJECT)
    document = tomllib.loads(merged)
    assert document["project"]["dependencies"] == ["requests>=2"]
    assert document["tool"]["pytest"]["ini_options"] == {"addopts": "-q"}
    assert document["dependency-groups"]["dev"] == ["doemu", "pytest"]
    assert "pyproject.toml  (replaced)" not in output
    assert "  merged " in output and "/pyproject.toml" in output
    assert 'kept your [tool.pytest.ini_options]; doemu\'s has `pythonpath = ["src"]`' in output
    ignored = (tmp_path / ".gitignore").read_text().splitlines()
    assert ignored[:2] == ["node_modules/", ".venv/"]
    assert {".doemu/", ".dev.vars"} <= set(ignored) and ignored.count(".venv/") == 1


def test_force_leaves_a_pyproject_that_is_not_toml_alone(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("this is [not toml\n")
    code, output = init(str(tmp_path), "--force")
    assert code == 0, output
    assert (tmp_path / "pyproject.toml").read_text() == "this is [not toml\n"
    assert "pyproject.toml (kept as it is): it is not valid TOML" in output


def test_the_new_project_ignores_secrets_and_names_doemu_for_development(tmp_path: Path) -> None:
    code, output = init(str(tmp_path / "p"))
    assert code == 0, output
    assert ".dev.vars" in (tmp_path / "p" / ".gitignore").read_text().splitlines()
    document = tomllib.loads((tmp_path / "p" / "pyproject.toml").read_text())
    assert "doemu" in document["dependency-groups"]["dev"]


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()))
def test_every_example_ignores_its_secrets(example: str) -> None:
    ignored = (EXAMPLES / example / ".gitignore").read_text().splitlines()
    assert ".dev.vars" in ignored and ".doemu/" in ignored
