"""Polling with a deadline, for tests that wait on something happening in the event loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["eventually", "until"]


async def until(predicate: Callable[[], Any], *, within: float = 5.0, what: str = "it") -> Any:
    """Poll a plain predicate until truthy; fail after ``within`` real seconds."""
    deadline = time.monotonic() + within
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.002)


async def eventually(
    predicate: Callable[[], Awaitable[Any]], within_s: float = 5.0, what: str = "it"
) -> Any:
    """Poll an async predicate until truthy (real-time deadline; a manual clock stands still)."""
    deadline = time.monotonic() + within_s
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within_s}s waiting for {what}")
        await asyncio.sleep(0.002)
