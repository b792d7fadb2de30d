"""An agent server with a browser page: one Durable Object per session, streamed over SSE.

``AgentServer`` (:func:`agents.server.create_agent_server`) hosts one session per object: each
``/start`` is a run of the ``researcher`` agent, driven by an OpenAI-compatible chat-completions
model (``OPENAI_BASE_URL``/``OPENAI_API_KEY`` in ``.dev.vars``; ``MODEL`` names it, "demo" by
default) and stored chunk by chunk, so a reader can leave, reload, or outlive a crash of the
server and read on from a sequence number. The researcher has the three kinds of tool:
``word_count`` runs here, ``approve`` has no ``execute`` — the run suspends until the browser
answers it — and ``summarize`` runs the ``summarizer`` agent in a sibling object.

Routes: ``/`` the page; ``/api/sessions/<session id>/<endpoint>`` that session's object, as
``/<endpoint>`` (``start``, ``status``, ``sse``, ``snapshot``, ``history``, ``resume``,
``usage``, ``chat/<id>/submit-tool-result`` …, and the WebSocket at ``ws``); anything else is a
JSON 404. A session id the Worker cannot use is a 400 naming the rule, before any object exists.
"""

import json
import re
from urllib.parse import urlsplit

from page import PAGE, PAGE_HEADERS
from workers import Response, WorkerEntrypoint

from agents.providers import OpenAIChatCompletions, Tool
from agents.server import (
    AgentRegistry,
    create_agent_server,
    define_agent,
    session_object_name,
    sub_agent_tool,
)


async def word_count(args, ctx):
    """A server tool: it runs in the session's object, its result goes back to the model."""
    return {"words": len(str(args.get("text", "")).split())}


def _object(**properties):
    return {"type": "object", "properties": properties, "required": list(properties)}


agents = AgentRegistry()
agents.register(
    define_agent(
        "researcher",
        system_prompt=(
            "You are a research assistant. Count words with word_count, ask the user with "
            "approve before you act on their behalf, and delegate condensing to the summarize tool."
        ),
        tools=[
            Tool(
                "word_count",
                "Count the words of a text.",
                _object(text={"type": "string"}),
                execute=word_count,
            ),
            # No execute: the browser answers it (submit-tool-result), the run waits meanwhile.
            Tool(
                "approve",
                "Ask the user to approve an action; answers {approved: true|false}.",
                _object(action={"type": "string"}),
            ),
            sub_agent_tool("summarizer", name="summarize", description="Summarize a text."),
        ],
    )
)
agents.register(
    define_agent("summarizer", system_prompt="You summarize texts in one sentence.", max_steps=2)
)

AgentServer = create_agent_server(
    agents=agents,
    llm_adapter=lambda env, ctx: OpenAIChatCompletions.from_env(
        env, model=getattr(env, "MODEL", None) or "demo"
    ),
    sub_agent_namespace=lambda env: env.AGENTS,
    name="AgentServer",
)

_SESSION_PATH = re.compile(r"^/api/sessions/(?P<id>[^/]*)(?P<rest>/.*)?$")
_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: The routes whose JSON body names the session: it must be the one in the path.
_NAMES_SESSION = ("/start", "/chat")


def _error(status, code, message):
    return Response(
        json.dumps({"error": message, "code": code}),
        status=status,
        headers={"content-type": "application/json"},
    )


def _body_for(session_id, rest, text):
    """The body to forward: ``/start`` and ``/chat`` get the path's session id (a different one
    in the body would make this object host another session's name; for the AI SDK's ``useChat``
    request it is the body's ``id``). None: refuse it."""
    if rest not in _NAMES_SESSION or not text.strip():
        return text
    try:
        body = json.loads(text)
    except ValueError:
        return text  # the object answers the 400 itself, naming the JSON error
    if not isinstance(body, dict):
        return text
    if rest == "/chat" and "messages" in body:  # the AI SDK's useChat: the session is its id
        return json.dumps(body) if body.setdefault("id", session_id) == session_id else None
    if body.setdefault("sessionId", session_id) != session_id:
        return None
    return json.dumps(body)


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        url = urlsplit(request.url)
        if url.path in ("/", "/index.html"):
            return Response(PAGE, headers=PAGE_HEADERS)
        match = _SESSION_PATH.match(url.path)
        if match is None:
            where = "the page is /, the API /api/sessions/<id>/<endpoint>"
            return _error(404, "NOT_FOUND", f"no route {url.path}: {where}")
        session_id, rest = match["id"], match["rest"] or "/"
        if not _SESSION_ID.match(session_id):
            shown = session_id if len(session_id) <= 40 else session_id[:37] + "..."
            return _error(
                400,
                "BAD_SESSION_ID",
                f"a session id is 1 to 64 letters, digits, '-' or '_'; got {shown!r}",
            )
        if rest == "/":
            return _error(404, "NOT_FOUND", "name an endpoint: /api/sessions/<id>/status, …")
        namespace = self.env.AGENTS
        stub = namespace.get(namespace.idFromName(session_object_name(session_id)))
        target = f"http://agent{rest}" + (f"?{url.query}" if url.query else "")
        if rest == "/ws":
            if (request.headers.get("upgrade") or "").lower() != "websocket":
                return _error(426, "UPGRADE_REQUIRED", "/ws is a WebSocket: send an upgrade")
            return await stub.fetch(target, headers=list(request.headers.items()))
        if request.method in ("GET", "HEAD"):
            return await stub.fetch(target, method=request.method)
        body = _body_for(session_id, rest, await request.text())
        if body is None:
            return _error(
                400, "SESSION_MISMATCH", f"the body's sessionId is not {session_id!r}, the path's"
            )
        return await stub.fetch(
            target,
            method=request.method,
            body=body,
            headers={"content-type": "application/json"},
        )
