"""MCP servers' tools as the model loop's tools (the SDK's ``this.mcp.getAITools()``).

:func:`mcp_tools` turns every tool of every *ready* server of the agent's MCP client
(:mod:`agents.mcp`) into a :class:`~agents.providers.Tool` named as the SDK names it
(``tool_<server id>_<tool>``), whose ``execute`` calls the server. It lives here, above
``agents.providers``, because the MCP client itself sits below the Agent façade. Any chat agent
can use it: ``model_reply(self, options, provider, tools=mcp_tools(self))`` after ``await
self.mcp.wait_for_connections()``.
"""

from __future__ import annotations

from typing import Any

from ..mcp import ai_tool_name
from ..providers import Tool, ToolContext

__all__ = ["mcp_tools"]


def mcp_tools(agent: Any) -> list[Tool]:
    """The tools of ``agent``'s ready MCP servers (see the module docstring)."""
    tools: list[Tool] = []
    for server_id, connection in agent.mcp.connections.items():
        if connection.state != "ready":
            continue
        for spec in connection.tools:
            name = spec.get("name")
            if not isinstance(name, str) or not name:
                continue

            async def execute(
                args: dict[str, Any], _ctx: ToolContext, _sid: str = server_id, _name: str = name
            ) -> Any:
                return await agent.mcp.call_tool(_sid, _name, args)

            schema = spec.get("inputSchema")
            tools.append(
                Tool(
                    ai_tool_name(server_id, name),
                    str(spec.get("description") or ""),
                    schema if isinstance(schema, dict) else {"type": "object", "properties": {}},
                    execute=execute,
                )
            )
    return tools
