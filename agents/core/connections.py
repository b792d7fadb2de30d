"""Connections: hibernatable WebSockets speaking the Agents SDK's protocol.

``Agent.fetch`` accepts a WebSocket upgrade as a *hibernatable* socket (``ctx.acceptWebSocket``),
so idle clients stay connected while the object leaves memory; every other request goes to
``on_request``. What a connection needs to survive hibernation lives in the socket's attachment
(as JSON text, which crosses the Python/JS boundary unchanged on Cloudflare): its id, tags and URI,
the per-connection ``state`` and the framework's flags (readonly, protocol disabled). A
:class:`Connection` is a stateless view onto the socket, rebuilt on every event.

On connect, as the SDK does (``index.ts`` ``onConnect`` and ``websockets/websockets.ts``):
``should_connection_be_readonly`` and ``should_send_protocol_messages`` are asked, then (unless
protocol messages are off) ``cf_agent_identity`` is sent — with ``stateFollows: true`` when a state
is set — followed by ``cf_agent_state`` and ``cf_agent_mcp_servers``; then ``on_connect`` runs.
The connection id is the client's ``_pk`` query parameter (PartySocket sends one, so a reconnect
keeps its id) or a fresh UUID, and it is always the connection's first tag.

Incoming text frames that are ``cf_agent_state`` updates are applied through the state path
(readonly connections get ``cf_agent_state_error``), ``rpc`` frames go to the RPC dispatcher, and
everything else reaches ``on_message``.
"""

from __future__ import annotations

import contextvars
import inspect
import json
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from js import WebSocketPair
from pyodide.ffi import to_js
from workers import Response

from ..core.protocol import (
    STATE_READONLY_ERROR,
    STATE_REJECTED_ERROR,
    camel_case_to_kebab_case,
    dumps,
    identity_frame,
    is_rpc_request,
    is_state_frame,
    mcp_servers_frame,
    parse_frame,
    state_error_frame,
    state_frame,
)
from ..errors import StateValidationError

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = [
    "MAX_CONNECTION_TAGS",
    "Connection",
    "ConnectionContext",
    "ConnectionsMixin",
    "current_connection",
]

_log = logging.getLogger("agents.connections")

#: The platform's limit, the connection id included.
MAX_CONNECTION_TAGS = 10
_MAX_TAG_LENGTH = 256
_OPEN = 1  # WebSocket.READY_STATE_OPEN
#: Close codes the runtime synthesizes; they cannot be sent back in a Close frame.
_RESERVED_CLOSE_CODES = frozenset({1005, 1006, 1015})

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
        """Send a text or binary frame (``dict``/``list`` are sent as JSON text)."""
        if isinstance(message, dict | list):
            message = dumps(message)
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
        try:
            self._ws.send(frame if isinstance(frame, str | bytes) else dumps(frame))
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


def _is_connection(ws: Any) -> bool:
    try:
        Connection(ws)._attachment()
    except Exception:
        return False
    return True


def _prepare_tags(connection_id: str, user_tags: Iterable[str]) -> list[str]:
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


def _connection_id_from(url: str) -> str:
    values = parse_qs(urlsplit(url).query).get("_pk")
    candidate = values[0] if values else ""
    if candidate and len(candidate) <= _MAX_TAG_LENGTH:
        return candidate
    return str(uuid.uuid4())


def _is_upgrade(request: Any) -> bool:
    upgrade = request.headers.get("Upgrade")
    return isinstance(upgrade, str) and upgrade.lower() == "websocket"


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


class ConnectionsMixin:
    """HTTP and WebSocket entry points of an agent; part of :class:`~agents.agent.Agent`."""

    _connecting_ids: set[str]

    def _init_connections(self) -> None:
        # Connections whose connect frames are being sent: a state seeded from ``initial_state``
        # while building them must not be broadcast to them a second time.
        self._connecting_ids = set()

    # -- hooks ----------------------------------------------------------------------------------
    async def on_request(self, request: Any) -> Any:
        """Handle a plain HTTP request to ``/agents/<class>/<name>``; the SDK answers 404."""
        return Response("Not implemented", status=404)

    async def on_connect(self, connection: Connection, ctx: ConnectionContext) -> None:
        """A client connected (its identity and state frames were already sent)."""

    async def on_message(self, connection: Connection, message: Any) -> None:
        """A frame that is not part of the protocol (not state, not ``rpc``)."""

    async def on_close(
        self, connection: Connection, code: int, reason: str, was_clean: bool
    ) -> None:
        """A client disconnected (``was_clean=False``: it vanished without a Close frame)."""

    def get_connection_tags(self, connection: Connection, ctx: ConnectionContext) -> list[str]:
        """Extra tags for a new connection (``get_connections(tag)`` selects by them)."""
        return []

    def should_connection_be_readonly(self, connection: Connection, ctx: ConnectionContext) -> bool:
        """Return True to refuse this connection's state updates (``cf_agent_state_error``)."""
        return False

    def should_send_protocol_messages(self, connection: Connection, ctx: ConnectionContext) -> bool:
        """Return False for clients that cannot take the JSON protocol frames (binary-only)."""
        return True

    # -- connection management ------------------------------------------------------------------
    def set_connection_readonly(self, connection: Connection, readonly: bool = True) -> None:
        connection._set_flag("readonly", readonly)

    def is_connection_readonly(self, connection: Connection) -> bool:
        return connection.readonly

    def is_connection_protocol_enabled(self, connection: Connection) -> bool:
        return connection.protocol_enabled

    def get_connections(self, tag: str | None = None) -> list[Connection]:
        """Open connections, optionally only those carrying ``tag``."""
        sockets = self._conn_agent().ctx.getWebSockets(tag) if tag else self._all_sockets()
        return [Connection(ws) for ws in sockets if ws.readyState == _OPEN and _is_connection(ws)]

    def get_connection(self, connection_id: str) -> Connection | None:
        """The open connection with this id, or ``None``."""
        for connection in self.get_connections(connection_id):
            if connection.id == connection_id:
                return connection
        return None

    def broadcast(self, message: Any, without: Iterable[str] | None = None) -> None:
        """Send ``message`` to every open connection except the ids in ``without``.

        Text and bytes go as they are; a ``dict`` or ``list`` is sent as JSON text.
        """
        if isinstance(message, dict | list):
            message = dumps(message)
        excluded = set(without or ())
        for connection in self.get_connections():
            if connection.id not in excluded:
                connection._send_quiet(message)

    def _all_sockets(self) -> list[Any]:
        return list(self._conn_agent().ctx.getWebSockets())

    def _broadcast_state(self, state: Any, source: Any) -> None:
        """Push a changed state to protocol-enabled connections except its source."""
        excluded = set(self._connecting_ids)
        if isinstance(source, Connection):
            excluded.add(source.id)
        frame = dumps(state_frame(state))
        for connection in self.get_connections():
            if connection.id in excluded or not connection.protocol_enabled:
                continue
            connection._send_quiet(frame)

    # -- Cloudflare entry points -----------------------------------------------------------------
    async def fetch(self, request: Any) -> Any:
        """A WebSocket upgrade becomes a connection; anything else goes to ``on_request``."""
        if _is_upgrade(request):
            return await self._accept_connection(request)
        agent = self._conn_agent()
        try:
            return await _maybe_await(self.on_request(request))
        except Exception as exc:
            await _report(agent, exc, request)
            raise

    async def _accept_connection(self, request: Any) -> Any:
        agent = self._conn_agent()
        client, server = WebSocketPair.new().object_values()
        connection_id = _connection_id_from(str(request.url))
        # Tags are fixed when the socket is accepted, so the hook sees a connection whose
        # attachment exists but is not yet registered with the runtime.
        server.serializeAttachment(
            dumps({"__pk": {"id": connection_id, "tags": [], "uri": str(request.url)}})
        )
        connection = Connection(server)
        ctx = ConnectionContext(request)
        tags = _prepare_tags(
            connection_id, await _maybe_await(self.get_connection_tags(connection, ctx))
        )
        agent.ctx.acceptWebSocket(server, to_js(tags))
        connection._store(
            {"__pk": {"id": connection_id, "tags": tags, "uri": str(request.url)}, "__user": None}
        )
        token = current_connection.set(connection)
        try:
            await self._connect(connection, ctx)
        finally:
            current_connection.reset(token)
        return Response(None, status=101, web_socket=client)

    async def _connect(self, connection: Connection, ctx: ConnectionContext) -> None:
        agent = self._conn_agent()
        if await _maybe_await(self.should_connection_be_readonly(connection, ctx)):
            self.set_connection_readonly(connection, True)
        if await _maybe_await(self.should_send_protocol_messages(connection, ctx)):
            self._connecting_ids.add(connection.id)
            try:
                has_state = agent.has_state  # may seed initial_state (and broadcast it)
            finally:
                self._connecting_ids.discard(connection.id)
            connection._send_quiet(
                identity_frame(
                    agent.name,
                    camel_case_to_kebab_case(type(self).__name__),
                    state_follows=has_state,
                )
            )
            if has_state:
                connection._send_quiet(state_frame(agent.state))
            connection._send_quiet(mcp_servers_frame())
        else:
            connection._set_flag("no_protocol", True)
        try:
            await _maybe_await(self.on_connect(connection, ctx))
        except Exception as exc:
            await _report(agent, exc, connection)

    async def webSocketMessage(self, ws: Any, message: Any) -> None:
        if not _is_connection(ws):
            return
        connection = Connection(ws)
        token = current_connection.set(connection)
        try:
            await self._dispatch_message(connection, message)
        finally:
            current_connection.reset(token)

    async def _dispatch_message(self, connection: Connection, message: Any) -> None:
        agent = self._conn_agent()
        frame = parse_frame(message)
        if is_state_frame(frame):
            self._apply_client_state(connection, frame["state"])
            return
        if is_rpc_request(frame):
            await agent._handle_rpc(connection, frame)
            return
        try:
            await _maybe_await(self.on_message(connection, message))
        except Exception as exc:
            await _report(agent, exc, connection)

    def _apply_client_state(self, connection: Connection, state: Any) -> None:
        agent = self._conn_agent()
        if connection.readonly:
            connection._send_quiet(state_error_frame(STATE_READONLY_ERROR))
            return
        try:
            agent._apply_state(state, connection)
        except (StateValidationError, TypeError) as exc:
            _log.error("agent %s: state update rejected: %s", agent.name, exc)
            connection._send_quiet(state_error_frame(STATE_REJECTED_ERROR))

    async def webSocketClose(self, ws: Any, code: int, reason: str, was_clean: bool) -> None:
        if not _is_connection(ws):
            return
        connection = Connection(ws)
        agent = self._conn_agent()
        token = current_connection.set(connection)
        try:
            await _maybe_await(self.on_close(connection, code, reason, was_clean))
        except Exception as exc:
            await _report(agent, exc, connection)
        finally:
            current_connection.reset(token)
            if code not in _RESERVED_CLOSE_CODES:
                try:  # complete the close handshake, as the Hibernation API expects
                    ws.close(code, reason)
                except Exception:
                    pass

    async def webSocketError(self, ws: Any, error: Any) -> None:
        if not _is_connection(ws):
            return
        connection = Connection(ws)
        await _report(self._conn_agent(), _as_exception(error), connection)

    def _conn_agent(self) -> Agent:
        return self  # type: ignore[return-value]


def _as_exception(error: Any) -> BaseException:
    return error if isinstance(error, BaseException) else RuntimeError(str(error))


async def _report(agent: Agent, error: BaseException, context: Any) -> None:
    """Route a failure of user code to ``on_error``; a failing ``on_error`` is only logged."""
    try:
        await _maybe_await(agent.on_error(error, context))
    except Exception:
        _log.exception("agent %s: on_error raised while reporting %r", agent.name, error)
