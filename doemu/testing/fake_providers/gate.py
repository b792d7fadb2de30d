"""Holding a generation (or a counter's answer) until the test says go, from any thread.

The servers run in their own thread and event loop while a test runs in another (plain or
asyncio), so the gate is the one place where the two meet: the server side ``await``s
:meth:`Gate.hold`, the test side calls :meth:`Gate.release` and :meth:`Gate.wait_held`.
A release with nothing held is kept as one permit for the next hold, so a test that releases a
little early does not hang.

:func:`poll` and :func:`apoll` are the fakes' only way to wait: a predicate polled against a
real-time deadline, raising :class:`TimeoutError` that names what was awaited.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["POLL_INTERVAL", "Gate", "apoll", "poll"]

T = TypeVar("T")

POLL_INTERVAL = 0.005
"""Seconds between two polls."""


def _deadline(
    predicate: Callable[[], object], timeout: float, what: str | None
) -> Callable[[], None]:
    """A check that raises :class:`TimeoutError`, naming what was awaited, once time is up."""
    end = time.monotonic() + timeout

    def check() -> None:
        if time.monotonic() > end:
            name = what or getattr(predicate, "__qualname__", None) or repr(predicate)
            raise TimeoutError(f"timed out after {timeout}s waiting for {name}")

    return check


def poll(predicate: Callable[[], T | None], timeout: float, what: str | None = None) -> T:
    """Call ``predicate`` until it returns something truthy and return that, or time out."""
    check = _deadline(predicate, timeout, what)
    while not (value := predicate()):
        check()
        time.sleep(POLL_INTERVAL)
    return value


# The deadline is a parameter, not asyncio.timeout: the state polled is another thread's.
async def apoll(
    predicate: Callable[[], T | None],
    timeout: float,  # noqa: ASYNC109
    what: str | None = None,
) -> T:
    """:func:`poll` for async tests: sleeps with ``asyncio.sleep`` so the loop keeps running."""
    check = _deadline(predicate, timeout, what)
    while not (value := predicate()):
        check()
        await asyncio.sleep(POLL_INTERVAL)
    return value


class Gate:
    """Pauses coroutines on a server's loop until a release from any thread."""

    def __init__(self, what: str = "a held generation") -> None:
        self._what = what
        self._lock = threading.Lock()
        self._held: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._permits = 0

    @property
    def held(self) -> int:
        """How many are paused right now."""
        with self._lock:
            return len(self._held)

    async def hold(self) -> None:
        """Pause until :meth:`release` (or go on at once, using up a permit)."""
        event = asyncio.Event()
        entry = (asyncio.get_running_loop(), event)
        with self._lock:
            if self._permits:
                self._permits -= 1
                return
            self._held.append(entry)
        try:
            await event.wait()
        finally:
            with self._lock:
                if entry in self._held:
                    self._held.remove(entry)

    def release(self) -> int:
        """Let every paused one go on; with none paused, keep a permit. Returns how many went."""
        with self._lock:
            held, self._held = self._held, []
            if not held:
                self._permits += 1
        for loop, event in held:
            if not loop.is_closed():
                loop.call_soon_threadsafe(event.set)
        return len(held)

    def clear(self) -> None:
        """Forget permits and let whatever is paused go on."""
        self.release()
        with self._lock:
            self._permits = 0

    def wait_held(self, timeout: float = 10.0) -> None:
        """Block until something is paused here."""
        poll(lambda: self.held > 0, timeout, self._what)

    async def await_held(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        """:meth:`wait_held` without blocking the event loop."""
        await apoll(lambda: self.held > 0, timeout, self._what)
