"""The doemu pytest plugin (registered under ``pytest11``, so it loads automatically).

It installs Cloudflare's Python Workers modules (``workers``, ``js``, ``pyodide.ffi``) before
test modules are collected, so ``from workers import DurableObject`` works at import time, and
provides two fixtures:

* ``doemu_clock`` — a :class:`~doemu.clock.ManualClock` for the test;
* ``doemu_harness`` — a factory of :class:`~doemu.testing.WorkerHarness` on the test's
  ``tmp_path`` with that clock: ``async with doemu_harness({"COUNTER": Counter}) as h: ...``.

With plugin autoloading disabled (``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``), enable it with
``-p doemu.testing.plugin``. Set ``doemu_install_modules = false`` in the pytest ini options to
keep ``workers``/``js`` out of ``sys.modules``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ..clock import ManualClock
from .harness import WorkerHarness

__all__ = ["doemu_clock", "doemu_harness", "pytest_addoption", "pytest_configure"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "doemu_install_modules",
        "install the workers/js/pyodide.ffi stand-ins before collection (default: true)",
        type="bool",
        default=True,
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getini("doemu_install_modules"):
        from ..compat import install_modules

        install_modules()


@pytest.fixture
def doemu_clock() -> ManualClock:
    """A manual clock: time moves only when the test advances it."""
    return ManualClock()


@pytest.fixture
def doemu_harness(tmp_path: Path, doemu_clock: ManualClock) -> Callable[..., WorkerHarness]:
    """Build :class:`WorkerHarness` instances on ``tmp_path`` with the test's manual clock."""

    def make(classes: Any = None, **kwargs: Any) -> WorkerHarness:
        kwargs.setdefault("persist_dir", tmp_path / "doemu-state")
        kwargs.setdefault("clock", doemu_clock)
        if "config" in kwargs:
            return WorkerHarness.from_config(kwargs.pop("config"), **kwargs)
        return WorkerHarness(classes, **kwargs)

    return make
