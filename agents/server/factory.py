"""``create_agent_server``: the seed's composition API — a Durable Object class from config.

The class it returns is an :class:`~.server.AgentServer` subclass with the configuration as
class options; export it from the Worker's entry module under the name the wrangler binding's
``class_name`` gives, and route requests to ``namespace.idFromName("session:<id>")``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from .chat_routes import ChatHandler
from .definition import AgentDefinition
from .errors import AgentNotFoundError
from .hooks import EndpointHandler, LLMAdapterFactory, ServerHooks
from .registry import AgentFactoryContext, AgentRegistry
from .rollup import UsageStoreFactory
from .server import AgentServer
from .workspace import WorkspacesFactory

__all__ = ["create_agent_server"]

AgentResolver = Callable[[str, AgentFactoryContext], Any]


class _ResolverRegistry(AgentRegistry):
    """A resolver function standing in for a registry: every type may exist until asked."""

    def __init__(self, resolver: AgentResolver) -> None:
        super().__init__()
        self._resolver = resolver

    def has(self, agent_type: str) -> bool:
        return True

    def get(self, agent_type: str) -> AgentDefinition:
        raise AgentNotFoundError(agent_type, [])

    async def resolve(self, agent_type: str, context: AgentFactoryContext) -> AgentDefinition:
        found = self._resolver(agent_type, context)
        if inspect.isawaitable(found):
            found = await found
        if not isinstance(found, AgentDefinition):
            raise AgentNotFoundError(agent_type, [])
        return found


def create_agent_server(
    *,
    agents: AgentRegistry | AgentResolver,
    llm_adapter: LLMAdapterFactory,
    hooks: ServerHooks | None = None,
    endpoints: Mapping[str, EndpointHandler] | None = None,
    sub_agent_namespace: Callable[[Any], Any] | None = None,
    auto_resume: bool = False,
    auto_resume_wake_ms: int = 1_000,
    interrupt_observation_deadline_ms: int = 5_000,
    heartbeat_ms: int = 30_000,
    logger: Any = None,
    usage_store: UsageStoreFactory | None = None,
    chat_handler: ChatHandler | None = None,
    workspaces: WorkspacesFactory | None = None,
    name: str = "AgentServer",
) -> type[AgentServer]:
    """An agent-server Durable Object class (see the module docstring).

    The seed's options, PEP 8 names: ``agents`` (a registry or a resolver), ``llm_adapter``,
    ``hooks``, ``endpoints``, ``sub_agent_namespace``, ``usage_store`` (``(env,
    UsageStoreContext) -> UsageStore``; default: the object's own tables), ``logger``
    (default: the ``agents.server`` logging logger), ``chat_handler`` (``(request,
    ChatContext) -> Response`` for the v7 chat routes; default: :func:`handle_chat_stream`, the
    AI SDK's UI-message stream; :func:`session_chat_handler` answers in the ``/sse`` events).
    ``workspaces`` (``(env, WorkspaceContext) -> WorkspaceRegistry`` for ``/workspace``, e.g.
    :class:`~.workspace.SessionWorkspaces`; default: none). Beside them: ``auto_resume``
    (with ``auto_resume_wake_ms``), ``interrupt_observation_deadline_ms``, ``heartbeat_ms`` and
    the class ``name``."""
    registry = agents if isinstance(agents, AgentRegistry) else _ResolverRegistry(agents)
    options = {
        "registry": registry,
        "llm_adapter": staticmethod(llm_adapter),
        "hooks": hooks or ServerHooks(),
        "endpoints": dict(endpoints or {}),
        "sub_agent_namespace": staticmethod(sub_agent_namespace) if sub_agent_namespace else None,
        "auto_resume": auto_resume,
        "auto_resume_wake_ms": auto_resume_wake_ms,
        "interrupt_observation_deadline_ms": interrupt_observation_deadline_ms,
        "heartbeat_ms": heartbeat_ms,
        "logger": logger,
        "usage_store_factory": staticmethod(usage_store) if usage_store else None,
        "chat_handler": staticmethod(chat_handler) if chat_handler else None,
        "workspaces_factory": staticmethod(workspaces) if workspaces else None,
        "__module__": __name__,
    }
    return type(name, (AgentServer,), options)
