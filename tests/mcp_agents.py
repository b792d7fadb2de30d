"""An ``McpAgent`` (and an MCP client agent) shared by the McpAgent tests.

``Counter`` keeps a per-session counter in the agent's state; its entry Worker serves it at
``/mcp`` with the props ``{"user": "ada"}`` (what an OAuth provider would put in ``ctx.props``),
and at ``/bare`` through ``McpAgent.serve`` (no props). ``Caller`` is an ordinary agent whose MCP
client (``add_mcp_server``) connects to a ``Counter`` over a real socket.
"""

from __future__ import annotations

from typing import Any, ClassVar

from workers import Response, WorkerEntrypoint

from agents import Agent, McpAgent, route_agent_request, route_mcp_request
from agents.errors import McpError, McpToolError

__all__ = ["Caller", "Counter", "Default"]


class Counter(McpAgent):
    server_name = "counter"
    server_version = "1.2.3"
    instructions = "A counter per session."
    initial_state: ClassVar[Any] = {"count": 0}

    async def init(self) -> None:
        server = self.server

        @server.tool(description="Add to this session's counter; answers the new count.")
        def add(amount: int) -> dict[str, int]:
            self.set_state({"count": self.state["count"] + amount})
            return {"count": self.state["count"]}

        @server.tool()
        async def whoami() -> str:
            """Who the Worker said this session is (its props)."""
            return str((self.props or {}).get("user", "nobody"))

        @server.tool(description="Always fails.")
        def explode() -> str:
            raise RuntimeError("the tool exploded")

        @server.resource("counter://value", description="The counter", mime_type="text/plain")
        def value() -> str:
            return str(self.state["count"])

        @server.prompt(description="Ask about the counter.")
        def ask(topic: str, tone: str = "plain") -> str:
            return f"Tell me about {topic} ({tone}); the count is {self.state['count']}."


class Caller(Agent):
    async def connect(self, url: str) -> dict[str, Any]:
        added = await self.add_mcp_server("counter", url)
        await self.mcp.wait_for_connections()
        return {**added, "servers": self.get_mcp_servers()}

    async def call(self, server_id: str, tool: str, args: dict[str, Any]) -> Any:
        try:
            return {"ok": await self.mcp.call_tool(server_id, tool, args)}
        except McpToolError as exc:
            return {"tool_error": str(exc)}
        except McpError as exc:
            return {"error": str(exc)}


class Default(WorkerEntrypoint):
    async def fetch(self, request: Any) -> Any:
        answer = await route_mcp_request(request, self.env, props={"user": "ada"})
        if answer is not None:
            return answer
        if request.url.split("?")[0].endswith("/bare"):
            return await Counter.serve("/bare").fetch(request, self.env, self.ctx)
        return await route_agent_request(request, self.env) or Response("not found", status=404)
