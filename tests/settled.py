"""Reading a storage result synchronously, in tests that run outside an event loop."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

__all__ = ["settled"]


def settled(awaitable: Awaitable[Any]) -> Any:
    """The value of an already-settled storage awaitable; fails if it would suspend."""
    steps = awaitable.__await__()
    try:
        next(steps)
    except StopIteration as done:
        return done.value
    raise AssertionError(f"{awaitable!r} suspended: storage calls must never yield")
