"""An agent server whose agents answer in a JSON shape, for ``e2e/test_agent_server_structured.py``:
OpenAI Responses (the fake, via ``.dev.vars``), an ``analyst`` with an output schema and three
steps, a ``terse`` one with two. ``/sessions/<id>/<endpoint>`` goes to that session's object.
"""

import re

from workers import Response, WorkerEntrypoint

from agents.providers import OpenAIResponses
from agents.server import AgentRegistry, create_agent_server, define_agent, session_object_name

ANALYSIS = {
    "type": "object",
    "properties": {
        "sentiment": {"enum": ["positive", "negative", "neutral"]},
        "topics": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["sentiment", "topics"],
}

registry = AgentRegistry()
registry.register(
    define_agent("analyst", system_prompt="You analyse.", output_schema=ANALYSIS, max_steps=3)
)
registry.register(define_agent("terse", output_schema=ANALYSIS, max_steps=2))

AnalystServer = create_agent_server(
    agents=registry,
    llm_adapter=lambda env, ctx: OpenAIResponses.from_env(env, model="fake-model"),
    heartbeat_ms=300,
    name="AnalystServer",
)

_PATH = re.compile(r"^/sessions/(?P<id>[A-Za-z0-9_-]{1,64})(?P<rest>/.*)$")


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        path = "/" + request.url.split("://", 1)[-1].split("/", 1)[-1].split("?", 1)[0]
        match = _PATH.match(path)
        if match is None:
            return Response('{"error": "not found"}', status=404)
        namespace = self.env.AGENTS
        stub = namespace.get(namespace.idFromName(session_object_name(match["id"])))
        return await stub.fetch(request)  # the session's routes match the path's end
