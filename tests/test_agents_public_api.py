"""Public-API hygiene: every name in ``agents.__all__`` exists, and the package never imports
doemu (agents must run on Cloudflare, where doemu does not exist)."""

from __future__ import annotations

import ast
from pathlib import Path

import agents

AGENTS_DIR = Path(agents.__file__).parent


def test_every_exported_name_exists() -> None:
    missing = [name for name in agents.__all__ if not hasattr(agents, name)]
    assert missing == []
    assert sorted(agents.__all__) == agents.__all__


def test_agents_never_import_doemu() -> None:
    offenders = []
    for path in sorted(AGENTS_DIR.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "doemu"]
    assert offenders == []
