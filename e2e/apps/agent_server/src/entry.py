"""An agent server for ``e2e/test_agent_server.py``: OpenAI Responses (the fake, via
``.dev.vars``), a researcher with a server tool, a client tool and a sub-agent.

``/sessions/<id>/<endpoint>`` goes to that session's object; anything else is 404.
"""

import re

from workers import Response, WorkerEntrypoint

from agents import AgentOptions
from agents.providers import OpenAIResponses, Tool
from agents.server import (
    AgentRegistry,
    create_agent_server,
    define_agent,
    session_object_name,
    sub_agent_tool,
)


async def word_count(args, ctx):
    return {"words": len(str(args.get("text", "")).split())}


registry = AgentRegistry()
registry.register(
    define_agent(
        "researcher",
        system_prompt="You research.",
        tools=[
            Tool("word_count", "Count words.", {"type": "object"}, execute=word_count),
            Tool("approve", "Ask the user to approve."),
            sub_agent_tool("analyzer", description="Analyze a text."),
        ],
    )
)
registry.register(define_agent("analyzer", system_prompt="You analyze.", max_steps=3))

SessionServer = create_agent_server(
    agents=registry,
    llm_adapter=lambda env, ctx: OpenAIResponses.from_env(env, model="fake-model"),
    sub_agent_namespace=lambda env: env.AGENTS,
    heartbeat_ms=300,
    interrupt_observation_deadline_ms=5_000,
    name="SessionServer",
)
# After a crash the persisted keep-alive alarm wakes the session within a second.
SessionServer.options = AgentOptions(keep_alive_interval_ms=1_000)
SessionServer.model_prices = {"fake-model": (1.0, 2.0)}

_PATH = re.compile(r"^/sessions/(?P<id>[A-Za-z0-9_-]{1,64})(?P<rest>/.*)$")


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        path = "/" + request.url.split("://", 1)[-1].split("/", 1)[-1].split("?", 1)[0]
        match = _PATH.match(path)
        if match is None:
            return Response('{"error": "not found"}', status=404)
        namespace = self.env.AGENTS
        stub = namespace.get(namespace.idFromName(session_object_name(match["id"])))
        return await stub.fetch(request)  # the server's routes match the end of the path
