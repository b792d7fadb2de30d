"""The agent's MCP client (the SDK's ``this.mcp``): servers over streamable HTTP, kept in
SQLite and reconnected after an eviction; see :mod:`agents.mcp.manager`.

``Agent.add_mcp_server`` / ``remove_mcp_server`` / ``get_mcp_servers`` are the façade;
``agents.think.mcp_tools(agent)`` hands the servers' tools to ``model_reply``. Layers, top to
bottom: ``manager`` → ``connection`` → ``transport``.
"""

from __future__ import annotations

from .connection import McpConnection as McpConnection
from .connection import tool_output as tool_output
from .manager import McpClientManager as McpClientManager
from .manager import ai_tool_name as ai_tool_name
from .transport import PROTOCOL_VERSION as PROTOCOL_VERSION
from .transport import McpSessionExpired as McpSessionExpired
from .transport import StreamableHttp as StreamableHttp

__all__ = [
    "PROTOCOL_VERSION",
    "McpClientManager",
    "McpConnection",
    "McpSessionExpired",
    "StreamableHttp",
    "ai_tool_name",
    "tool_output",
]
