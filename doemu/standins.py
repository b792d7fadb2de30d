"""``import workers`` / ``js`` / ``pyodide.ffi`` in any interpreter where doemu is installed.

User code and ``agents`` import Cloudflare's Python Workers modules by their Cloudflare names.
Inside ``doemu dev``, the test harness and the pytest plugin, :func:`doemu.compat.install_modules`
puts doemu's stand-ins in ``sys.modules``; an editor, a REPL, a doc tool or a plain ``python -c
"import agents"`` runs none of those. The wheel therefore ships ``doemu-standins.pth``, whose one
line (written by ``setup.py``) puts a tiny finder in ``sys.meta_path`` when the interpreter
starts. That finder is defined in the ``.pth`` line itself and **imports nothing**: for any
other name it answers "not mine" at once, and only when ``workers``, ``js``, ``pyodide`` or
``pyodide.ffi`` is imported does it import this module and call :func:`find_spec`.

Why nothing at start-up: a ``.pth`` runs in every interpreter of the venv (every ``pytest``,
every tool), so importing ``doemu`` there cost each of them time, and made pytest warn
``Module already imported so cannot be rewritten: doemu`` (doemu is also a pytest plugin, and
pytest can only rewrite the asserts of a plugin it imports itself).

Why a finder and not top-level ``workers``/``js``/``pyodide`` modules in the wheel:

* **A real module wins.** :func:`find_spec` first asks the import system's other finders; a
  real module or package of one of those names is what gets imported: the ``pyodide`` package
  of ``pyodide-py``, a PyPI ``workers``, a ``js`` namespace package holding Python (fanstatic's
  ``js.jquery`` …). Top-level modules in the wheel would collide with those on disk and on
  install.
* **A folder of JavaScript is not a ``js`` module.** A project with a ``js/`` folder of scripts
  in the current directory is common, and Python would import that folder as a namespace
  package, so ``from js import Date`` failed with ``cannot import name 'Date' from 'js'``. A
  namespace package none of whose folders holds Python (a module, or a package with an
  ``__init__.py``) is therefore passed over for the stand-in. That is also why the finder sits
  *before* the path finder in ``sys.meta_path`` rather than after it: after it, the folder
  would already have been imported.
* **Deploying is untouched.** On Cloudflare, doemu is not installed, and the runtime provides
  ``js`` (Pyodide's built-in module, in ``sys.modules`` from the start) and ``workers`` (the
  runtime SDK); even a doemu vendored into a Worker by mistake changes nothing, because vendored
  packages are put on ``sys.path`` without processing their ``.pth`` files.

The module the finder returns *is* doemu's stand-in (``sys.modules["workers"] is
doemu.compat.workers``), so a later :func:`~doemu.compat.install_modules` finds it already in
place, and classes are never duplicated. Typing is separate: the wheel's stub-only packages
``workers-stubs``, ``js-stubs`` and ``pyodide-stubs`` (PEP 561) serve mypy and editors.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec, all_suffixes
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

__all__ = ["NAMES", "PTH_LINE", "StandInLoader", "find_spec"]

#: The import names the finder provides (those of :data:`doemu.compat.MODULES`).
NAMES = frozenset({"workers", "workers.workflows", "js", "pyodide", "pyodide.ffi"})
#: The submodules of a stand-in that come with it (``workers`` is a module, not a package, so
#: ``import workers.workflows`` finds its submodule in ``sys.modules``, put there on import).
_SUBMODULES = {"workers": "workers.workflows", "pyodide": "pyodide.ffi"}

#: The ``.pth`` line ``setup.py`` writes (one line: ``site`` runs lines that start with
#: ``import``). It defines the start-up finder, which imports nothing until one of
#: :data:`NAMES` is imported, and puts it just before the path finder. A doemu that was removed
#: or is broken makes the finder answer "not mine": an interpreter must always start.
PTH_LINE = (
    "import sys; exec("
    + repr(
        "class DoemuStandIns:\n"
        " names = ('workers', 'workers.workflows', 'js', 'pyodide', 'pyodide.ffi')\n"
        " @classmethod\n"
        " def find_spec(cls, name, path=None, target=None):\n"
        "  if name not in cls.names:\n"
        "   return None\n"
        "  try:\n"
        "   from doemu.standins import find_spec\n"
        "  except Exception:\n"
        "   return None\n"
        "  return find_spec(name, path, target, cls)\n"
        "if not any(getattr(f, '__name__', '') == 'DoemuStandIns' for f in sys.meta_path):\n"
        " at = [i for i, f in enumerate(sys.meta_path) if getattr(f, '__name__', '') "
        "== 'PathFinder']\n"
        " sys.meta_path.insert(at[0] if at else len(sys.meta_path), DoemuStandIns)\n"
    )
    + ")\n"
)


def _stand_in(name: str) -> ModuleType:
    from doemu.compat import MODULES

    return MODULES[name]


def _holds_python(folder: str) -> bool:
    """Whether ``folder`` holds a Python module or a regular package (one level deep)."""
    suffixes = tuple(all_suffixes())
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return False
    for entry in entries:
        if entry.name.endswith(suffixes):
            return True
        if entry.is_dir() and os.path.exists(os.path.join(entry.path, "__init__.py")):
            return True
    return False


def _is_python(spec: ModuleSpec) -> bool:
    """Whether a spec another finder found is a real module (see "a folder of JavaScript")."""
    locations = spec.submodule_search_locations
    if spec.origin is not None or locations is None:
        return True  # a module or a regular package
    return any(_holds_python(str(folder)) for folder in locations)


def _real_spec(
    name: str, path: Sequence[str] | None, target: ModuleType | None, finder: Any
) -> ModuleSpec | None:
    """What the finders after ``finder`` (the start-up finder) find for ``name``."""
    meta_path = list(sys.meta_path)
    start = next((i + 1 for i, f in enumerate(meta_path) if f is finder), 0)
    for other in meta_path[start:]:
        find = getattr(other, "find_spec", None)
        if find is None or other is finder:
            continue
        spec = find(name, path, target)
        if spec is not None:
            return cast("ModuleSpec", spec)
    return None


def find_spec(
    name: str,
    path: Sequence[str] | None = None,
    target: ModuleType | None = None,
    finder: Any = None,
) -> ModuleSpec | None:
    """The spec of ``name`` (one of :data:`NAMES`): a real module's if there is one, else the
    stand-in's. ``finder`` is the start-up finder calling this (the finders after it are asked).
    """
    if name not in NAMES:
        return None
    parent = name.partition(".")[0]
    if parent != name and sys.modules.get(parent) is not _stand_in(parent):
        return None  # a real pyodide or workers: its own submodule, or none; not ours to complete
    real = _real_spec(name, path, target, finder)
    if real is not None and _is_python(real):
        return real
    return ModuleSpec(name, cast("Loader", StandInLoader), origin="doemu stand-in")


class StandInLoader:
    """The loader of the stand-in modules: it hands out doemu's own module objects."""

    @staticmethod
    def create_module(spec: ModuleSpec) -> ModuleType:
        """doemu's own module object, so there is one ``workers`` module, never a copy."""
        return _stand_in(spec.name)

    @staticmethod
    def exec_module(module: ModuleType) -> None:
        """Nothing to run (the stand-in is imported already); ``pyodide`` brings its ``ffi``
        and ``workers`` its ``workflows``.

        Without this, ``import pyodide.ffi`` would find ``ffi.py`` on the stand-in package's
        ``__path__`` and import a second copy of it under the name ``pyodide.ffi``, and
        ``import workers.workflows`` would find no package to look in.
        """
        for parent, child in _SUBMODULES.items():
            if module is _stand_in(parent):
                sys.modules.setdefault(child, _stand_in(child))
