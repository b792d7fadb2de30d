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

from ..jsboundary import JsException

__all__ = ["EntryHost", "ExecutionContext", "find_entrypoints", "follow_redirects"]

#: The statuses ``fetch()`` follows, and how many times at most (the Fetch standard's 20).
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_MAX_REDIRECTS = 20


class EntryHost(Protocol):
    """What the runtime offers the code that calls entrypoints (the runtime implements it)."""

    @property
    def env(self) -> Any: ...

    def track(self, task: asyncio.Task[Any]) -> None: ...

    def entry_scope(
        self, wait_until: Callable[[Awaitable[Any]], None]
    ) -> AbstractContextManager[None]: ...

    def emit(self, type_: str, **fields: Any) -> None: ...

    @property
    def clock(self) -> Any: ...


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
    """The ``WorkerEntrypoint`` (and ``WorkflowEntrypoint``, which ``[[workflows]]`` name)
    subclasses ``module`` defines or imports, by name."""
    from ..compat import workers

    bases: tuple[type, ...] = (workers.WorkerEntrypoint, workers.WorkflowEntrypoint)
    return {
        name: value
        for name, value in vars(module).items()
        if isinstance(value, type) and issubclass(value, bases) and value not in bases
    }


async def follow_redirects(send: Callable[[Any], Awaitable[Any]], request: Any) -> Any:
    """``fetch()`` through a binding (a service, the assets): redirects are followed as
    workerd follows them for a Fetcher, unless the request says ``redirect="manual"`` (the 3xx
    is returned) or ``"error"`` (a ``TypeError``).

    A 303 (and a 301/302 answering a POST) continues as a GET without a body; a 307/308 repeats
    the method and a body given as bytes.
    """
    from urllib.parse import urljoin

    from ..compat import workers

    for _ in range(_MAX_REDIRECTS + 1):
        response = await send(request)
        location = response.headers.get("location")
        if response.status not in _REDIRECTS or location is None:
            return response
        mode = request.redirect
        if mode == "manual":
            return response
        if mode == "error":
            raise JsException("TypeError", f"Redirect to {location} refused (redirect: 'error')")
        method = str(request.method)
        body = request._body if isinstance(request._body, bytes) else None
        if (response.status == 303 and method != "HEAD") or (
            response.status in (301, 302) and method == "POST"
        ):
            method, body = "GET", None
        request = workers.Request(
            urljoin(request.url, location), method=method, headers=request._headers, body=body
        )
    raise JsException("TypeError", f"Too many redirects (more than {_MAX_REDIRECTS})")
