"""An MCP server on an agent (Counter, at /mcp) and an agent using it as an MCP client (Caller,
at /agents/caller/<name>/connect and /call), for e2e/test_mcp_agent.py."""

import json
from typing import ClassVar

from workers import Response, WorkerEntrypoint

from agents import Agent, McpAgent, route_agent_request
from agents.errors import McpError


class Counter(McpAgent):
    server_name = "counter"
    instructions = "A counter per session."
    initial_state: ClassVar[dict] = {"count": 0}

    async def init(self):
        @self.server.tool(description="Add to this session's counter; answers the new count.")
        def add(amount: int) -> dict:
            self.set_state({"count": self.state["count"] + amount})
            return {"count": self.state["count"]}

        @self.server.resource("counter://value", mime_type="text/plain")
        def value() -> str:
            return str(self.state["count"])


class Caller(Agent):
    async def on_request(self, request):
        body = json.loads(await request.text() or "{}")
        if request.url.rstrip("/").endswith("/connect"):
            added = await self.add_mcp_server("counter", body["url"])
            await self.mcp.wait_for_connections()
            return Response.json({**added, "mcp": self.get_mcp_servers()})
        try:
            result = await self.mcp.call_tool(body["id"], body["tool"], body.get("args", {}))
        except McpError as exc:
            return Response.json({"error": str(exc)}, status=502)
        return Response.json({"result": result})


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        if request.url.split("?")[0].rstrip("/").endswith("/mcp"):
            return await Counter.serve("/mcp").fetch(request, self.env, self.ctx)
        return await route_agent_request(request, self.env) or Response("not found", status=404)
