"""What an agent *is* for the agent server: a prompt, tools, a step budget — and sub-agents.

A definition is data: the server resolves it by type from its registry for every run, inside
the object, and hands it to the model loop of :mod:`agents.providers`. A sub-agent is a tool
whose call runs another registered agent in a sibling object (see :mod:`.subagents`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..providers import Tool

__all__ = ["AgentDefinition", "SubAgentTool", "define_agent", "sub_agent_tool"]


@dataclass(frozen=True, slots=True)
class SubAgentTool:
    """A tool that runs agent ``agent_type`` in its own object; its output is the tool result.

    ``persistent``: the child keeps one session per (parent session, ``name``), so consulting
    it again continues its conversation; otherwise each call gets a fresh child session.
    """

    name: str
    agent_type: str
    description: str = ""
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        }
    )
    persistent: bool = False


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    """One agent type: ``name`` (its type in the registry), ``system_prompt``, ``tools`` (model
    loop tools and sub-agent tools), ``max_steps``, and a free ``description``."""

    name: str
    system_prompt: str = ""
    tools: Sequence[Tool | SubAgentTool] = ()
    max_steps: int = 10
    description: str = ""


def define_agent(
    name: str,
    *,
    system_prompt: str = "",
    tools: Sequence[Tool | SubAgentTool] = (),
    max_steps: int = 10,
    description: str = "",
) -> AgentDefinition:
    """An :class:`AgentDefinition` (``defineAgent`` of the seed), checked."""
    if not name or not isinstance(name, str):
        raise ValueError(f"an agent needs a non-empty name, got {name!r}")
    if not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be a whole number ≥ 1, got {max_steps!r}")
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise ValueError(f"agent {name!r} has two tools with one name: {sorted(names)}")
    return AgentDefinition(name, system_prompt, tuple(tools), max_steps, description)


def sub_agent_tool(
    agent_type: str,
    *,
    name: str | None = None,
    description: str = "",
    persistent: bool = False,
) -> SubAgentTool:
    """A tool (named ``name``, default ``agent_type``) that delegates to ``agent_type``."""
    return SubAgentTool(name or agent_type, agent_type, description, persistent=persistent)
