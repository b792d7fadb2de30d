"""Shared fixtures for the unit and in-process tests."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from doemu.compat import install_modules
from doemu.testing import WorkerHarness

install_modules()

_names = itertools.count()


@pytest.fixture
def unique_name() -> Callable[[str], str]:
    """Unique object names per test, so no test depends on another's state."""

    def make(prefix: str = "obj") -> str:
        return f"{prefix}-{next(_names)}"

    return make


@pytest.fixture
async def harness_factory(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """Build started :class:`WorkerHarness` instances on ``tmp_path``; all are closed after."""
    made: list[WorkerHarness] = []

    async def make(classes: dict[str, Any], **kwargs: Any) -> WorkerHarness:
        kwargs.setdefault("persist_dir", tmp_path / "state")
        h = WorkerHarness(classes, **kwargs)
        made.append(h)
        return await h.start()

    yield make
    for h in made:
        await h.close()
