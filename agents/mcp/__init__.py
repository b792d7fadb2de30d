"""MCP in agents: the agent's client (the SDK's ``this.mcp``): servers over streamable HTTP,
kept in SQLite and reconnected after an eviction (see :mod:`agents.mcp.manager`); and the
server's protocol (:mod:`agents.mcp.server`: :class:`McpServer`, JSON-RPC in
:mod:`agents.mcp.jsonrpc`) that :class:`agents.mcp_agent.McpAgent` serves per session.

``McpAgent``, ``McpHandler`` and ``route_mcp_request`` are importable from here too, as in the
TypeScript SDK's ``agents/mcp``; they live in :mod:`agents.mcp_agent` (an ``Agent`` subclass
sits above this package) and are imported on first use, so this package never imports the
``Agent`` while the ``Agent`` imports it.

``Agent.add_mcp_server`` / ``remove_mcp_server`` / ``get_mcp_servers`` are the façade;
``agents.think.mcp_tools(agent)`` hands the servers' tools to ``model_reply``. Layers, top to
bottom: ``manager`` → ``connection`` → ``transport``.
"""

from __future__ import annotations

from typing import Any

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

_SERVER_SIDE = ("McpAgent", "McpHandler", "route_mcp_request")


def __getattr__(name: str) -> Any:
    if name in _SERVER_SIDE:
        from .. import mcp_agent

        return getattr(mcp_agent, name)
    raise AttributeError(f"module 'agents.mcp' has no attribute {name!r}")


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
