"""Calling the Worker's own entrypoints from the runtime: a cron's ``scheduled()``, a service
binding's ``fetch`` and RPC methods.

An entrypoint class (``Default``, or a named ``WorkerEntrypoint`` subclass of the main module)
is instantiated per call with ``(ctx, env)``, as Cloudflare does per event. ``ctx`` is an
:class:`ExecutionContext` whose ``waitUntil`` work the runtime keeps (a manual clock's
``advance`` and the harness wait for it; closing the runtime cancels it), and while the call
runs, ``workers.waitUntil`` goes to the same place (:meth:`EntryHost.entry_scope`).
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol

__all__ = ["EntryHost", "ExecutionContext", "find_entrypoints"]


class EntryHost(Protocol):
    """What the runtime offers the code that calls entrypoints (the runtime implements it)."""

    @property
    def env(self) -> Any: ...

    def track(self, task: asyncio.Task[Any]) -> None: ...

    def entry_scope(
        self, wait_until: Callable[[Awaitable[Any]], None]
    ) -> AbstractContextManager[None]: ...

    def emit(self, type_: str, **fields: Any) -> None: ...


class ExecutionContext:
    """The ``ctx`` of an entrypoint the runtime calls: ``waitUntil``, ``passThroughOnException``
    and ``props`` (a service binding's, else an empty object)."""

    __slots__ = ("_track", "props")

    def __init__(
        self, track: Callable[[asyncio.Task[Any]], None], props: Mapping[str, Any] | None = None
    ) -> None:
        self._track = track
        self.props = dict(props or {})

    def waitUntil(self, awaitable: Awaitable[Any]) -> None:
        """Keep the work running after the handler returns (the runtime waits for it)."""
        self._track(asyncio.ensure_future(awaitable))

    def passThroughOnException(self) -> None:
        """There is no origin to pass through to locally; kept for API compatibility."""


def find_entrypoints(module: types.ModuleType) -> dict[str, type]:
    """The ``WorkerEntrypoint`` subclasses ``module`` defines or imports, by name."""
    from ..compat import workers

    base: type = workers.WorkerEntrypoint
    return {
        name: value
        for name, value in vars(module).items()
        if isinstance(value, type) and issubclass(value, base) and value is not base
    }
