"""``ctx``: the ``DurableObjectState`` each object receives as its constructor's first argument.

It is a thin, per-activation view onto the object's host. A new ``ctx`` is built for every
activation, so code holding a ``ctx`` from before an eviction or reset cannot reach the new
instance's storage by accident. It has Cloudflare's names only: what the runtime needs of an
object goes through the host, never through ``ctx``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, NoReturn, Protocol

from ..compat.boundary import accept_array, accept_promise, js_array_result
from ..compat.websocket import WebSocket
from ..errors import WebSocketError, not_emulated
from ..ids import DurableObjectId
from ..sockets.registry import NOT_A_WEBSOCKET, SocketRegistry
from ..storage import DurableObjectStorage

__all__ = ["DurableObjectState"]

_ACCEPT = "'acceptWebSocket' on 'DurableObjectState'"

#: Cloudflare's ``DurableObjectState`` members doemu does not emulate, and what they are.
NOT_EMULATED = {
    "props": "props handed to the object by its caller",
    "exports": "loopback bindings to this Worker's own exports",
    "container": "the Container attached to this object",
    "facets": "facets of this object",
}


class _Host(Protocol):
    """What ``ctx`` forwards to (the object host)."""

    @property
    def id(self) -> DurableObjectId: ...

    @property
    def sockets(self) -> SocketRegistry: ...

    def wait_until(self, awaitable: Awaitable[Any]) -> None: ...

    def block_concurrency_while(self, fn: Callable[[], Any]) -> Awaitable[Any]: ...

    def abort(self, reason: str | None) -> NoReturn: ...


class DurableObjectState:
    """Cloudflare's ``DurableObjectState`` (camelCase, exactly as on Cloudflare)."""

    __slots__ = ("_host", "id", "storage")

    id: DurableObjectId
    storage: DurableObjectStorage

    def __init__(self, host: _Host, storage: DurableObjectStorage) -> None:
        self._host = host
        self.id = host.id
        self.storage = storage

    def __getattr__(self, name: str) -> Any:
        if name in NOT_EMULATED:
            raise not_emulated("ctx", name, NOT_EMULATED[name])
        raise AttributeError(f"'DurableObjectState' object has no attribute {name!r}")

    # -- concurrency and lifetime ---------------------------------------------------------------
    def waitUntil(self, awaitable: Awaitable[Any]) -> None:
        """Keep the object alive until ``awaitable`` settles (errors are logged, not raised)."""
        promise = accept_promise(awaitable, "waitUntil")
        if promise is not None:
            self._host.wait_until(promise)

    def blockConcurrencyWhile(self, fn: Callable[[], Any]) -> Awaitable[Any]:
        """Run ``fn`` while no other event is delivered to this object (30 s limit, then reset)."""
        return self._host.block_concurrency_while(fn)

    def abort(self, reason: str | None = None) -> NoReturn:
        """Reset the object: uncommitted writes are dropped and in-flight callers get ``reason``.

        Raises :class:`~doemu.errors.DurableObjectAbort` (a ``BaseException``), as Cloudflare's
        Python runtime does: ``except Exception:`` cannot catch it, so the code after the call
        never runs."""
        self._host.abort(reason)

    # -- hibernatable WebSockets ----------------------------------------------------------------
    def acceptWebSocket(self, ws: Any, tags: Iterable[str] | None = None) -> None:
        """Make ``ws`` hibernatable; ``tags`` must be a JavaScript Array (``to_js([...])``) on
        Cloudflare, where a Python list is refused."""
        if not isinstance(ws, WebSocket):  # JavaScript checks the parameters in order
            raise WebSocketError(NOT_A_WEBSOCKET)
        self._host.sockets.accept(ws, accept_array(tags, _ACCEPT, 2))

    def getWebSockets(self, tag: str | None = None) -> Any:
        """The accepted sockets (with ``tag``): a JavaScript Array, iterable and sized."""
        return js_array_result(self._host.sockets.get(tag))

    def getTags(self, ws: Any) -> Any:
        return js_array_result(self._host.sockets.tags_of(ws))

    def setWebSocketAutoResponse(self, pair: Any = None) -> None:
        self._host.sockets.set_auto_response(pair)

    def getWebSocketAutoResponse(self) -> Any:
        return self._host.sockets.auto_response

    def getWebSocketAutoResponseTimestamp(self, ws: Any) -> float | None:
        return self._host.sockets.auto_response_timestamp(ws)

    def setHibernatableWebSocketEventTimeout(self, ms: int | None = None) -> None:
        self._host.sockets.event_timeout_ms = ms

    def getHibernatableWebSocketEventTimeout(self) -> int | None:
        return self._host.sockets.event_timeout_ms
