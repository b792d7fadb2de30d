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

The fixtures themselves are synchronous, so they need no async test plugin: a plain test can
drive a harness with ``asyncio.run`` (``h = await doemu_harness(...)`` inside it is closed when
``asyncio.run`` ends). With pytest-asyncio (``asyncio_mode = "auto"``, or the ``asyncio`` mark),
async tests and fixtures use them directly.

With plugin autoloading disabled (``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``), enable it with
``-p doemu.testing.plugin``. Set ``doemu_install_modules = false`` in the pytest ini options to
keep ``workers``/``js`` out of ``sys.modules``.
"""

from __future__ import annotations

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
