"""Output held behind the output gate, delivered in order once what it waits for is durable.

A WebSocket frame or a stream chunk made by an object may not leave before the storage writes
made before it are durable (at power-loss durability: fsynced; inside a ``transaction()``: its
commit). ``send()`` and ``write()`` do not wait, as on Cloudflare, so the frame or chunk is kept
here with the future it waits for (the output gate's *barrier*) and delivered when that future
settles; output that follows it waits behind it, whatever its own barrier, so order is kept.
With nothing held and no barrier, delivery is immediate: the common case costs one check.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable

__all__ = ["HeldOutput"]

_log = logging.getLogger("doemu.compat")


class HeldOutput:
    """One channel's output (a socket's frames, a stream's chunks) behind the output gate.

    ``on_failed(error)`` is told once when a barrier fails (the commit or its fsync failed, so
    the object is being reset): the output held then, and any sent later, is dropped.
    """

    __slots__ = ("_failed", "_items", "_on_failed")

    def __init__(self, on_failed: Callable[[BaseException], None] | None = None) -> None:
        self._items: deque[tuple[asyncio.Future[None] | None, Callable[[], None]]] = deque()
        self._on_failed = on_failed
        self._failed: BaseException | None = None

    @property
    def holding(self) -> bool:
        """Whether some output still waits."""
        return bool(self._items)

    def send(self, barrier: asyncio.Future[None] | None, deliver: Callable[[], None]) -> None:
        """Run ``deliver()`` now, or once ``barrier`` and everything held before it settle."""
        if self._failed is not None:
            return
        if barrier is None and not self._items:
            deliver()
            return
        self._items.append((barrier, deliver))
        if len(self._items) == 1:
            self._pump()

    def _pump(self, _done: object = None) -> None:
        items = self._items
        while items:
            barrier, deliver = items[0]
            if barrier is not None:
                if not barrier.done():
                    barrier.add_done_callback(self._pump)
                    return
                error = asyncio.CancelledError() if barrier.cancelled() else barrier.exception()
                if error is not None:
                    self._fail(error)
                    return
            items.popleft()
            try:
                deliver()
            except Exception:
                _log.exception("delivering held output failed")

    def _fail(self, error: BaseException) -> None:
        self._failed = error
        self._items.clear()
        if self._on_failed is not None:
            self._on_failed(error)
