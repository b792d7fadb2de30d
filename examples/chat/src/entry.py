"""A chat agent on a scripted model, served with a plain browser page.

``ChatAgent`` answers with the deterministic demo model (no LLM, no key): "hi" → "Hello, world",
"slow" → 25 words (``delayMs`` apart, 100 by default: slow enough to kill the server mid-reply),
"tool" → a client tool call, "boom" → an in-band error. Its turns are durable: kill ``doemu dev``
mid-reply, start it again, and within seconds — with no request — the reply is continued in the
same assistant message (bounded recovery: the stored words, then the model's continuation).

Routes: ``/`` the page, ``/agents/chat-agent/<name>`` the agent (WebSocket, and
``…/get-messages``), anything else 404.
"""

from page import PAGE
from workers import Response, WorkerEntrypoint

from agents import AgentOptions, route_agent_request
from agents.chat import AIChatAgent, demo_model


class ChatAgent(AIChatAgent):
    # While a turn runs, its keep-alive heartbeat is the alarm that wakes the chat after a crash
    # (30 s by default): every 2 s here, so an interrupted reply is continued within seconds
    # even if nobody reconnects.
    options = AgentOptions(keep_alive_interval_ms=2_000)

    async def on_chat_message(self, on_finish, options):
        body = options.body or {}
        delay = body.get("delayMs", 100)
        if not isinstance(delay, int | float) or isinstance(delay, bool) or delay < 0:
            delay = 100
        model = demo_model(delay_ms=delay)
        return model.response(self.messages, abort=options.abort_signal)


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        path = request.url.split("?", 1)[0].split("/", 3)[-1]
        if path in ("", "index.html"):
            return Response(PAGE, headers={"content-type": "text/html; charset=utf-8"})
        routed = await route_agent_request(request, self.env)
        return routed if routed is not None else Response("not found", status=404)
