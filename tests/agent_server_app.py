"""The in-process agent server tests' app: a registry of agents, the server classes, a harness.

Each session is one object (``idFromName("session:<id>")``); the provider is
:class:`~doemu.testing.fake_providers.FakeLLM` reached through ``workers.fetch``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agents.providers import OpenAIChatCompletions, Tool
from agents.server import (
    AgentRegistry,
    ServerHooks,
    create_agent_server,
    define_agent,
    sub_agent_tool,
)
from doemu.testing.fake_providers import FakeLLM
from doemu.testing.plugin import HarnessFactory

from .agent_server_steps import Session

__all__ = [
    "COMPLETED",
    "LOOKUPS",
    "_deltas",
    "_has_delta",
    "fresh_llm",
    "harness",
    "llm_adapter",
    "registry",
]


LOOKUPS: list[Any] = []


async def lookup(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    LOOKUPS.append(args)
    return {"found": args.get("q")}


def registry() -> AgentRegistry:
    agents = AgentRegistry()
    agents.register(
        define_agent(
            "researcher",
            system_prompt="Research.",
            tools=[
                Tool("lookup", "Look up.", {"type": "object"}, execute=lookup),
                Tool("approve", "Ask the user to approve."),
                sub_agent_tool("analyzer", description="Analyze a text."),
                sub_agent_tool("critic", name="critic", persistent=True),
                sub_agent_tool("checker"),
            ],
        )
    )
    agents.register(define_agent("analyzer", system_prompt="Analyze.", max_steps=3))
    agents.register(define_agent("critic", system_prompt="Criticize.", max_steps=2))
    agents.register(
        define_agent(
            "checker",
            system_prompt="Check with the user.",
            tools=[Tool("approve", "Ask the user to approve.")],
        )
    )
    return agents


def llm_adapter(env: Any, ctx: Any) -> Any:
    return OpenAIChatCompletions.from_env(env, model="m")


def seen(_ctx: Any) -> None:
    COMPLETED.append(_ctx)


COMPLETED: list[Any] = []
Server = create_agent_server(
    agents=registry(),
    llm_adapter=llm_adapter,
    sub_agent_namespace=lambda env: env.AGENTS,
    hooks=ServerHooks(on_complete=seen),
    endpoints={"/health": lambda request, ctx: _health(ctx)},
    name="Server",
)


async def _health(ctx: Any) -> Any:
    from workers import Response

    return Response(
        json.dumps({"status": "healthy", "isExecuting": ctx.execution_state.is_executing})
    )


@contextmanager
def fresh_llm() -> Iterator[FakeLLM]:
    """A fake OpenAI-compatible provider, with the tool and hook records emptied first."""
    LOOKUPS.clear()
    COMPLETED.clear()
    with FakeLLM(api_key="k") as server:
        yield server


async def harness(doemu_harness: HarnessFactory, llm: FakeLLM) -> Any:
    return await doemu_harness(
        {"AGENTS": Server}, vars={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": f"{llm.url}/v1"}
    )


async def _has_delta(s: Session) -> bool:
    return any(c["chunk"]["type"] == "text_delta" for c in await s.history())


async def _deltas(s: Session, n: int) -> bool:
    return sum(c["chunk"]["type"] == "text_delta" for c in await s.history()) >= n
