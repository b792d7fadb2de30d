"""Shared fixtures for the unit and in-process tests."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from doemu.clock import ManualClock
from doemu.compat import install_modules
from doemu.jsboundary import set_strict
from doemu.storage import ObjectStorage, StorageLimits

from .locks import exclusive
from .storage_helpers import NOW
from .wheels import build_doemu_wheel

install_modules()

pytest_plugins = ["pytester"]  # test_testing_plugin.py runs the doemu plugin in inner sessions

_names = itertools.count()


@pytest.fixture(autouse=True)
def _strict_boundary() -> Iterator[None]:
    """Every test starts with the JavaScript boundary's rules on (doemu's default)."""
    set_strict(True)
    yield
    set_strict(True)


@pytest.fixture
def lenient() -> None:
    """``--lenient``: the boundary's rules off for this test."""
    set_strict(False)


@pytest.fixture(scope="session")
def doemu_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """doemu's wheel, built from this repository once per run (see tests/wheels.py). Under
    pytest-xdist the workers share it: the first builds it into the run's temporary directory
    (``pip wheel`` builds inside the tree, so never two at once), the others find it there."""
    base = tmp_path_factory.getbasetemp()
    dist = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "doemu-dist"
    dist.mkdir(exist_ok=True)
    with exclusive(dist / ".lock"):
        built = sorted(dist.glob("doemu-*.whl"))
        return built[0] if built else build_doemu_wheel(dist)


@pytest.fixture
def unique_name() -> Callable[[str], str]:
    """Unique object names per test, so no test depends on another's state."""

    def make(prefix: str = "obj") -> str:
        return f"{prefix}-{next(_names)}"

    return make


# -- storage: ObjectStorage on files in tmp_path, on a manual clock ------------------------------


@pytest.fixture
def storage_clock() -> ManualClock:
    """The storage tests' manual clock, standing at :data:`tests.storage_helpers.NOW`."""
    return ManualClock(NOW)


@pytest.fixture
def alarm_commits() -> list[float | None]:
    """The alarm times the ``storage`` fixture reported as committed, in order."""
    return []


@pytest.fixture
def open_storage(
    tmp_path: Path, storage_clock: ManualClock
) -> Iterator[Callable[..., ObjectStorage]]:
    """``open_storage(name="obj.sqlite", **options)``: an :class:`ObjectStorage` on
    ``tmp_path / name`` (on ``storage_clock`` unless ``clock=`` is given). Every storage it
    opened is closed after the test (closing is idempotent, so tests may close them too)."""
    opened: list[ObjectStorage] = []

    def open_(name: str = "obj.sqlite", **options: Any) -> ObjectStorage:
        options.setdefault("clock", storage_clock)
        storage = ObjectStorage(tmp_path / name, **options)
        opened.append(storage)
        return storage

    yield open_
    for storage in opened:
        storage.close()


@pytest.fixture
def storage(
    open_storage: Callable[..., ObjectStorage], alarm_commits: list[float | None]
) -> ObjectStorage:
    """``obj.sqlite`` in ``tmp_path``; its committed alarm changes go to ``alarm_commits``."""
    return open_storage("obj.sqlite", on_alarm_commit=alarm_commits.append)


@pytest.fixture
def limited(open_storage: Callable[..., ObjectStorage]) -> ObjectStorage:
    """A storage with Cloudflare's production limits (``storage`` has none)."""
    return open_storage("limited.sqlite", limits=StorageLimits.production())
