"""The doemu pytest plugin (registered under ``pytest11``, so it loads automatically).

It installs Cloudflare's Python Workers modules (``workers``, ``js``, ``pyodide.ffi``) before
test modules are collected, so ``from workers import DurableObject`` works at import time, and
provides two fixtures:

* ``doemu_clock`` — a :class:`~doemu.clock.ManualClock` for the test;
* ``doemu_harness`` — a :class:`HarnessFactory`: call it with classes (or ``config=PATH`` for a
  whole project) to get a :class:`~doemu.testing.WorkerHarness` on the test's ``tmp_path`` with
  that clock. Other keyword arguments go to ``WorkerHarness`` (``vars=``, ``idle_timeout=``,
  ``persist_dir=``, ``clock=``...). Either await it for a started harness, or use it as an async
  context manager::

      async def test_counter(doemu_harness):
          h = await doemu_harness({"COUNTER": Counter})  # started; closed after the test
          ...
          async with doemu_harness(config="wrangler.toml") as project:  # closed at the block's end
              ...

Every harness the fixture made and the test left open is closed before the next test, even when
the test failed: when the test's event loop shuts down (the harness closes itself as the loop
cancels its remaining tasks, which is how pytest-asyncio's function-scoped loop and
``asyncio.run`` end), or else at the fixture's teardown on the loop that started it, when that
loop outlives the test (a wider pytest-asyncio ``loop_scope``, anyio's runner).

**Async tests need nothing else.** A user project that installs doemu and pytest (and no async
test plugin) can write ``async def test_…`` at once: :func:`pytest_pyfunc_call` runs a coroutine
test that no other plugin took in a fresh event loop (``asyncio.run``, which also closes the
harnesses the test left open). An async plugin stays in charge of what it handles: pytest-asyncio
swaps the coroutine for a synchronous wrapper before this hook runs (its ``auto`` mode, or the
``asyncio`` mark), and anyio's tests (``anyio_backend``) are left to anyio. Only async *fixtures*
need pytest-asyncio; the doemu fixtures are synchronous, so they work with or without it.

With plugin autoloading disabled (``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``), enable it with
``-p doemu.testing.plugin``. Set ``doemu_install_modules = false`` in the pytest ini options to
keep ``workers``/``js`` out of ``sys.modules``.
"""

from __future__ import annotations

import asyncio
import inspect
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from ..clock import ManualClock
from ..runtime import ClassSpec
from .harness import WorkerHarness

__all__ = [
    "HarnessFactory",
    "doemu_clock",
    "doemu_harness",
    "pytest_addoption",
    "pytest_configure",
    "pytest_pyfunc_call",
]


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


def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run an ``async def`` test that no async plugin handles, in its own event loop.

    Without this, pytest fails (or skips) every coroutine test in a project with no async plugin,
    and pytest-asyncio is only a dev extra of doemu. Returns ``None`` (pytest's own call runs the
    test) for synchronous tests and for those an async plugin has taken (see the module
    docstring).
    """
    function = pyfuncitem.obj
    if not inspect.iscoroutinefunction(function) or "anyio_backend" in pyfuncitem.funcargs:
        return None
    names = pyfuncitem._fixtureinfo.argnames
    asyncio.run(function(**{name: pyfuncitem.funcargs[name] for name in names}))
    return True


class HarnessFactory:
    """The ``doemu_harness`` fixture: builds harnesses, and closes the ones left open."""

    def __init__(self, persist_dir: Path, clock: ManualClock) -> None:
        self.persist_dir = persist_dir
        self.clock = clock
        self.made: list[WorkerHarness] = []

    def __call__(
        self,
        classes: Mapping[str, type | ClassSpec] | None = None,
        *,
        config: Path | str | None = None,
        **options: Any,
    ) -> WorkerHarness:
        """A harness (not started yet: ``await`` it, or ``async with`` it) for ``classes``
        (``{binding: class}``) or for the project whose wrangler config is ``config``."""
        if (classes is None) == (config is None):
            raise TypeError(
                "doemu_harness() expected either classes ({binding: class}) or config=PATH, "
                f"got {'both' if config is not None else 'neither'}"
            )
        options.setdefault("persist_dir", self.persist_dir)
        options.setdefault("clock", self.clock)
        if config is not None:
            harness = WorkerHarness.from_config(config, **options)
        else:
            assert classes is not None
            harness = WorkerHarness(classes, **options)
        self.made.append(harness)
        return harness

    def close_open(self) -> None:
        """Close every harness still open, on the event loop that started it.

        Called at the fixture's teardown, outside any running loop. A harness whose loop has
        already shut down closed itself then; one that is still open on a closed or running loop
        cannot be closed here and is reported with a warning.
        """
        for harness in self.made:
            if not harness.is_open:
                continue
            loop = harness.loop
            if loop is not None and not loop.is_closed() and not loop.is_running():
                loop.run_until_complete(harness.close())
            else:
                state = "running" if loop is not None and loop.is_running() else "closed"
                warnings.warn(
                    f"doemu_harness could not close {harness!r}: its event loop is {state}; "
                    "close it in the test (await h.close(), or async with)",
                    pytest.PytestWarning,
                    stacklevel=1,
                )


@pytest.fixture
def doemu_clock() -> ManualClock:
    """A manual clock: time moves only when the test advances it."""
    return ManualClock()


@pytest.fixture
def doemu_harness(tmp_path: Path, doemu_clock: ManualClock) -> Iterator[HarnessFactory]:
    """Build :class:`WorkerHarness` instances on ``tmp_path`` with the test's manual clock;
    those left open are closed after the test (see the module docstring)."""
    factory = HarnessFactory(tmp_path / "doemu-state", doemu_clock)
    yield factory
    factory.close_open()
