"""Agents for e2e/test_builders_surface.py, driven over HTTP at /agents/<agent>/<name>/<verb>."""

import json

from workers import Response, WorkerEntrypoint

from agents import Agent, route_agent_request
from agents.errors import McpError
from agents.providers import OpenAIChatCompletions
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


class Helper(Think):
    system = "You are terse."
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
        return Response.json({"texts": texts, "schedules": pending})


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        props = {"via": "routing"} if "props=1" in request.url else None
        cors = "cors=1" in request.url
        routed = await route_agent_request(request, self.env, props=props, cors=cors)
        return routed if routed is not None else Response("not found", status=404)
