"""``import workers`` / ``js`` / ``pyodide.ffi`` in any interpreter where doemu is installed.

User code and ``agents`` import Cloudflare's Python Workers modules by their Cloudflare names.
Inside ``doemu dev``, the test harness and the pytest plugin, :func:`doemu.compat.install_modules`
puts doemu's stand-ins in ``sys.modules``; an editor, a REPL, a doc tool or a plain ``python -c
"import agents"`` runs none of those. The wheel therefore ships ``doemu-standins.pth``, whose one
line calls :func:`install` when the interpreter starts: it appends :class:`StandInFinder` to the
*end* of ``sys.meta_path``.

Why a fallback finder from a ``.pth`` and not top-level ``workers``/``js``/``pyodide`` modules in
the wheel:

* **Nothing is shadowed.** The finder is asked only after every other finder has failed, so any
  real module of those names wins: the ``pyodide`` package of ``pyodide-py``, a ``js`` namespace
  package (fanstatic's ``js.jquery`` …), a PyPI ``workers``. Top-level modules in the wheel would
  collide with those on disk and on install.
* **Deploying is untouched.** On Cloudflare, doemu is not installed, and the runtime provides
  ``js`` (Pyodide's built-in module, in ``sys.modules`` from the start) and ``workers`` (the
  runtime SDK); even a doemu vendored into a Worker by mistake changes nothing, because vendored
  packages are put on ``sys.path`` without processing their ``.pth`` files, and the finder would
  come after the real modules anyway.
* **Start-up stays cheap.** The ``.pth`` imports only this module (standard library only);
  :mod:`doemu.compat` (tens of milliseconds) is imported the first time user code imports one of
  the names.

The module the finder returns *is* doemu's stand-in (``sys.modules["workers"] is
doemu.compat.workers``), so a later :func:`~doemu.compat.install_modules` finds it already in
place, and classes are never duplicated. Typing is separate: the wheel's stub-only packages
``workers-stubs``, ``js-stubs`` and ``pyodide-stubs`` (PEP 561) serve mypy and editors.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:  # importlib.abc costs start-up time, and this module runs in every interpreter
    from importlib.abc import Loader

__all__ = ["NAMES", "StandInFinder", "install"]

#: The import names the finder provides (those of :data:`doemu.compat.MODULES`).
NAMES = frozenset({"workers", "js", "pyodide", "pyodide.ffi"})


def _stand_in(name: str) -> ModuleType:
    from doemu.compat import MODULES

    return MODULES[name]


class StandInFinder:
    """A meta-path finder and loader of last resort for :data:`NAMES` (see the module docstring)."""

    @classmethod
    def find_spec(
        cls, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in NAMES:
            return None
        if fullname == "pyodide.ffi" and sys.modules.get("pyodide") is not _stand_in("pyodide"):
            return None  # a real pyodide without an ffi module: not ours to complete
        return ModuleSpec(fullname, cast("Loader", cls), origin="doemu stand-in")

    @staticmethod
    def create_module(spec: ModuleSpec) -> ModuleType:
        """doemu's own module object, so there is one ``workers`` module, never a copy."""
        return _stand_in(spec.name)

    @staticmethod
    def exec_module(module: ModuleType) -> None:
        """Nothing to run (the stand-in is imported already); ``pyodide`` brings its ``ffi``.

        Without this, ``import pyodide.ffi`` would find ``ffi.py`` on the stand-in package's
        ``__path__`` and import a second copy of it under the name ``pyodide.ffi``.
        """
        if module is _stand_in("pyodide"):
            sys.modules.setdefault("pyodide.ffi", _stand_in("pyodide.ffi"))


def install() -> None:
    """Append :class:`StandInFinder` to ``sys.meta_path`` (idempotent). Run by the ``.pth``."""
    if StandInFinder not in sys.meta_path:
        sys.meta_path.append(StandInFinder)
