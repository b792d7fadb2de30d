"""Cloudflare's Python Workers surface (``workers``, ``js``, ``pyodide.ffi``) for doemu.

User code imports ``workers``, ``js`` and ``pyodide.ffi`` exactly as on Cloudflare;
:func:`install_modules` makes those imports resolve to the modules of this package:
``workers`` → :mod:`doemu.compat.workers`, ``js`` → :mod:`doemu.compat.js`, ``pyodide`` →
:mod:`doemu.compat.pyodide`, ``pyodide.ffi`` → :mod:`doemu.compat.pyodide.ffi` and
``workers.workflows`` → :mod:`doemu.compat.workflows`.

The rest of this module is doemu-internal plumbing for the runtime: :func:`call_relaxed`,
the clock behind ``Date.now()`` (:func:`set_clock`), the targets of ``workers.env`` and
``workers.waitUntil`` (:func:`set_env`, :func:`set_wait_until`) and :func:`as_js_buffer`.
"""

from __future__ import annotations

import sys
import warnings
from types import ModuleType

from . import fetch_api, js, pyodide, websocket, workers, workflows
from ._state import set_clock, set_env, set_output_gate, set_wait_until
from .jsproxy import JsBuffer, as_js_buffer
from .pyodide import ffi as pyodide_ffi
from .relaxed import call_relaxed, max_positional

__all__ = [
    "MODULES",
    "JsBuffer",
    "as_js_buffer",
    "call_relaxed",
    "fetch_api",
    "install_modules",
    "js",
    "max_positional",
    "pyodide",
    "pyodide_ffi",
    "set_clock",
    "set_env",
    "set_output_gate",
    "set_wait_until",
    "uninstall_modules",
    "websocket",
    "workers",
    "workflows",
]

#: The import names doemu provides, and the module each resolves to.
MODULES: dict[str, ModuleType] = {
    "workers": workers,
    "js": js,
    "pyodide": pyodide,
    "pyodide.ffi": pyodide_ffi,
    "workers.workflows": workflows,
}


def install_modules() -> None:
    """Make ``import workers`` / ``js`` / ``pyodide`` / ``pyodide.ffi`` resolve to doemu's modules.

    Idempotent. A *different* module already imported under one of these names (say, a PyPI
    package called ``workers``, or the real ``pyodide`` package) is replaced, because user code
    written for Cloudflare must see Cloudflare's surface; a ``RuntimeWarning`` names what was
    shadowed. Modules merely installed on disk need no replacing: ``sys.modules`` wins over them.
    """
    for name, module in MODULES.items():
        existing = sys.modules.get(name)
        if existing is module:
            continue
        if existing is not None:
            origin = getattr(existing, "__file__", None) or repr(existing)
            warnings.warn(
                f"doemu replaces the already-imported module {name!r} ({origin}) with its "
                f"Cloudflare Python Workers stand-in {module.__name__!r}",
                RuntimeWarning,
                stacklevel=2,
            )
        sys.modules[name] = module


def uninstall_modules() -> None:
    """Remove doemu's modules from ``sys.modules`` (only entries that are doemu's)."""
    for name, module in MODULES.items():
        if sys.modules.get(name) is module:
            del sys.modules[name]
