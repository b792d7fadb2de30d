"""A chat agent at /agents/chat/<name>, answered by a scripted demo model (no key needed).

Swap the model for a real one with agents.providers, e.g.::

    from agents.providers import OpenAIResponses, model_reply

    async def on_chat_message(self, on_finish, options):
        provider = OpenAIResponses.from_env(self.env, model="gpt-4.1-mini")
        return model_reply(self, options, provider)

Turns are durable: kill `doemu dev` mid-reply, start it again, and the reply is continued in the
same message within seconds, with no request.
"""

from workers import Response, WorkerEntrypoint

from agents import AgentOptions, route_agent_request
from agents.chat import AIChatAgent, demo_model


class Chat(AIChatAgent):
    # The keep-alive heartbeat of a running turn is the alarm that continues it after a crash.
    options = AgentOptions(keep_alive_interval_ms=2_000)

    async def on_chat_message(self, on_finish, options):
        model = demo_model(delay_ms=50)  # "hi" → "Hello, world"; "slow" → 25 words
        return model.response(self.messages, abort=options.abort_signal)


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        routed = await route_agent_request(request, self.env)
        return routed if routed is not None else Response("not found", status=404)
