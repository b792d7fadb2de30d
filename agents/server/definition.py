"""What an agent *is* for the agent server: a prompt, tools, a step budget — and sub-agents.

A definition is data: the server resolves it by type from its registry for every run, inside
the object, and hands it to the model loop of :mod:`agents.providers`. A sub-agent is a tool
whose call runs another registered agent in a sibling object (see :mod:`.subagents`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..providers import OutputSchema, Tool, output_schema

__all__ = [
    "AgentDefinition",
    "ApprovalTool",
    "SubAgentTool",
    "define_agent",
    "needs_approval",
    "sub_agent_tool",
]


#: A sub-agent tool's input when none is given: one message for the child.
MESSAGE_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"message": {"type": "string"}},
    "required": ["message"],
}
#: The seed's default wait for a sub-agent: 10 minutes.
DEFAULT_SUB_AGENT_TIMEOUT_MS = 600_000


@dataclass(frozen=True, slots=True)
class SubAgentTool:
    """A tool that runs agent ``agent_type`` in its own object; its output is the tool result.

    ``parameters`` is the JSON Schema of the call's input (the seed's ``inputSchema``); the
    child is asked the ``message`` when the input is just that, else the input as JSON.
    ``timeout_ms``: how long the parent waits for the child's run to end before it aborts it
    and the call fails (a child waiting for its own client suspends the parent instead).
    ``persistent``: the child keeps one session per (parent session, ``name``), so consulting
    it again continues its conversation; otherwise each call gets a fresh child session.
    """

    name: str
    agent_type: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: dict(MESSAGE_SCHEMA))
    persistent: bool = False
    timeout_ms: int = DEFAULT_SUB_AGENT_TIMEOUT_MS


@dataclass(frozen=True, slots=True)
class ApprovalTool:
    """A server tool that runs only after a person approved the call (the AI SDK's
    ``needsApproval``; the same as ``Tool(..., needs_approval=True)``): the run suspends at the
    call (``suspended_approval``), the client answers ``{approved, reason?}``
    (``submit-tool-result``, ``/resume``'s ``approvals``, or the AI SDK's
    ``addToolApprovalResponse``), and an approved call runs here, through the ledger, as the run
    goes on; a denied one never runs and the model reads the denial."""

    tool: Tool

    @property
    def name(self) -> str:
        return self.tool.name


def needs_approval(tool: Tool) -> ApprovalTool:
    """``tool`` (a server tool, with ``execute``) gated by a person's approval of each call."""
    if tool.execute is None:
        raise ValueError(f"tool {tool.name!r} has no execute: a client tool needs no approval")
    return ApprovalTool(tool)


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    """One agent type: ``name`` (its type in the registry), ``system_prompt``, ``tools`` (model
    loop tools and sub-agent tools), ``max_steps``, a free ``description``, the agent types
    it may keep as persistent children through the companion tools
    (``persistent_sub_agents``, besides those of its persistent sub-agent tools), and the seed's
    ``outputSchema`` (``output_schema``): a run's output is then the JSON value of its final
    answer, checked against it, instead of the answer's text."""

    name: str
    system_prompt: str = ""
    tools: Sequence[Tool | SubAgentTool | ApprovalTool] = ()
    max_steps: int = 10
    description: str = ""
    persistent_sub_agents: Sequence[str] = ()
    output_schema: OutputSchema | None = None

    @property
    def approval_tools(self) -> dict[str, Tool]:
        """The tools gated by an approval (of every call, or of those their function names),
        by name."""
        gated = {t.name: t.tool for t in self.tools if isinstance(t, ApprovalTool)}
        return gated | {
            t.name: t for t in self.tools if isinstance(t, Tool) and t.needs_approval is not False
        }

    @property
    def companion_types(self) -> list[str]:
        """The agent types its companion tools may spawn (none: it gets no companion tools)."""
        types = [t.agent_type for t in self.tools if isinstance(t, SubAgentTool) and t.persistent]
        return sorted({*types, *self.persistent_sub_agents})


def define_agent(
    name: str,
    *,
    system_prompt: str = "",
    tools: Sequence[Tool | SubAgentTool | ApprovalTool] = (),
    max_steps: int = 10,
    description: str = "",
    persistent_sub_agents: Sequence[str] = (),
    output_schema: Any = None,
) -> AgentDefinition:
    """An :class:`AgentDefinition` (``defineAgent`` of the seed), checked. ``output_schema``:
    a JSON Schema, a pydantic model class, or an :class:`~agents.providers.OutputSchema`
    (:func:`~agents.providers.output_schema` names it or asks for OpenAI's ``strict`` mode)."""
    if not name or not isinstance(name, str):
        raise ValueError(f"an agent needs a non-empty name, got {name!r}")
    if not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be a whole number ≥ 1, got {max_steps!r}")
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise ValueError(f"agent {name!r} has two tools with one name: {sorted(names)}")
    reserved = [n for n in names if n.startswith("companion__")]
    if reserved:
        raise ValueError(
            f"agent {name!r}: tool names starting companion__ are the companion tools' "
            f"(injected for agents with persistent children): {reserved}"
        )
    if isinstance(persistent_sub_agents, str) or not all(
        isinstance(t, str) and t for t in persistent_sub_agents
    ):
        raise ValueError(f"persistent_sub_agents must be agent type names, got "
                         f"{persistent_sub_agents!r}")  # fmt: skip
    schema = _output_schema(name, output_schema)
    return AgentDefinition(name, system_prompt, tuple(tools), max_steps, description,
                           tuple(persistent_sub_agents), schema)  # fmt: skip


def _output_schema(agent: str, spec: Any) -> OutputSchema | None:
    if spec is None:
        return None
    try:
        return output_schema(spec)
    except ValueError as exc:
        raise ValueError(f"agent {agent!r}: {exc}") from None


def sub_agent_tool(
    agent: str | AgentDefinition,
    input_schema: Any = None,
    *,
    name: str | None = None,
    description: str = "",
    timeout_ms: int = DEFAULT_SUB_AGENT_TIMEOUT_MS,
    persistent: bool = False,
) -> SubAgentTool:
    """A tool (named ``name``, default the agent's type) that delegates to ``agent`` — a
    registered type or its definition — in a sibling object (the seed's
    ``createSubAgentTool(agent, inputSchema, {description, timeoutMs})``).

    ``input_schema`` is a JSON Schema object, or a pydantic model class (its JSON schema is
    used); None: ``{message: string}``. The call's arguments are checked against it (required
    properties, their JSON types) before any child starts; a mismatch is a tool error the model
    reads."""
    agent_type = agent.name if isinstance(agent, AgentDefinition) else agent
    if not isinstance(agent_type, str) or not agent_type:
        raise ValueError(f"a sub-agent tool needs an agent type or definition, got {agent!r}")
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 1:
        raise ValueError(f"timeout_ms must be a whole number of ms ≥ 1, got {timeout_ms!r}")
    schema = _json_schema(input_schema)
    if not description and isinstance(agent, AgentDefinition):
        description = agent.description
    return SubAgentTool(name or agent_type, agent_type, description, schema, persistent,
                        timeout_ms)  # fmt: skip


def _json_schema(input_schema: Any) -> dict[str, Any]:
    if input_schema is None:
        return dict(MESSAGE_SCHEMA)
    as_schema = getattr(input_schema, "model_json_schema", None)  # a pydantic model class
    schema = as_schema() if callable(as_schema) else input_schema
    if not isinstance(schema, Mapping) or schema.get("type", "object") != "object":
        raise ValueError(
            "a sub-agent's input_schema must be a JSON Schema of an object (or a pydantic "
            f"model), got {input_schema!r}"
        )
    return {"type": "object", **dict(schema)}
