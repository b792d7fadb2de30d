"""An agent that Cloudflare's JavaScript ``AgentClient`` drives in the Node interop test.

/agents/counter-agent/<name>    WebSocket: the Agents SDK protocol; HTTP: ``on_request``
anything else                   404
"""

from typing import Any, ClassVar

from workers import Response, WorkerEntrypoint

from agents import Agent
from agents.routing import route_agent_request
from agents.rpc import callable


class CounterAgent(Agent):
    initial_state: ClassVar[dict[str, Any]] = {"count": 0, "history": []}

    @callable(description="Add `by` to the count and return the new count")
    async def increment(self, by):
        state = self.state
        count = state["count"] + by
        await self.set_state({"count": count, "history": [*state["history"], f"+{by}"]})
        return count

    @callable()
    def greet(self, who):
        return f"hello {who}, this is {self.name}"

    @callable(streaming=True)
    async def countdown(self, stream, start):
        for n in range(start, 0, -1):
            stream.send(n)
        stream.end("liftoff")

    async def on_request(self, request):
        return Response.json({"agent": self.name, "state": self.state})


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        routed = await route_agent_request(request, self.env)
        return routed if routed is not None else Response("not found", status=404)
