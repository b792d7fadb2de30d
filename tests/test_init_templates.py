"""``doemu init --template chat|agent-server``: agent projects that load as Workers as written.

Running the projects' own tests, and serving them with ``doemu dev``, is
``e2e/test_builders_surface.py``'s job; here the files, the config and the refusals.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from doemu.cli import main
from doemu.config import load_config
from doemu.loader import load_worker


def init(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["init", *args])
    return result.exit_code, result.output


def files_under(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize(
    ("template", "binding", "class_name", "test_file", "hint"),
    [
        ("chat", "Chat", "Chat", "tests/test_chat.py", "/agents/chat/alice"),
        ("agent-server", "AGENTS", "AgentServer", "tests/test_agent_server.py", "/sessions/s1"),
    ],
)
def test_an_agent_template_writes_a_project_that_loads(
    tmp_path: Path, template: str, binding: str, class_name: str, test_file: str, hint: str
) -> None:
    project = tmp_path / f"my {template}"
    code, output = init(str(project), "--template", template)
    assert code == 0, output
    assert files_under(project) == sorted(
        [".gitignore", "pyproject.toml", "src/entry.py", test_file, "wrangler.toml"]
    )
    assert hint in output
    config = load_config(project / "wrangler.toml")
    assert config.name == f"my-{template}" and not config.warnings
    loaded = load_worker(config)
    assert not loaded.warnings
    assert loaded.entry is not None and loaded.entry.__name__ == "Default"
    spec = loaded.class_for(binding)
    assert spec.name == class_name and spec.sql  # every agent needs SQLite storage
    assert "{{" not in "".join((project / f).read_text() for f in files_under(project))


def test_init_refuses_an_unknown_template_and_bindings_on_an_agent_template(
    tmp_path: Path,
) -> None:
    code, output = init(str(tmp_path / "a"), "--template", "nope")
    assert code != 0 and "nope" in output
    code, output = init(str(tmp_path / "b"), "--template", "chat", "--with", "kv")
    assert code != 0 and "--with adds bindings to the worker template" in output
    assert not (tmp_path / "b").exists()
