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

**Chaos mode** (``--doemu-chaos``, or ``doemu_chaos = true`` in the ini options, or
``DOEMU_CHAOS=1``): every harness the fixture builds evicts each object after every event it
handles, so each event runs on a fresh instance; ``--doemu-chaos-reset=P`` (``doemu_chaos_reset``,
``DOEMU_CHAOS_RESET``) also resets an object at each await of its work with probability ``P``, and
``--doemu-chaos-seed=N`` (``doemu_chaos_seed``, ``DOEMU_CHAOS_SEED``; random when unset) fixes the
draws. The seed is printed in the summary and beside every failing test, with the options that
replay it. See :mod:`doemu.testing.chaos`.

The ``doemu_dev`` fixture starts real ``doemu dev`` subprocesses (see
:mod:`doemu.testing.devserver`): ``server = doemu_dev(project_dir)`` gives ``url``, ``kill()``,
``restart()``, ``stop()`` and read-only access to the objects' SQLite files.

With plugin autoloading disabled (``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``), enable it with
``-p doemu.testing.plugin``. Set ``doemu_install_modules = false`` in the pytest ini options to
keep ``workers``/``js`` out of ``sys.modules``.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import secrets
import warnings
from collections.abc import Generator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from ..clock import ManualClock
from ..runtime import ClassSpec
from .chaos import ChaosSettings
from .devserver import DevServer, DevServerFactory
from .harness import WorkerHarness

__all__ = [
    "DevServer",
    "DevServerFactory",
    "HarnessFactory",
    "chaos_settings",
    "doemu_clock",
    "doemu_dev",
    "doemu_harness",
    "pytest_addoption",
    "pytest_configure",
    "pytest_pyfunc_call",
    "pytest_report_header",
    "pytest_runtest_makereport",
    "pytest_terminal_summary",
]

_CHAOS = pytest.StashKey[ChaosSettings | None]()
_FACTORY = pytest.StashKey["HarnessFactory"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "doemu_install_modules",
        "install the workers/js/pyodide.ffi stand-ins before collection (default: true)",
        type="bool",
        default=True,
    )
    group = parser.getgroup("doemu", "doemu chaos mode (recovery code under test)")
    group.addoption(
        "--doemu-chaos",
        action="store_true",
        default=None,
        help="evict every object after every event (env DOEMU_CHAOS=1; ini doemu_chaos)",
    )
    group.addoption(
        "--doemu-chaos-reset",
        metavar="P",
        default=None,
        help="with chaos: reset an object at each await with probability P (implies chaos)",
    )
    group.addoption(
        "--doemu-chaos-seed",
        metavar="N",
        default=None,
        help="the seed of the chaos draws (default: random, printed to replay a failure)",
    )
    parser.addini("doemu_chaos", "chaos mode on (see --doemu-chaos)", type="bool", default=False)
    parser.addini("doemu_chaos_reset", "reset probability (see --doemu-chaos-reset)", default="")
    parser.addini("doemu_chaos_seed", "chaos seed (see --doemu-chaos-seed)", default="")


def pytest_configure(config: pytest.Config) -> None:
    if config.getini("doemu_install_modules"):
        from ..compat import install_modules

        install_modules()
    config.stash[_CHAOS] = chaos_settings(config)


def chaos_settings(config: pytest.Config) -> ChaosSettings | None:
    """The run's chaos settings (None: chaos off): the command line, else the environment
    (``DOEMU_CHAOS``, ``DOEMU_CHAOS_RESET``, ``DOEMU_CHAOS_SEED``), else the ini options."""

    def setting(option: str, env: str, ini: str) -> str:
        value = config.getoption(option)
        if value is None:
            value = os.environ.get(env, "") or config.getini(ini)
        return str(value).strip() if not isinstance(value, bool) else ("1" if value else "")

    on = setting("doemu_chaos", "DOEMU_CHAOS", "doemu_chaos").lower() not in ("", "0", "false")
    reset = setting("doemu_chaos_reset", "DOEMU_CHAOS_RESET", "doemu_chaos_reset")
    seed = setting("doemu_chaos_seed", "DOEMU_CHAOS_SEED", "doemu_chaos_seed")
    if not on and not reset:
        return None
    try:
        probability = float(reset) if reset else 0.0
        return ChaosSettings(
            reset_probability=probability,
            seed=int(seed) if seed else secrets.randbelow(2**31),
        )
    except ValueError as exc:
        raise pytest.UsageError(f"doemu chaos: {exc}") from None


def pytest_report_header(config: pytest.Config) -> str | None:
    chaos = config.stash.get(_CHAOS, None)
    return None if chaos is None else f"doemu chaos: {chaos.describe()}"


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Name the seed at the end of the run (the header is hidden by ``-q``)."""
    chaos = config.stash.get(_CHAOS, None)
    if chaos is not None:
        terminalreporter.write_line(
            f"doemu chaos: {chaos.describe()} (replay: {chaos.replay_options()})"
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    """Beside a failing test's report: the chaos seed, what chaos did, how to replay it."""
    outcome = yield
    report = outcome.get_result()
    chaos = item.config.stash.get(_CHAOS, None)
    factory = item.stash.get(_FACTORY, None)
    if chaos is None or factory is None or not report.failed:
        return
    done = [h.chaos_stats for h in factory.made]
    lines = [
        f"{chaos.describe()}: {sum(s.evictions for s in done)} evictions, "
        f"{sum(s.resets for s in done)} resets",
        *(line for s in done for line in s.log[-10:]),
        f"replay: pytest {item.nodeid!r} {chaos.replay_options()}",
    ]
    report.sections.append(("doemu chaos", "\n".join(lines)))


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

    def __init__(
        self,
        persist_dir: Path,
        clock: ManualClock,
        *,
        chaos: ChaosSettings | None = None,
        test_id: str = "",
    ) -> None:
        self.persist_dir = persist_dir
        self.clock = clock
        #: Chaos mode for every harness made here (None: off); see :mod:`doemu.testing.chaos`.
        self.chaos = chaos
        self.test_id = test_id
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
        if self.chaos is not None:
            options.setdefault("chaos", self.chaos)
            options.setdefault("chaos_rng", self.chaos.rng_for(self.test_id, len(self.made)))
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
def doemu_harness(
    request: pytest.FixtureRequest, tmp_path: Path, doemu_clock: ManualClock
) -> Iterator[HarnessFactory]:
    """Build :class:`WorkerHarness` instances on ``tmp_path`` with the test's manual clock;
    those left open are closed after the test (see the module docstring). In chaos mode each
    harness gets the run's chaos settings and a generator seeded by the seed and the test id."""
    factory = HarnessFactory(
        tmp_path / "doemu-state",
        doemu_clock,
        chaos=request.config.stash.get(_CHAOS, None),
        test_id=request.node.nodeid,
    )
    request.node.stash[_FACTORY] = factory
    yield factory
    factory.close_open()


@pytest.fixture
def doemu_dev(tmp_path: Path) -> Iterator[DevServerFactory]:
    """Start real ``doemu dev`` subprocesses: ``server = doemu_dev(project_dir)`` is ready, on a
    free port, with its state in ``tmp_path``; every one is killed at the test's end."""
    factory = DevServerFactory(tmp_path)
    try:
        yield factory
    finally:
        factory.stop_all()
