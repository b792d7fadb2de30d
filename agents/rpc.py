"""WebSocket RPC: ``@callable()`` methods that clients invoke with ``rpc`` frames.

A client (``AgentClient.call(method, args)``) sends ``{"type": "rpc", "id", "method", "args"}``.
Only methods marked ``@callable()`` answer; anything else — a missing name, an attribute that is
not a method, an unmarked method — gets an error frame naming the method, with the SDK's texts
(``Method <name> does not exist`` / ``Method <name> is not callable``). Answers are
``{"type": "rpc", "id", "success": true, "result", "done": true}`` or ``{"type": "rpc", "id",
"success": false, "error"}``.

``@callable(streaming=True)`` methods receive a :class:`StreamingResponse` before their
arguments (the SDK's calling convention): ``stream.send(chunk)`` sends ``done: false`` frames,
``stream.end(final)`` the closing ``done: true`` frame, and an exception that escapes the method
ends the stream with an error frame. Like the SDK, the framework does not end a stream the method
left open.

Methods may be ``async`` or plain functions. Results and chunks must be JSON-serializable; a
result that is not becomes an error frame rather than a silent drop.

The dispatcher (:class:`Rpc`) looks methods up on the agent's *class* (``getattr_static``), so
only functions defined there — never instance attributes — can be reached from the wire. The
WebSocket layer hands it ``rpc`` frames (``Agent`` wires :meth:`Rpc.handle` in as ``on_rpc``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .core.connections import Connection
from .core.host import AgentHost
from .core.protocol import dumps, rpc_chunk_frame, rpc_error_frame, rpc_result_frame
from .errors import RpcMethodError

__all__ = [
    "CallableMetadata",
    "Rpc",
    "StreamingResponse",
    "callable",
    "callable_methods",
    "is_callable",
]

_log = logging.getLogger("agents.rpc")

F = TypeVar("F", bound=Callable[..., Any])

_MARK = "__agents_callable__"
_MISSING: Any = object()


@dataclass(frozen=True)
class CallableMetadata:
    """What ``@callable(...)`` records about a method (the SDK's ``CallableMetadata``)."""

    description: str | None = None
    streaming: bool = False


def callable(*, description: str | None = None, streaming: bool = False) -> Callable[[F], F]:
    """Mark a method as invokable by clients over the WebSocket (``@callable()``)."""

    def mark(fn: F) -> F:
        setattr(fn, _MARK, CallableMetadata(description=description, streaming=streaming))
        return fn

    return mark


def is_callable(fn: Any) -> bool:
    """Whether ``fn`` was marked with ``@callable()``."""
    return isinstance(getattr(fn, _MARK, None), CallableMetadata)


def _metadata(fn: Any) -> CallableMetadata | None:
    meta = getattr(fn, _MARK, None)
    return meta if isinstance(meta, CallableMetadata) else None


class StreamingResponse:
    """The stream a ``@callable(streaming=True)`` method writes its chunks to."""

    __slots__ = ("_closed", "_connection", "_id")

    def __init__(self, connection: Connection, rpc_id: str) -> None:
        self._connection = connection
        self._id = rpc_id
        self._closed = False

    @property
    def is_closed(self) -> bool:
        """Whether ``end()`` or ``error()`` was called."""
        return self._closed

    def send(self, chunk: Any) -> bool:
        """Send an intermediate chunk (``done: false``); False once the stream is closed."""
        if self._closed:
            _log.warning("StreamingResponse.send() called after the stream was closed")
            return False
        return self._send(rpc_chunk_frame(self._id, chunk))

    def end(self, final: Any = _MISSING) -> bool:
        """Close the stream with a ``done: true`` frame (carrying ``final`` when given)."""
        if self._closed:
            return False
        self._closed = True
        return self._send(rpc_result_frame(self._id, final))

    def error(self, message: str) -> bool:
        """Close the stream with an error frame."""
        if self._closed:
            return False
        self._closed = True
        return self._connection._send_quiet(rpc_error_frame(self._id, message))

    def _send(self, frame: dict[str, Any]) -> bool:
        try:
            text = dumps(frame)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"streamed RPC values must be JSON-serializable: {exc}") from exc
        return self._connection._send_quiet(text)


def callable_methods(agent_class: type) -> dict[str, CallableMetadata]:
    """Every ``@callable()`` method of ``agent_class``, with its metadata (no instance needed)."""
    found: dict[str, CallableMetadata] = {}
    seen: set[str] = set()
    for klass in agent_class.__mro__:  # the nearest definition decides, as dispatch does
        for name, member in vars(klass).items():
            if name in seen:
                continue
            seen.add(name)
            meta = _metadata(member) if inspect.isfunction(member) else None
            if meta is not None:
                found[name] = meta
    return dict(sorted(found.items()))


class Rpc:
    """``rpc`` frames → ``@callable()`` methods of the agent that owns this dispatcher."""

    __slots__ = ("_host",)

    def __init__(self, host: AgentHost) -> None:
        self._host = host

    def _resolve(self, method: str) -> tuple[Callable[..., Any], CallableMetadata]:
        member = inspect.getattr_static(type(self._host), method, None)
        if not inspect.isfunction(member):
            raise RpcMethodError(f"Method {method} does not exist")
        meta = _metadata(member)
        if meta is None:
            raise RpcMethodError(f"Method {method} is not callable")
        bound: Callable[..., Any] = getattr(self._host, method)
        return bound, meta

    async def handle(self, connection: Connection, frame: dict[str, Any]) -> None:
        """Answer one ``rpc`` frame (already validated by ``is_rpc_request``)."""
        rpc_id: str = frame["id"]
        method: str = frame["method"]
        args: list[Any] = frame["args"]
        try:
            fn, meta = self._resolve(method)
            if meta.streaming:
                await self._run_streaming(connection, rpc_id, method, fn, args)
                return
            result = fn(*args)
            if inspect.isawaitable(result):
                result = await result
            try:
                text = dumps(rpc_result_frame(rpc_id, result))
            except (TypeError, ValueError) as exc:
                raise RpcMethodError(f"Result is not JSON-serializable: {exc}") from exc
            connection._send_quiet(text)
        except Exception as exc:
            if not isinstance(exc, RpcMethodError):
                _log.error("agent %s: RPC %s failed: %r", self._host.name, method, exc)
            connection._send_quiet(rpc_error_frame(rpc_id, _message(exc)))

    async def _run_streaming(
        self,
        connection: Connection,
        rpc_id: str,
        method: str,
        fn: Callable[..., Any],
        args: list[Any],
    ) -> None:
        stream = StreamingResponse(connection, rpc_id)
        try:
            result = fn(stream, *args)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            _log.error("agent %s: streaming RPC %s failed: %r", self._host.name, method, exc)
            if not stream.is_closed:
                stream.error(_message(exc))


def _message(exc: BaseException) -> str:
    """The error text a client sees (JS ``error.message``)."""
    text = str(exc)
    return text if text else type(exc).__name__
