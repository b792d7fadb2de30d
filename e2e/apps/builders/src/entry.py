"""Agents for e2e/test_builders_surface.py and e2e/differential/test_builders.py, driven over
HTTP at /agents/<agent>/<name>/<verb> (Think's chat turns also over its WebSocket), and an
McpAgent serving MCP's streamable HTTP at /mcp."""

import json
from typing import ClassVar

from workers import Response, WorkerEntrypoint

from agents import Agent, McpAgent, route_agent_request
from agents.errors import McpError
from agents.providers import OpenAIChatCompletions, Tool
from agents.think import Think


def verb(request):
    return request.url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]


class Tools(Agent):
    async def on_request(self, request):
        body = json.loads(await request.text() or "{}") if request.method == "POST" else {}
        action = verb(request)
        if action == "add":
            return Response.json(await self.add_mcp_server(body["name"], body["url"]))
        if action == "call":
            try:
                result = await self.mcp.call_tool(body["id"], body["tool"], body.get("args", {}))
            except McpError as exc:
                return Response.json({"error": str(exc)}, status=502)
            return Response.json({"result": result})
        await self.mcp.wait_for_connections()
        return Response.json(self.get_mcp_servers())


class Notes(Agent):
    async def on_start(self, props):
        self.sql("CREATE TABLE IF NOT EXISTS notes (body TEXT)")
        if props is not None:
            self.sql("INSERT INTO notes VALUES (?)", "props:" + json.dumps(props, sort_keys=True))

    async def on_request(self, request):
        action = verb(request)
        if action == "add":
            self.sql("INSERT INTO notes VALUES (?)", await request.text())
        elif action == "condemn":
            await self.schedule_destroy()
        return Response.json([r["body"] for r in self.sql("SELECT body FROM notes")])


async def shout(args, ctx):
    return str(args.get("text", "")).upper()


class Helper(Think):
    system = "You are terse."
    tools: ClassVar[list] = [
        Tool("shout", "Upper-case a text.", {"type": "object"}, execute=shout),
    ]
    compact_after_messages = 4
    keep_recent_messages = 2

    def get_model(self):
        return OpenAIChatCompletions.from_env(self.env, model="m")

    async def on_request(self, request):
        if verb(request) == "ask":
            return Response.json(await self.chat(await request.text()))
        texts = [
            "".join(p.get("text", "") for p in m["parts"] if p["type"] == "text")
            for m in self.messages
        ]
        pending = [s.callback for s in self.get_schedules()]
        files = {path: self.files.read(path) for path in self.files.list()}
        return Response.json({"texts": texts, "schedules": pending, "files": files})


class Lead(Agent):
    """A parent handing a message to a child Think over RPC (the SDK's sub-agent ``chat()``)."""

    async def on_request(self, request):
        child = self.env.Helper.getByName(f"{self.name}-child")
        answer = await child.chat(await request.text())
        return Response.json(answer)  # a JsDict: over RPC a dict arrives as one


class Counter(McpAgent):
    server_name = "counter"
    instructions = "A counter per session."
    initial_state: ClassVar[dict] = {"count": 0}

    async def init(self):
        @self.server.tool(description="Add to this session's counter; answers the new count.")
        def add(amount: int) -> dict:
            self.set_state({"count": self.state["count"] + amount})
            return {"count": self.state["count"]}


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        if request.url.split("?", 1)[0].rstrip("/").endswith("/mcp"):
            return await Counter.serve("/mcp").fetch(request, self.env, self.ctx)
        props = {"via": "routing"} if "props=1" in request.url else None
        cors = "cors=1" in request.url
        routed = await route_agent_request(request, self.env, props=props, cors=cors)
        return routed if routed is not None else Response("not found", status=404)
