"""The agent's HTTP and WebSocket events: upgrade → connection, protocol frames, dispatch, close.

``Agent.fetch`` accepts a WebSocket upgrade as a *hibernatable* socket (``ctx.acceptWebSocket``),
so idle clients stay connected while the object leaves memory; every other request goes to
``on_request``. What a connection needs to survive hibernation is in its attachment
(:mod:`agents.core.connections`).

On connect, as the SDK does (``index.ts`` ``onConnect`` and ``websockets/websockets.ts``):
``should_connection_be_readonly`` and ``should_send_protocol_messages`` are asked, then (unless
protocol messages are off) ``cf_agent_identity`` is sent — with ``stateFollows: true`` when a state
is set — followed by ``cf_agent_state`` and ``cf_agent_mcp_servers``; then ``on_connect`` runs.
The connection id is the client's ``_pk`` query parameter (PartySocket sends one, so a reconnect
keeps its id) or a fresh UUID, and it is always the connection's first tag.

Incoming text frames that are ``cf_agent_state`` updates are applied through the state path
(readonly connections get ``cf_agent_state_error``), ``rpc`` frames go to the RPC dispatcher (the
``on_rpc`` the Agent wires in: :mod:`agents.rpc`), and everything else reaches ``on_message``.
Failures of the user's hooks go to ``on_error`` with the connection (or request) as context.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from js import WebSocketPair
from pyodide.ffi import to_js
from workers import Response

from ..errors import StateValidationError
from .connections import (
    Connection,
    ConnectionContext,
    ConnectionSet,
    connection_id_from,
    current_connection,
    is_connection,
    prepare_tags,
)
from .host import AgentHost, Core
from .protocol import (
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
from .state import StateStore

__all__ = ["ConnectionHooks", "RpcHandler", "WebSockets"]

_log = logging.getLogger("agents.connections")

#: Close codes the runtime synthesizes; they cannot be sent back in a Close frame.
_RESERVED_CLOSE_CODES = frozenset({1005, 1006, 1015})

#: Answers one ``rpc`` frame (already validated by ``is_rpc_request``) from this connection.
RpcHandler = Callable[[Connection, dict[str, Any]], Awaitable[None]]


class ConnectionHooks(AgentHost, Protocol):
    """The user hooks a connection's events run (each may be sync or ``async``)."""

    def on_request(self, request: Any) -> Any: ...

    def on_connect(self, connection: Connection, ctx: ConnectionContext) -> Any: ...

    def on_message(self, connection: Connection, message: Any) -> Any: ...

    def on_close(self, connection: Connection, code: int, reason: str, was_clean: bool) -> Any: ...

    def get_connection_tags(self, connection: Connection, ctx: ConnectionContext) -> Any: ...

    def should_connection_be_readonly(
        self, connection: Connection, ctx: ConnectionContext
    ) -> Any: ...

    def should_send_protocol_messages(
        self, connection: Connection, ctx: ConnectionContext
    ) -> Any: ...

    # The framework's own layers on top of the agent (the chat layer): private, no-ops by default.
    def _before_connect_frames(self, connection: Connection) -> Any:
        """Frames a connection gets before ``cf_agent_identity`` (a resumable stream's)."""

    def _handle_protocol_message(self, connection: Connection, message: Any) -> Any:
        """True when a frame was the framework's own (never reaches ``on_message``)."""

    def _handle_request(self, request: Any) -> Any:
        """A response for a request the framework answers itself, else None."""

    def _on_connection_closed(self, connection: Connection) -> Any:
        """A connection closed or failed (before ``on_close``)."""

    def _mcp_state(self) -> dict[str, Any] | None:
        """The ``cf_agent_mcp_servers`` content (the agent's MCP client); None: no servers."""


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


def _is_upgrade(request: Any) -> bool:
    upgrade = request.headers.get("Upgrade")
    return isinstance(upgrade, str) and upgrade.lower() == "websocket"


def _as_exception(error: Any) -> BaseException:
    return error if isinstance(error, BaseException) else RuntimeError(str(error))


class WebSockets:
    """The Cloudflare entry points ``fetch``, ``webSocketMessage``/``Close``/``Error``."""

    __slots__ = ("_connections", "_core", "_hooks", "_on_rpc", "_state")

    def __init__(
        self,
        core: Core,
        hooks: ConnectionHooks,
        connections: ConnectionSet,
        state: StateStore,
        on_rpc: RpcHandler,
    ) -> None:
        self._core = core
        self._hooks = hooks
        self._connections = connections
        self._state = state
        self._on_rpc = on_rpc

    async def fetch(self, request: Any) -> Any:
        """A WebSocket upgrade becomes a connection; anything else goes to ``on_request``."""
        if _is_upgrade(request):
            return await self._accept(request)
        try:
            own = await _maybe_await(self._hooks._handle_request(request))
            if own is not None:
                return own
            return await _maybe_await(self._hooks.on_request(request))
        except Exception as exc:
            await self._core.report(exc, request)
            raise

    async def _accept(self, request: Any) -> Any:
        hooks = self._hooks
        client, server = WebSocketPair.new().object_values()
        connection_id = connection_id_from(str(request.url))
        # Tags are fixed when the socket is accepted, so the hook sees a connection whose
        # attachment exists but is not yet registered with the runtime.
        server.serializeAttachment(
            dumps({"__pk": {"id": connection_id, "tags": [], "uri": str(request.url)}})
        )
        connection = Connection(server)
        ctx = ConnectionContext(request)
        tags = prepare_tags(
            connection_id, await _maybe_await(hooks.get_connection_tags(connection, ctx))
        )
        self._core.ctx.acceptWebSocket(server, to_js(tags))
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
        hooks = self._hooks
        if await _maybe_await(hooks.should_connection_be_readonly(connection, ctx)):
            connection._set_flag("readonly", True)
        if await _maybe_await(hooks.should_send_protocol_messages(connection, ctx)):
            await _maybe_await(hooks._before_connect_frames(connection))
            with self._connections.connecting(connection):
                has_state = self._state.has_state  # may seed initial_state (and broadcast it)
            connection._send_quiet(
                identity_frame(
                    hooks.name,
                    camel_case_to_kebab_case(type(hooks).__name__),
                    state_follows=has_state,
                )
            )
            if has_state:
                connection._send_quiet(state_frame(self._state.value))
            connection._send_quiet(mcp_servers_frame(hooks._mcp_state()))
        else:
            connection._set_flag("no_protocol", True)
        try:
            await _maybe_await(hooks.on_connect(connection, ctx))
        except Exception as exc:
            await self._core.report(exc, connection)

    async def message(self, ws: Any, message: Any) -> None:
        """``webSocketMessage``: state updates, RPC calls, or ``on_message``."""
        if not is_connection(ws):
            return
        connection = Connection(ws)
        token = current_connection.set(connection)
        try:
            await self._dispatch(connection, message)
        finally:
            current_connection.reset(token)

    async def _dispatch(self, connection: Connection, message: Any) -> None:
        frame = parse_frame(message)
        if is_state_frame(frame):
            self._apply_client_state(connection, frame["state"])
            return
        if is_rpc_request(frame):
            await self._on_rpc(connection, frame)
            return
        try:
            if await _maybe_await(self._hooks._handle_protocol_message(connection, message)):
                return
            await _maybe_await(self._hooks.on_message(connection, message))
        except Exception as exc:
            await self._core.report(exc, connection)

    def _apply_client_state(self, connection: Connection, state: Any) -> None:
        if connection.readonly:
            connection._send_quiet(state_error_frame(STATE_READONLY_ERROR))
            return
        try:
            self._state.apply(state, connection)
        except (StateValidationError, TypeError) as exc:
            _log.error("agent %s: state update rejected: %s", self._hooks.name, exc)
            connection._send_quiet(state_error_frame(STATE_REJECTED_ERROR))

    async def close(self, ws: Any, code: int, reason: str, was_clean: bool) -> None:
        """``webSocketClose``: run ``on_close``, then complete the close handshake."""
        if not is_connection(ws):
            return
        connection = Connection(ws)
        token = current_connection.set(connection)
        try:
            await _maybe_await(self._hooks._on_connection_closed(connection))
            await _maybe_await(self._hooks.on_close(connection, code, reason, was_clean))
        except Exception as exc:
            await self._core.report(exc, connection)
        finally:
            current_connection.reset(token)
            if code not in _RESERVED_CLOSE_CODES:
                try:  # complete the close handshake, as the Hibernation API expects
                    ws.close(code, reason)
                except Exception:
                    pass

    async def error(self, ws: Any, error: Any) -> None:
        """``webSocketError``: reported to ``on_error`` with the connection as context."""
        if not is_connection(ws):
            return
        connection = Connection(ws)
        try:
            await _maybe_await(self._hooks._on_connection_closed(connection))
        finally:
            await self._core.report(_as_exception(error), connection)
