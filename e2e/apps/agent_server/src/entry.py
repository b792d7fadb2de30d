"""An agent server for ``e2e/test_agent_server*.py``: OpenAI Responses (the fake, via
``.dev.vars``), a researcher with a server tool, a client tool, an approval-gated tool and a
sub-agent; a writer with persistent children (the companion tools). ``AUTO`` is the same server
with ``auto_resume``.

``/sessions/<id>/<endpoint>`` goes to that session's object, ``/auto/<id>/<endpoint>`` to the
auto-resume one's; ``/chat`` (the AI SDK's POST, the session in its body's ``id``) and
``/chat/<id>/<action>`` are the v7 chat routes; anything else is 404.
"""

import json
import re

from workers import Response, WorkerEntrypoint

from agents import AgentOptions
from agents.providers import OpenAIResponses, Tool
from agents.server import (
    AgentRegistry,
    create_agent_server,
    define_agent,
    needs_approval,
    session_object_name,
    sub_agent_tool,
)


async def word_count(args, ctx):
    ctx.record_metric("words", "counted", len(str(args.get("text", "")).split()))
    return {"words": len(str(args.get("text", "")).split())}


async def _effect(ctx, **fields):
    """A side effect the test counts from outside: a POST to the counter (``COUNTER_URL``)."""
    from workers import fetch

    body = json.dumps({"key": ctx.idempotency_key, **fields})
    await fetch(ctx.env.COUNTER_URL, method="POST", body=body)


async def deploy(args, ctx):
    await _effect(ctx, tool="deploy", service=args.get("service"))
    return {"deployed": args.get("service")}


async def notify(args, ctx):
    await _effect(ctx, tool="notify", who=args.get("who"))
    ctx.record_metric("notifications", "sent", 1)
    return {"notified": args.get("who")}


registry = AgentRegistry()
registry.register(
    define_agent(
        "researcher",
        system_prompt="You research.",
        tools=[
            Tool("word_count", "Count words.", {"type": "object"}, execute=word_count),
            Tool("notify", "Notify someone.", {"type": "object"}, execute=notify),
            Tool("approve", "Ask the user to approve."),
            needs_approval(Tool("deploy", "Deploy a service.", {"type": "object"}, execute=deploy)),
            sub_agent_tool("analyzer", description="Analyze a text."),
        ],
    )
)
registry.register(define_agent("analyzer", system_prompt="You analyze.", max_steps=3))
registry.register(
    define_agent("writer", system_prompt="You write.", persistent_sub_agents=["critic"])
)
registry.register(
    define_agent(
        "critic",
        system_prompt="You criticize.",
        tools=[Tool("word_count", "Count words.", {"type": "object"}, execute=word_count)],
    )
)

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

# No keep-alive tuning: auto_resume wakes a crashed session by itself.
AutoServer = create_agent_server(
    agents=registry,
    llm_adapter=lambda env, ctx: OpenAIResponses.from_env(env, model="fake-model"),
    sub_agent_namespace=lambda env: env.AUTO,
    auto_resume=True,
    name="AutoServer",
)

_PATH = re.compile(r"^/(?P<ns>sessions|auto)/(?P<id>[A-Za-z0-9_-]{1,64})(?P<rest>/.*)$")
_CHAT = re.compile(r"^/chat/(?P<id>[A-Za-z0-9_-]{1,64})/[a-z-]+$")


def _stub(namespace, session_id):
    return namespace.get(namespace.idFromName(session_object_name(session_id)))


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        path = "/" + request.url.split("://", 1)[-1].split("/", 1)[-1].split("?", 1)[0]
        if path == "/chat" and request.method == "POST":  # the session is the body's id
            text = await request.text()
            try:
                session_id = str(json.loads(text).get("id") or "")
            except (ValueError, AttributeError):
                session_id = ""
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", session_id):
                return Response('{"error": "the chat request needs its id"}', status=400)
            return await _stub(self.env.AGENTS, session_id).fetch(
                "http://agent/chat", method="POST", body=text,
                headers={"content-type": "application/json"},
            )  # fmt: skip
        chat = _CHAT.match(path)
        if chat is not None:
            return await _stub(self.env.AGENTS, chat["id"]).fetch(request)
        match = _PATH.match(path)
        if match is None:
            return Response('{"error": "not found"}', status=404)
        namespace = self.env.AGENTS if match["ns"] == "sessions" else self.env.AUTO
        return await _stub(namespace, match["id"]).fetch(request)  # routes match the path's end
