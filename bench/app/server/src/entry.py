"""The agent-server rows' app (bench/README.md, "Agent-server rows"): ``create_agent_server``
with one agent type, ``bench``, answered by an OpenAI-compatible provider at
``env.OPENAI_BASE_URL`` (bench/fakeprovider.py in the bench) through
``OpenAIChatCompletions.from_env`` — the configuration tests/test_server_agent.py uses.

A run of ``bench`` is one model step with no tools: the provider's text deltas become the
session stream's ``text_delta`` chunks, framed by ``run_started`` / ``step_completed`` /
``run_completed`` and the terminal ``end`` event. The fake provider reads ``chunks:N`` from the
user message, so a run of N deltas stores N + 3 chunks.

Routes: ``/sessions/<id>/<endpoint>`` goes to the session's object
(``idFromName(session_object_name(id))``), which answers the seed's endpoints (``/start``,
``/sse?fromSequence=N``, ``/history``, ``/status`` …); anything else 404.
"""

from urllib.parse import urlsplit

from workers import Response, WorkerEntrypoint

from agents.providers import OpenAIChatCompletions
from agents.server import AgentRegistry, create_agent_server, define_agent, session_object_name

_agents = AgentRegistry()
_agents.register(define_agent("bench", system_prompt="Answer.", max_steps=1))


def _llm(env, ctx):
    return OpenAIChatCompletions.from_env(env, model="fake")


BenchAgentServer = create_agent_server(agents=_agents, llm_adapter=_llm, name="BenchAgentServer")


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        parts = urlsplit(str(request.url)).path.strip("/").split("/")
        if len(parts) < 3 or parts[0] != "sessions" or not parts[1]:
            return Response("not found", status=404)
        namespace = self.env.AGENTS
        stub = namespace.get(namespace.idFromName(session_object_name(parts[1])))
        return await stub.fetch(request)
