"""The agent's MCP client: servers added, kept in SQLite, restored after an eviction.

The registry is the SDK's table ``cf_agents_mcp_servers`` (``id, name, server_url, client_id,
auth_url, callback_url, server_options``), so what survives a restart is exactly what the SDK
keeps: which servers, and how to reach them (``server_options`` holds the transport's headers).
Sessions are not kept: every activation connects again (``initialize``, ``tools/list``), in the
background, as the SDK's restore does; :meth:`McpClientManager.wait_for_connections` lets a turn
wait for them (bounded), and a connection's state is in every ``cf_agent_mcp_servers`` frame.

Every change of a server's state is broadcast as ``cf_agent_mcp_servers`` to protocol-enabled
connections, with the SDK's content: ``servers`` (id → name, url, state, error, instructions,
capabilities) and ``tools`` (each with its ``serverId``); prompts and resources are listed empty.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from ..core.host import Core
from ..errors import McpError
from .connection import McpConnection, tool_output

__all__ = ["SCHEMA", "McpClientManager", "McpServerRow", "ai_tool_name"]

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

    # -- the registry -----------------------------------------------------------------------------
    def rows(self) -> list[McpServerRow]:
        return self._core.sql("SELECT * FROM cf_agents_mcp_servers ORDER BY rowid")

    def restore(self) -> None:
        """Reconnect every registered server in the background (each activation)."""
        for row in self.rows():
            if row["id"] not in self.connections:
                options = json.loads(row["server_options"] or "{}")
                headers = (options.get("transport") or {}).get("headers") or {}
                self._open(row["id"], row["name"], row["server_url"], headers)

    async def add_server(
        self,
        name: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        server_id: str | None = None,
        callback_url: str = "",
    ) -> dict[str, Any]:
        """Register and connect a server; ``{"id", "state"}`` once it is ready or failed.

        Registered before connecting, so a kill mid-connect still restores it. The same name
        and URL again answer the existing server (``addMcpServer`` is idempotent that way)."""
        if not isinstance(name, str) or not name.strip():
            raise McpError(f"an MCP server needs a name, got {name!r}")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise McpError(f"an MCP server's url must be http(s)://…, got {url!r}")
        for row in self.rows():
            if row["name"] == name and row["server_url"] == url and server_id in (None, row["id"]):
                await self._wait(row["id"])
                return {"id": row["id"], "state": self.connections[row["id"]].state}
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
        self._open(new_id, name, url, dict(headers or {}))
        await self._wait(new_id)
        return {"id": new_id, "state": self.connections[new_id].state}

    async def remove_server(self, server_id: str) -> bool:
        """Forget a server (its row, its session); False when there was none."""
        existed = bool(self._core.sql("SELECT id FROM cf_agents_mcp_servers WHERE id = ?",
                                      server_id))  # fmt: skip
        self._core.exec("DELETE FROM cf_agents_mcp_servers WHERE id = ?", server_id)
        connection = self.connections.pop(server_id, None)
        self._connecting.pop(server_id, None)
        if connection is not None:
            await connection.close()
        if existed or connection is not None:
            self._changed()
        return existed

    # -- connections ------------------------------------------------------------------------------
    def _open(self, server_id: str, name: str, url: str, headers: Mapping[str, str]) -> None:
        connection = McpConnection(server_id, name, url, headers)
        self.connections[server_id] = connection

        async def connect() -> None:
            await connection.connect()
            if self.connections.get(server_id) is connection:
                self._changed()

        self._connecting[server_id] = self._core_wait_until(connect())
        self._changed()

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
        self._open(server_id, connection.name, connection.url, connection.transport.headers)
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
