"""Chat agents on the three provider adapters, for ``e2e/test_providers.py``.

Keys and URLs come from ``env`` (the test writes ``.dev.vars``): the fake provider server and
two side-effect counters, one that honours idempotency keys (``charge``, an idempotent tool)
and one that does not (``notify``). ``refund`` is ``charge`` behind a person's approval.
``ForgettingChat`` drops an interrupted reply's partial when it recovers it (``persist: False``),
keeping the tool results that had settled (e2e/differential/test_providers.py).
"""

import json

from workers import Response, WorkerEntrypoint, fetch

from agents import AgentOptions, route_agent_request
from agents.chat import AIChatAgent
from agents.providers import (
    AnthropicMessages,
    OpenAIChatCompletions,
    OpenAIResponses,
    Tool,
    model_reply,
)

AMOUNT = {"type": "object", "properties": {"amount": {"type": "number"}}}


async def _increment(url, args, ctx):
    response = await fetch(
        f"{url}/increment",
        method="POST",
        headers={"content-type": "application/json", "idempotency-key": ctx.idempotency_key},
        body=json.dumps(args),
    )
    return await response.json()


async def charge(args, ctx):
    return await _increment(ctx.env.COUNTER_URL, args, ctx)


async def notify(args, ctx):
    return await _increment(ctx.env.COUNTER_PLAIN_URL, args, ctx)


TOOLS = [
    Tool("charge", "Charge the customer's card.", AMOUNT, execute=charge, idempotent=True),
    Tool("notify", "Send the customer a webhook.", AMOUNT, execute=notify),
    Tool("ask_user", "Ask the user to confirm (answered in the browser).", AMOUNT),
    # A person approves each refund before it runs (e2e/test_chat_approval.py).
    Tool(
        "refund",
        "Refund the customer.",
        AMOUNT,
        execute=charge,
        idempotent=True,
        needs_approval=True,
    ),
]


class _Chat(AIChatAgent):
    options = AgentOptions(keep_alive_interval_ms=1_000)
    model_prices = {"fake-model": (1.0, 2.0)}  # noqa: RUF012 (a class option, as on Agent)

    def provider(self):
        raise NotImplementedError

    async def on_chat_message(self, on_finish, options):
        return model_reply(self, options, self.provider(), tools=TOOLS, system="Be terse.")

    async def on_request(self, request):
        if request.url.endswith("/usage"):  # what usage() answers, for the tests
            body = json.dumps(self.usage().to_dict())
            return Response(body, headers={"content-type": "application/json"})
        return await super().on_request(request)


class ResponsesChat(_Chat):
    def provider(self):
        return OpenAIResponses.from_env(self.env, model="fake-model")


class AnthropicChat(_Chat):
    def provider(self):
        return AnthropicMessages.from_env(self.env, model="fake-model")


class CompletionsChat(_Chat):
    def provider(self):
        return OpenAIChatCompletions.from_env(self.env, model="fake-model")


class ForgettingChat(CompletionsChat):
    async def on_chat_recovery(self, ctx):
        return {"persist": False}


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return await route_agent_request(request, self.env) or Response("not found", status=404)
