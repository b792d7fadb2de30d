"""The shape of ``agents``: layers point down, nothing imports the façade back, no cycles.

The same contract as an import-linter ``layers`` contract, checked with ``ast`` so that it needs
no extra tool: every import counts, ``TYPE_CHECKING`` blocks and function-level imports too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import agents

AGENTS_DIR = Path(agents.__file__).parent

#: Top to bottom; modules in one layer are independent of each other.
LAYERS: list[set[str]] = [
    {"agents.agent", "agents.routing"},
    {"agents.fibers", "agents.schedules", "agents.queue", "agents.rpc"},
    {"agents.keepalive", "agents.retry"},
    {"agents.core"},
    {"agents.options", "agents.errors"},
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(AGENTS_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _import_graph() -> dict[str, set[str]]:
    """``{module: modules of agents it imports}`` for every module of the package."""
    paths = sorted(AGENTS_DIR.rglob("*.py"))
    known = {_module_name(p) for p in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        name = _module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                    module = f"{base}.{node.module}" if node.module else base
                else:
                    module = node.module or ""
                targets.add(module)
                targets.update(f"{module}.{alias.name}" for alias in node.names)
        graph[name] = {t for t in targets if t in known and t != name}
    return graph


def _container(module: str) -> str | None:
    for layer in LAYERS:
        for member in layer:
            if module == member or module.startswith(member + "."):
                return member
    return None


def test_layers_point_down_and_siblings_are_independent() -> None:
    rank = {member: i for i, layer in enumerate(LAYERS) for member in layer}
    offenders = []
    for module, targets in _import_graph().items():
        source = _container(module)
        if source is None:
            continue  # agents/__init__.py re-exports the public names of every layer
        for target in targets:
            goal = _container(target)
            assert goal is not None, f"{target} is in no layer"
            if goal != source and rank[goal] <= rank[source]:
                offenders.append(f"{module} -> {target}")
    assert offenders == []


def test_nothing_imports_the_facade_back() -> None:
    importers = sorted(m for m, targets in _import_graph().items() if "agents.agent" in targets)
    assert importers == ["agents"]


def test_no_import_cycles() -> None:
    graph = _import_graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []
