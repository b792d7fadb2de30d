"""MCP in agents: the agent's client (the SDK's ``this.mcp``): servers over streamable HTTP,
kept in SQLite and reconnected after an eviction (see :mod:`agents.mcp.manager`); and the
server's protocol (:mod:`agents.mcp.server`: :class:`McpServer`, JSON-RPC in
:mod:`agents.mcp.jsonrpc`) that :class:`agents.mcp_agent.McpAgent` serves per session.

``McpAgent``, ``McpHandler`` and ``route_mcp_request`` (the TypeScript SDK's ``agents/mcp``)
live in :mod:`agents.mcp_agent` and are exported by ``agents``: an ``Agent`` subclass sits above
this package, which the ``Agent`` itself imports, so re-exporting them here would be an import
cycle (even a lazy one).

``Agent.add_mcp_server`` / ``remove_mcp_server`` / ``get_mcp_servers`` are the façade;
``agents.think.mcp_tools(agent)`` hands the servers' tools to ``model_reply``; the OAuth
callback (its URL, recognising it, the browser's answer) is :mod:`agents.mcp.callback`. Layers,
top to bottom: ``manager`` → ``callback`` | ``connection`` → ``oauth`` → ``transport``.
"""

from __future__ import annotations

from .connection import McpConnection as McpConnection
from .connection import tool_output as tool_output
from .manager import McpClientManager as McpClientManager
from .manager import ai_tool_name as ai_tool_name
from .server import LATEST_PROTOCOL_VERSION as LATEST_PROTOCOL_VERSION
from .server import SUPPORTED_PROTOCOL_VERSIONS as SUPPORTED_PROTOCOL_VERSIONS
from .server import McpServer as McpServer
from .transport import PROTOCOL_VERSION as PROTOCOL_VERSION
from .transport import McpSessionExpired as McpSessionExpired
from .transport import StreamableHttp as StreamableHttp

__all__ = [
    "LATEST_PROTOCOL_VERSION",
    "PROTOCOL_VERSION",
    "SUPPORTED_PROTOCOL_VERSIONS",
    "McpAgent",
    "McpClientManager",
    "McpConnection",
    "McpHandler",
    "McpServer",
    "McpSessionExpired",
    "StreamableHttp",
    "ai_tool_name",
    "route_mcp_request",
    "tool_output",
]
