"""``blockConcurrencyWhile``: its limits and texts, nesting, and what its awaiter sees.

The host runs each callback as a task that holds the object's input gate (see
:meth:`doemu.objects.host.ObjectHost.block_concurrency_while`); this module has the pieces that
are not the host's state: workerd's limits and error texts, the context variable that tells a
nested call it already holds the gate, and the awaitable that turns the reset of a timed-out or
failed callback into the reset's :class:`~doemu.errors.ObjectResetError`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from ..errors import ObjectResetError

__all__ = [
    "BLOCK_CONCURRENCY_NESTING_MESSAGE",
    "BLOCK_CONCURRENCY_TIMEOUT_MESSAGE",
    "BLOCK_CONCURRENCY_TIMEOUT_MS",
    "MAX_BLOCK_CONCURRENCY_NESTING",
    "ResetAware",
    "holding",
    "run_inline",
]

BLOCK_CONCURRENCY_TIMEOUT_MS = 30_000
BLOCK_CONCURRENCY_TIMEOUT_MESSAGE = (
    "A call to blockConcurrencyWhile() in a Durable Object waited for too long. "
    "The call was canceled and the Durable Object was reset."
)
#: How deep blockConcurrencyWhile() calls may nest inside each other (workerd's limit).
MAX_BLOCK_CONCURRENCY_NESTING = 64
BLOCK_CONCURRENCY_NESTING_MESSAGE = "blockConcurrencyWhile() calls are nested too deeply."

#: The host whose blockConcurrencyWhile callback the current task runs in, and the nesting depth
#: (a context variable, so tasks the callback starts inherit it).
holding: ContextVar[tuple[object, int] | None] = ContextVar("doemu_block_concurrency", default=None)


async def run_inline(fn: Callable[[], Any]) -> Any:
    """Run a nested callback (sync or async): the gate is held already."""
    result = fn()
    if inspect.isawaitable(result):
        result = await result
    return result


class ResetAware:
    """Awaitable for blockConcurrencyWhile: a reset surfaces as ObjectResetError, not cancel."""

    __slots__ = ("_last_reset", "_task")

    def __init__(
        self, task: asyncio.Task[Any], last_reset: Callable[[], ObjectResetError | None]
    ) -> None:
        self._task = task
        self._last_reset = last_reset

    def __await__(self) -> Any:
        try:
            return (yield from self._task.__await__())
        except asyncio.CancelledError:
            if self._task.cancelled() and not _self_cancelled():
                reset = self._last_reset() or ObjectResetError("Durable Object was reset.")
                raise type(reset)(reset.reason) from None
            raise


def _self_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
