"""An agent server: POST /sessions/<id>/start {"agentType": "assistant", "input": {...}}, then
read /sessions/<id>/sse (or /status, /snapshot, /history, /usage, …).

Each session is one Durable Object: a run survives a kill of the server and is resumed, and a
reader can leave and read on from a sequence number.
"""

import re
from urllib.parse import urlsplit

from workers import Response, WorkerEntrypoint

from agents.providers import OpenAIChatCompletions, Tool
from agents.server import AgentRegistry, create_agent_server, define_agent, session_object_name


async def word_count(args, ctx):
    """A server tool: it runs in the session's object; its result goes back to the model."""
    return {"words": len(str(args.get("text", "")).split())}


agents = AgentRegistry()
agents.register(
    define_agent(
        "assistant",
        system_prompt="You are a helpful assistant. Count words with word_count.",
        tools=[
            Tool(
                "word_count",
                "Count the words of a text.",
                {
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"],
                },
                execute=word_count,
            )
        ],
    )
)

AgentServer = create_agent_server(
    agents=agents,
    llm_adapter=lambda env, ctx: OpenAIChatCompletions.from_env(
        env, model=getattr(env, "MODEL", None) or "demo"
    ),
    name="AgentServer",
)

_SESSION = re.compile(r"^/sessions/(?P<id>[A-Za-z0-9_-]{1,64})(?P<rest>/.*)$")


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        url = urlsplit(request.url)
        match = _SESSION.match(url.path)
        if match is None:
            return Response.json({"error": "use /sessions/<id>/<endpoint>"}, status=404)
        namespace = self.env.AGENTS
        stub = namespace.get(namespace.idFromName(session_object_name(match["id"])))
        target = f"http://agent{match['rest']}" + (f"?{url.query}" if url.query else "")
        # request.headers is an http.client.HTTPMessage, which fetch() cannot take: pass its pairs.
        headers = list(request.headers.items())
        if request.method in ("GET", "HEAD"):
            return await stub.fetch(target, method=request.method, headers=headers)
        body = await request.text()
        return await stub.fetch(target, method=request.method, headers=headers, body=body)
