"""Connections: the agent's clients, each a hibernatable WebSocket, and the set of open ones.

A :class:`Connection` is a stateless view onto a socket, rebuilt on every event: what must
survive hibernation lives in the socket's attachment (as JSON text, which crosses the Python/JS
boundary unchanged on Cloudflare) — the connection id, tags and URI, the per-connection
``state`` and the framework's flags (readonly, protocol disabled). :class:`ConnectionSet` is the
agent's view of all of them: lookup by id or tag, ``broadcast``, and the push of a changed state
to every protocol-enabled client.

How a socket becomes a connection, and how its frames are dispatched, is
:mod:`agents.core.websockets`.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pyodide.ffi import JsProxy, to_js

from .protocol import dumps, state_frame

__all__ = [
    "MAX_CONNECTION_TAGS",
    "Connection",
    "ConnectionContext",
    "ConnectionSet",
    "connection_id_from",
    "current_connection",
    "is_connection",
    "prepare_tags",
]

_log = logging.getLogger("agents.connections")

#: The platform's limit, the connection id included.
MAX_CONNECTION_TAGS = 10
_MAX_TAG_LENGTH = 256
_OPEN = 1  # WebSocket.READY_STATE_OPEN

#: The connection whose event is being handled (``set_state`` refuses readonly ones).
current_connection: contextvars.ContextVar[Connection | None] = contextvars.ContextVar(
    "agents_current_connection", default=None
)


@dataclass(frozen=True)
class ConnectionContext:
    """What ``on_connect`` (and the per-connection hooks) learn about the upgrade request."""

    request: Any


class Connection:
    """One client WebSocket of an agent; a view onto the hibernatable socket and its attachment.

    Equal connections have equal ids, so a ``Connection`` from one event compares equal to the
    one rebuilt for the next event.
    """

    __slots__ = ("_ws",)

    def __init__(self, ws: Any) -> None:
        self._ws = ws

    # -- attachment -----------------------------------------------------------------------------
    def _attachment(self) -> dict[str, Any]:
        raw = self._ws.deserializeAttachment()
        if isinstance(raw, str):
            try:
                value = json.loads(raw)
            except ValueError:
                value = None
            if isinstance(value, dict) and isinstance(value.get("__pk"), dict):
                return value
        raise LookupError("this WebSocket is not an agent connection (no connection attachment)")

    def _store(self, attachment: dict[str, Any]) -> None:
        self._ws.serializeAttachment(dumps(attachment))

    def _flag(self, name: str) -> bool:
        return bool(self._attachment().get("__cf", {}).get(name))

    def _set_flag(self, name: str, value: bool) -> None:
        attachment = self._attachment()
        flags = dict(attachment.get("__cf") or {})
        if value:
            flags[name] = True
        else:
            flags.pop(name, None)
        attachment["__cf"] = flags
        self._store(attachment)

    # -- public ---------------------------------------------------------------------------------
    @property
    def id(self) -> str:
        return str(self._attachment()["__pk"]["id"])

    @property
    def uri(self) -> str | None:
        uri = self._attachment()["__pk"].get("uri")
        return uri if isinstance(uri, str) else None

    @property
    def tags(self) -> list[str]:
        """The socket's tags; the connection id is always the first."""
        return list(self._attachment()["__pk"].get("tags") or [])

    @property
    def state(self) -> Any:
        """Per-connection state (``None`` until set); survives hibernation and eviction."""
        return self._attachment().get("__user")

    def set_state(self, state: Any) -> Any:
        """Replace the connection's state (or ``set_state(lambda prev: ...)``); returns it.

        Stored in the socket attachment as JSON (at most ~16 KiB with the framework's fields).
        """
        attachment = self._attachment()
        if callable(state):
            state = state(attachment.get("__user"))
        try:
            stored = json.loads(dumps(state))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"connection state must be JSON-serializable: {exc}") from exc
        attachment["__user"] = stored
        self._store(attachment)
        return stored

    @property
    def readonly(self) -> bool:
        """Whether this connection may not change the agent's state."""
        return self._flag("readonly")

    @property
    def protocol_enabled(self) -> bool:
        """Whether protocol frames (identity, state, MCP) are sent to this connection."""
        return not self._flag("no_protocol")

    @property
    def ready_state(self) -> int:
        return int(self._ws.readyState)

    @property
    def socket(self) -> Any:
        """The underlying Cloudflare ``WebSocket`` (for what this wrapper does not offer)."""
        return self._ws

    def send(self, message: str | bytes) -> None:
        """Send a text or binary frame (``dict``/``list`` are sent as JSON text; ``bytes`` as a
        binary frame, through ``to_js``: a Python ``bytes`` would go out as text on Cloudflare)."""
        if isinstance(message, dict | list):
            message = dumps(message)
        elif isinstance(message, bytes | bytearray | memoryview):
            message = to_js(bytes(message))
        self._ws.send(message)

    def close(self, code: int | None = None, reason: str | None = None) -> None:
        if code is None:
            self._ws.close()
        elif reason is None:
            self._ws.close(code)
        else:
            self._ws.close(code, reason)

    def _send_quiet(self, frame: Any) -> bool:
        """Send a protocol frame, tolerating a peer that went away meanwhile (as the SDK does)."""
        if isinstance(frame, bytes | bytearray | memoryview):
            frame = to_js(bytes(frame))  # binary: a Python bytes would go out as text
        elif not isinstance(frame, str) and not isinstance(frame, JsProxy):
            frame = dumps(frame)
        try:
            self._ws.send(frame)
            return True
        except Exception as exc:
            _log.debug("dropping a frame for a closed connection: %s", exc)
            return False

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Connection):
            return NotImplemented
        try:
            return self.id == other.id
        except LookupError:
            return self._ws is other._ws

    def __hash__(self) -> int:
        try:
            return hash(self.id)
        except LookupError:
            return id(self._ws)

    def __repr__(self) -> str:
        try:
            return f"Connection({self.id!r})"
        except LookupError:
            return "Connection(<not an agent connection>)"


def is_connection(ws: Any) -> bool:
    """Whether ``ws`` carries an agent connection's attachment (other sockets are ignored)."""
    try:
        Connection(ws)._attachment()
    except Exception:
        return False
    return True


def prepare_tags(connection_id: str, user_tags: Iterable[str]) -> list[str]:
    """The SDK's ``prepareTags``: the id first, no duplicates of it, at most 10, validated."""
    tags = [connection_id, *(t for t in user_tags if t != connection_id)]
    if len(tags) > MAX_CONNECTION_TAGS:
        raise ValueError("A connection can only have 10 tags, including the default id tag.")
    for tag in tags:
        if not isinstance(tag, str):
            raise TypeError(f"A connection tag must be a string. Received: {tag!r}")
        if tag == "":
            raise ValueError("A connection tag must not be an empty string.")
        if len(tag) > _MAX_TAG_LENGTH:
            raise ValueError("A connection tag must not exceed 256 characters")
    return tags


def connection_id_from(url: str) -> str:
    """The client's ``_pk`` query parameter (PartySocket keeps it across reconnects) or a UUID."""
    values = parse_qs(urlsplit(url).query).get("_pk")
    candidate = values[0] if values else ""
    if candidate and len(candidate) <= _MAX_TAG_LENGTH:
        return candidate
    return str(uuid.uuid4())


class ConnectionSet:
    """The agent's open connections: lookup, broadcast, and state pushes.

    Stateless apart from the ids of connections whose connect frames are being sent: a state
    seeded from ``initial_state`` while building those frames must not reach them twice.
    """

    __slots__ = ("_connecting_ids", "_ctx")

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self._connecting_ids: set[str] = set()

    def get_connections(self, tag: str | None = None) -> list[Connection]:
        """Open connections, optionally only those carrying ``tag``."""
        sockets = self._ctx.getWebSockets(tag) if tag else list(self._ctx.getWebSockets())
        return [Connection(ws) for ws in sockets if ws.readyState == _OPEN and is_connection(ws)]

    def get_connection(self, connection_id: str) -> Connection | None:
        """The open connection with this id, or ``None``."""
        for connection in self.get_connections(connection_id):
            if connection.id == connection_id:
                return connection
        return None

    def broadcast(self, message: Any, without: Iterable[str] | None = None) -> None:
        """Send ``message`` (``dict``/``list`` as JSON text) to all but the ids in ``without``."""
        if isinstance(message, dict | list):
            message = dumps(message)
        excluded = set(without or ())
        for connection in self.get_connections():
            if connection.id not in excluded:
                connection._send_quiet(message)

    def broadcast_state(self, state: Any, source: Any) -> None:
        """Push a changed state to protocol-enabled connections except its source."""
        excluded = set(self._connecting_ids)
        if isinstance(source, Connection):
            excluded.add(source.id)
        frame = dumps(state_frame(state))
        for connection in self.get_connections():
            if connection.id in excluded or not connection.protocol_enabled:
                continue
            connection._send_quiet(frame)

    @contextlib.contextmanager
    def connecting(self, connection: Connection) -> Iterator[None]:
        """While the block runs, state broadcasts skip ``connection`` (it gets its own frames)."""
        self._connecting_ids.add(connection.id)
        try:
            yield
        finally:
            self._connecting_ids.discard(connection.id)
