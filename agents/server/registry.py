"""The agent registry: which agent types a server can run, static or built per session.

Static registrations are definitions; factories build one per run from an
:class:`AgentFactoryContext` (``env``, session, run, user) — for agents that need bindings or
per-user configuration. Resolution tries the factory first, then the static definition, and an
unknown type raises :class:`AgentNotFoundError` naming the types that exist.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .definition import AgentDefinition
from .errors import AgentNotFoundError

__all__ = ["AgentFactory", "AgentFactoryContext", "AgentRegistry"]


@dataclass(frozen=True, slots=True)
class AgentFactoryContext:
    env: Any
    session_id: str
    run_id: str
    user_id: str | None = None


AgentFactory = Callable[[AgentFactoryContext], AgentDefinition | Awaitable[AgentDefinition]]


class AgentRegistry:
    """Agent types by name (the seed's ``AgentRegistry``, PEP 8 names)."""

    def __init__(self) -> None:
        self._static: dict[str, AgentDefinition] = {}
        self._factories: dict[str, AgentFactory] = {}

    def register(self, definition: AgentDefinition) -> None:
        """Register a static definition; its name must be new."""
        if self.has(definition.name):
            raise ValueError(f"agent type {definition.name!r} is registered already")
        self._static[definition.name] = definition

    def register_factory(self, agent_type: str, factory: AgentFactory) -> None:
        """Register ``factory(ctx) -> AgentDefinition`` (may be async) under ``agent_type``."""
        if self.has(agent_type):
            raise ValueError(f"agent type {agent_type!r} is registered already")
        self._factories[agent_type] = factory

    def replace(self, definition: AgentDefinition) -> bool:
        """Overwrite a static definition; whether one existed. A factory is not replaced."""
        if definition.name in self._factories:
            raise ValueError(
                f"agent type {definition.name!r} is a factory: unregister() it, then "
                "register_factory() the new one"
            )
        existed = definition.name in self._static
        self._static[definition.name] = definition
        return existed

    async def resolve(self, agent_type: str, context: AgentFactoryContext) -> AgentDefinition:
        """The definition for ``agent_type``: its factory's, else the static one."""
        factory = self._factories.get(agent_type)
        if factory is not None:
            built = factory(context)
            if inspect.isawaitable(built):
                built = await built
            if not isinstance(built, AgentDefinition):
                raise TypeError(
                    f"the factory of agent type {agent_type!r} returned "
                    f"{type(built).__name__}, not an AgentDefinition"
                )
            return built
        return self.get(agent_type)

    def get(self, agent_type: str) -> AgentDefinition:
        """The static definition (factories need :meth:`resolve`)."""
        try:
            return self._static[agent_type]
        except KeyError:
            raise AgentNotFoundError(agent_type, self.registered_types()) from None

    def has(self, agent_type: str) -> bool:
        return agent_type in self._static or agent_type in self._factories

    def unregister(self, agent_type: str) -> bool:
        return bool(self._static.pop(agent_type, None) or self._factories.pop(agent_type, None))

    def registered_types(self) -> list[str]:
        return sorted({*self._static, *self._factories})

    def clear(self) -> None:
        self._static.clear()
        self._factories.clear()
