"""The agent's MCP client: servers added, kept in SQLite, restored after an eviction.

The registry is the SDK's table ``cf_agents_mcp_servers`` (``id, name, server_url, client_id,
auth_url, callback_url, server_options``), so what survives a restart is exactly what the SDK
keeps: which servers, and how to reach them (``server_options`` holds the transport's headers).
Sessions are not kept: every activation connects again (``initialize``, ``tools/list``), in the
background, as the SDK's restore does; :meth:`McpClientManager.wait_for_connections` lets a turn
wait for them (bounded), and a connection's state is in every ``cf_agent_mcp_servers`` frame.

A server that answers ``401`` when the agent has a callback URL for it (added from a request, or
with ``callback_host``) goes through OAuth (:mod:`agents.mcp.oauth`): ``add_server`` answers
``{"id", "state": "authenticating", "authUrl"}``, the browser comes back to
``/agents/<class>/<name>/callback`` (its URL, recognition and answer are
:mod:`agents.mcp.callback`; :meth:`McpClientManager.answer_callback` is what the agent's
``fetch`` calls), :meth:`McpClientManager.handle_callback` trades the code for tokens, and the
server connects with the stored token — again after every eviction.

Every change of a server's state is broadcast as ``cf_agent_mcp_servers`` to protocol-enabled
connections, with the SDK's content: ``servers`` (id → name, url, state, error, instructions,
capabilities) and ``tools`` (each with its ``serverId``); prompts and resources are listed empty.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..core.host import Core
from ..errors import McpError
from .callback import OAuthCallbackConfig, OAuthCallbackResult, at_callback_url, callback_server_id
from .connection import McpConnection, tool_output
from .oauth import OAUTH_SCHEMA, McpOAuth, parse_state

__all__ = ["SCHEMA", "McpClientManager", "McpServerRow", "OAuthCallbackResult", "ai_tool_name"]

_log = logging.getLogger("agents.mcp")

SCHEMA: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS cf_agents_mcp_servers (
  id TEXT PRIMARY KEY NOT NULL,
  name TEXT NOT NULL,
  server_url TEXT NOT NULL,
  callback_url TEXT NOT NULL,
  client_id TEXT,
  auth_url TEXT,
  server_options TEXT
)""",
    OAUTH_SCHEMA,
)

McpServerRow = dict[str, Any]


def ai_tool_name(server_id: str, tool: str) -> str:
    """The SDK's model-facing name of an MCP tool: ``tool_<server id without '-'>_<tool>``."""
    return f"tool_{server_id.replace('-', '')}_{tool}"


class McpClientManager:
    """``add_server``, ``remove_server``, ``state``, ``call_tool`` (see the module docstring)."""

    def __init__(self, core: Core, broadcast: Callable[[dict[str, Any]], None]) -> None:
        self._core = core
        self._broadcast = broadcast
        self.connections: dict[str, McpConnection] = {}
        self._connecting: dict[str, asyncio.Future[None]] = {}
        self._callback_config = OAuthCallbackConfig()

    # -- the registry -----------------------------------------------------------------------------
    def rows(self) -> list[McpServerRow]:
        return self._core.sql("SELECT * FROM cf_agents_mcp_servers ORDER BY rowid")

    def restore(self) -> None:
        """Reconnect every registered server in the background (each activation)."""
        for row in self.rows():
            if row["id"] not in self.connections:
                options = json.loads(row["server_options"] or "{}")
                headers = (options.get("transport") or {}).get("headers") or {}
                self._open(row["id"], row["name"], row["server_url"], headers,
                           row["callback_url"])  # fmt: skip

    async def add_server(
        self,
        name: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        server_id: str | None = None,
        callback_url: str = "",
    ) -> dict[str, Any]:
        """Register and connect a server; ``{"id", "state"}`` once it is ready or failed, with
        ``authUrl`` when it is ``authenticating`` (OAuth: visit it; see the module docstring).

        Registered before connecting, so a kill mid-connect still restores it. The same name
        and URL again answer the existing server (``addMcpServer`` is idempotent that way)."""
        if not isinstance(name, str) or not name.strip():
            raise McpError(f"an MCP server needs a name, got {name!r}")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise McpError(f"an MCP server's url must be http(s)://…, got {url!r}")
        for row in self.rows():
            if row["name"] == name and row["server_url"] == url and server_id in (None, row["id"]):
                await self._wait(row["id"])
                return self._answer(row["id"])
            if server_id is not None and row["id"] == server_id:
                raise McpError(
                    f"MCP server id {server_id!r} is taken by {row['name']!r} ({row['server_url']})"
                )
        new_id = server_id or secrets.token_hex(4)
        options = {"transport": {"headers": dict(headers or {}), "type": "streamable-http"}}
        self._core.exec(
            "INSERT INTO cf_agents_mcp_servers (id, name, server_url, callback_url, client_id, "
            "auth_url, server_options) VALUES (?, ?, ?, ?, NULL, NULL, ?)",
            new_id,
            name,
            url,
            callback_url,
            json.dumps(options),
        )
        self._open(new_id, name, url, dict(headers or {}), callback_url)
        await self._wait(new_id)
        return self._answer(new_id)

    def _answer(self, server_id: str) -> dict[str, Any]:
        connection = self.connections[server_id]
        answer: dict[str, Any] = {"id": server_id, "state": connection.state}
        if connection.state == "authenticating":
            answer["authUrl"] = connection.auth_url
        return answer

    async def remove_server(self, server_id: str) -> bool:
        """Forget a server (its row, its session); False when there was none."""
        existed = bool(self._core.sql("SELECT id FROM cf_agents_mcp_servers WHERE id = ?",
                                      server_id))  # fmt: skip
        self._core.exec("DELETE FROM cf_agents_mcp_servers WHERE id = ?", server_id)
        self._core.exec("DELETE FROM cf_agents_mcp_oauth WHERE server_id = ?", server_id)
        connection = self.connections.pop(server_id, None)
        self._connecting.pop(server_id, None)
        if connection is not None:
            await connection.close()
        if existed or connection is not None:
            self._changed()
        return existed

    # -- connections ------------------------------------------------------------------------------
    def _open(
        self,
        server_id: str,
        name: str,
        url: str,
        headers: Mapping[str, str],
        callback_url: str = "",
    ) -> None:
        oauth = None
        if callback_url and not any(key.lower() == "authorization" for key in headers):
            oauth = McpOAuth(self._sql, server_id, url, callback_url, now=self._core.now)
        connection = McpConnection(server_id, name, url, headers, oauth)
        self.connections[server_id] = connection

        async def connect() -> None:
            await connection.connect()
            if self.connections.get(server_id) is connection:
                self._core.exec("UPDATE cf_agents_mcp_servers SET auth_url = ? WHERE id = ?",
                                connection.auth_url, server_id)  # fmt: skip
                self._changed()

        self._connecting[server_id] = self._core_wait_until(connect())
        self._changed()

    def _sql(self, query: str, *params: Any) -> list[dict[str, Any]]:
        return self._core.sql(query, *params)

    def _core_wait_until(self, awaitable: Any) -> asyncio.Future[None]:
        task: asyncio.Future[None] = asyncio.ensure_future(awaitable)
        self._core.wait_until(task)
        return task

    async def _wait(self, server_id: str) -> None:
        task = self._connecting.get(server_id)
        if task is not None:
            await asyncio.shield(task)

    async def wait_for_connections(self, within: float | None = 10.0) -> None:
        """Wait (at most ``within`` seconds) until no server is still connecting."""
        pending = [t for t in self._connecting.values() if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=within)

    async def reconnect(self, server_id: str) -> None:
        """Connect a failed (or any) server again."""
        connection = self.connections.get(server_id)
        if connection is None:
            raise McpError(f"no MCP server with id {server_id!r}")
        callback_url = connection.oauth.callback_url if connection.oauth is not None else ""
        self._open(server_id, connection.name, connection.url, connection.transport.headers,
                   callback_url)  # fmt: skip
        await self._wait(server_id)

    async def call_tool(self, server_id: str, name: str, arguments: Mapping[str, Any]) -> Any:
        """Call a tool of a server; what the model reads (:func:`tool_output`)."""
        connection = self.connections.get(server_id)
        if connection is None:
            raise McpError(f"no MCP server with id {server_id!r}")
        if connection.state != "ready":
            await self._wait(server_id)
        if connection.state != "ready":
            raise McpError(
                f"MCP server {connection.name!r} is {connection.state}: {connection.error}"
            )
        return tool_output(await connection.call_tool(name, arguments))

    # -- the OAuth callback (the HTTP side is agents.mcp.callback) -------------------------------
    def configure_oauth_callback(
        self,
        *,
        success_redirect: str | None = None,
        error_redirect: str | None = None,
        custom_handler: Callable[[OAuthCallbackResult], Any] | None = None,
    ) -> None:
        """What the callback answers the browser (the SDK's ``configureOAuthCallback``):
        ``custom_handler(result)``'s response, else a redirect to ``success_redirect`` /
        ``error_redirect`` (``?error=…``), else a redirect to the origin. Per activation: call it
        in ``on_start``."""
        self._callback_config = OAuthCallbackConfig(
            success_redirect=success_redirect,
            error_redirect=error_redirect,
            custom_handler=custom_handler,
        )

    async def answer_callback(
        self, request: Any, otherwise: Callable[[Any], Awaitable[Any]]
    ) -> Any:
        """The browser's answer when ``request`` is a server's OAuth callback (the code is traded
        for tokens first); any other request is the agent's own: ``otherwise(request)``."""
        if not self.is_callback_request(request):
            return await otherwise(request)
        return self.callback_response(await self.handle_callback(request), request)

    def is_callback_request(self, request: Any) -> bool:
        """A ``GET`` to a registered server's callback URL whose ``state`` names that server."""
        server_id = callback_server_id(request)
        if server_id is None:
            return False
        rows = self._sql("SELECT callback_url FROM cf_agents_mcp_servers WHERE id = ?", server_id)
        return any(at_callback_url(request, row["callback_url"]) for row in rows)

    async def handle_callback(self, request: Any) -> OAuthCallbackResult:
        """Exchange the callback's code for tokens and connect again (in the background)."""
        query = parse_qs(urlsplit(str(request.url)).query)
        state = (query.get("state") or [""])[0]
        parsed = parse_state(state)
        server_id = parsed[1] if parsed else ""
        connection = self.connections.get(server_id)
        if connection is None or connection.oauth is None:
            return {"serverId": server_id, "authSuccess": False,
                    "authError": f'No server found with id "{server_id}"'}  # fmt: skip
        oauth = connection.oauth
        denied = (query.get("error_description") or query.get("error") or [""])[0]
        code = (query.get("code") or [""])[0]
        problem = oauth.check_state(state)
        if problem is None and (denied or not code):
            problem = denied or "Authorization code not provided"
            oauth.complete_failed()
            connection.state, connection.error, connection.auth_url = "failed", problem, None
            self._changed()
        if problem is not None:
            _log.warning("MCP server %s: OAuth callback refused: %s", connection.name, problem)
            return {"serverId": server_id, "authSuccess": False, "authError": problem}
        try:
            await oauth.complete(code, state)
        except McpError as exc:
            connection.state, connection.error, connection.auth_url = "failed", str(exc), None
            self._changed()
            return {"serverId": server_id, "authSuccess": False, "authError": str(exc)}
        self._core.exec("UPDATE cf_agents_mcp_servers SET auth_url = NULL WHERE id = ?", server_id)
        self._open(server_id, connection.name, connection.url, connection.transport.headers,
                   oauth.callback_url)  # fmt: skip
        return {"serverId": server_id, "authSuccess": True}

    def callback_response(self, result: OAuthCallbackResult, request: Any) -> Any:
        """The browser's answer (see :meth:`configure_oauth_callback`)."""
        return self._callback_config.respond(result, request)

    # -- the frame ---------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The SDK's ``MCPServersState``: what ``get_mcp_servers()`` and the frame carry."""
        servers: dict[str, Any] = {}
        tools: list[dict[str, Any]] = []
        for row in self.rows():
            connection = self.connections.get(row["id"])
            if connection is None:
                servers[row["id"]] = {"name": row["name"], "server_url": row["server_url"],
                                      "auth_url": row["auth_url"], "state": "connecting",
                                      "error": None, "instructions": None,
                                      "capabilities": None}  # fmt: skip
                continue
            servers[row["id"]] = connection.describe()
            if connection.state == "ready":
                tools += [{**tool, "serverId": row["id"]} for tool in connection.tools]
        return {"prompts": [], "resources": [], "servers": servers, "tools": tools}

    def _changed(self) -> None:
        try:
            self._broadcast(self.state())
        except Exception:  # a broadcast must never fail the change itself
            _log.exception("broadcasting cf_agent_mcp_servers failed")

    async def close(self) -> None:
        """Close every session (``destroy()``)."""
        for connection in list(self.connections.values()):
            await connection.close()
        self.connections.clear()
