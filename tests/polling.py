"""Polling with a real-time deadline: the one way tests wait for something to happen.

``await eventually(predicate, within=5.0, what="…")`` runs in the event loop and takes a plain or
an async predicate; ``eventually_sync(…)`` is its twin for synchronous code (e2e servers in
subprocesses, worker threads), with the same parameters. Both call ``predicate`` until it returns
something truthy and return that value, sleeping ``interval`` seconds between polls, and fail with
an :class:`AssertionError` naming ``what`` once ``within`` real seconds have passed (the deadline
is on the monotonic clock: a ``ManualClock`` stands still while a test polls).

Exceptions raised by the predicate fail the test at once, unless their type is in ``ignoring``
(say ``httpx.TransportError`` while a server restarts): those count as "not yet", and the last
one is named if the deadline passes. e2e/ imports the sync twin from here too.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["eventually", "eventually_sync"]

T = TypeVar("T")

INTERVAL = 0.005


async def eventually(
    predicate: Callable[[], T | Awaitable[T]],
    *,
    within: float = 5.0,
    what: str = "the condition",
    ignoring: tuple[type[BaseException], ...] = (),
    interval: float = INTERVAL,
) -> T:
    """Await ``predicate()`` (sync or async) until truthy; return it. See the module docstring."""
    deadline = time.monotonic() + within
    last_error: BaseException | None = None
    while True:
        try:
            value = predicate()
            if inspect.isawaitable(value):
                value = await value
        except ignoring as exc:
            last_error = exc
        else:
            if value:
                return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(_timed_out(within, what, last_error))
        await asyncio.sleep(interval)


def eventually_sync(
    predicate: Callable[[], T],
    *,
    within: float = 5.0,
    what: str = "the condition",
    ignoring: tuple[type[BaseException], ...] = (),
    interval: float = INTERVAL,
) -> T:
    """The blocking twin of :func:`eventually`, for code that runs outside an event loop."""
    deadline = time.monotonic() + within
    last_error: BaseException | None = None
    while True:
        try:
            value = predicate()
        except ignoring as exc:
            last_error = exc
        else:
            if value:
                return value
        if time.monotonic() > deadline:
            raise AssertionError(_timed_out(within, what, last_error))
        time.sleep(interval)


def _timed_out(within: float, what: str, last_error: BaseException | None) -> str:
    message = f"timed out after {within}s waiting for {what}"
    return f"{message}; last error: {last_error!r}" if last_error is not None else message
