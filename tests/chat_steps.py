"""A scripted chat model's sleeps that wait for the test: each :func:`step` lets one through, so
a test decides exactly where in a reply things happen. Import :func:`_steps` into a test module
(its autouse fixture gives every test a fresh queue)."""

from __future__ import annotations

import asyncio

import pytest

__all__ = ["_steps", "gated_sleep", "step"]

STEPS: asyncio.Queue[None] | None = None


async def gated_sleep(_seconds: float) -> None:
    assert STEPS is not None
    await STEPS.get()


def step(n: int = 1) -> None:
    assert STEPS is not None
    for _ in range(n):
        STEPS.put_nowait(None)


@pytest.fixture(autouse=True)
def _steps() -> None:
    global STEPS
    STEPS = asyncio.Queue()
