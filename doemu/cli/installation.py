"""At ``doemu`` start-up: is the ``agents`` package installed beside doemu still doemu's?

OpenAI's ``openai-agents`` is imported as ``agents`` too, and pip merges the two into one
folder (see ``agents/_installation.py``, which also runs first in ``agents/__init__.py``). A
Worker that imports ``agents`` would then fail deep inside its own import with an error that
names neither library, so ``doemu`` checks before it loads anything. The check is that file's,
loaded by path: importing the package ``agents`` here would run the ``__init__`` another
distribution may have replaced, and would cost its import time on every ``doemu dev``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["agents_problem"]

#: doemu's own ``agents`` package: the folder beside ``doemu/`` (in a wheel install and a clone).
AGENTS_DIR = Path(__file__).resolve().parent.parent.parent / "agents"


def agents_problem(agents_dir: Path = AGENTS_DIR) -> str | None:
    """What is wrong with the ``agents`` installed beside doemu, or ``None``."""
    checker = agents_dir / "_installation.py"
    spec = importlib.util.spec_from_file_location("_doemu_agents_installation", checker)
    if spec is None or spec.loader is None or not checker.is_file():
        return None  # doemu without its agents package: nothing to collide with
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    problem: str | None = module.collision(agents_dir)
    if problem is not None:
        return problem
    found = importlib.util.find_spec("agents")
    origin = None if found is None else found.origin
    if origin is not None and Path(origin).resolve().parent != agents_dir.resolve():
        return (
            f"`import agents` finds {origin}, not doemu's `agents` package ({agents_dir}): "
            f"another package named `agents` comes first on sys.path. {module.ADVICE}"
        )
    return None
