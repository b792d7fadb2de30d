"""The Python side of ``e2e/test_chat_differential.py``: the same chat agent as
``e2e/js_chat/worker.src.mjs`` (Cloudflare's ``AIChatAgent`` answering with ``streamText`` from an
OpenAI-compatible provider), written both ways the README documents:

* ``ModelChat``: ``model_reply`` over ``OpenAIChatCompletions`` (the model loop);
* ``StreamChat``: ``ui_message_response(text_stream(deltas))``, the deltas read from the same
  adapter (your own model call).

The ``Watched…`` twins add what the JavaScript ``WatchedChat`` sets: a 1 s stall watchdog and at
most 3 recovery attempts. ``ApprovalChat`` (``model_reply`` only: its twin answers with
``streamText``'s tools) has a ``refund`` tool that needs a person's approval and POSTs to the
test's counter server at ``COUNTER_URL``. The provider's address and key come from ``.dev.vars``
(``OPENAI_BASE_URL``, ``OPENAI_API_KEY``), which the test writes. A continuation is asked with the
AI SDK's prompt, ``[user, assistant partial]`` (the adapter's default).
"""

import json

from workers import Response, WorkerEntrypoint, fetch

from agents import route_agent_request
from agents.chat import AIChatAgent, ChatRecoveryConfig, text_stream, ui_message_response
from agents.providers import (
    ModelCall,
    OpenAIChatCompletions,
    TextDelta,
    Tool,
    items_from_messages,
    model_reply,
)


def _provider(env):
    return OpenAIChatCompletions.from_env(env, model="fake-model")


class ModelChat(AIChatAgent):
    async def on_chat_message(self, on_finish, options):
        return model_reply(self, options, _provider(self.env))


class StreamChat(AIChatAgent):
    async def on_chat_message(self, on_finish, options):
        provider = _provider(self.env)
        call = ModelCall(items_from_messages(self.messages))

        async def deltas():
            async for event in provider.stream(call):
                if isinstance(event, TextDelta):
                    yield event.delta

        return ui_message_response(text_stream(deltas()))


class _Watched:
    chat_stream_stall_timeout_ms = 1_000
    chat_recovery = ChatRecoveryConfig(max_attempts=3)


class WatchedModelChat(_Watched, ModelChat):
    pass


class WatchedStreamChat(_Watched, StreamChat):
    pass


async def _refund(args, ctx):
    response = await fetch(
        f"{ctx.env.COUNTER_URL}/increment",
        method="POST",
        headers={"content-type": "application/json"},
        body=json.dumps(args),
    )
    return {"count": (await response.json())["count"]}


AMOUNT = {"type": "object", "properties": {"amount": {"type": "number"}}}
REFUND = Tool("refund", "Refund the customer.", AMOUNT, execute=_refund, needs_approval=True)


class ApprovalChat(AIChatAgent):
    """The JavaScript ``ApprovalChat``: ``refund`` runs only once a person approved the call."""

    async def on_chat_message(self, on_finish, options):
        return model_reply(self, options, _provider(self.env), tools=[REFUND])


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        routed = await route_agent_request(request, self.env)
        return routed if routed is not None else Response("not found", status=404)
