"""The tools a run's model loop gets for an agent definition, with the server's context.

A definition's tools are written against the seed's contract: a tool's ``execute`` sees the
Worker's ``env`` directly (``ctx.env``), the session and run it serves, the server's logger, and
``ctx.record_metric``. The model loop (:mod:`agents.providers`) calls ``execute(args, ctx)`` with
its own :class:`~agents.providers.ToolContext`; each tool is wrapped here so the call gets a
:class:`~.contexts.ServerToolContext` instead — the loop's fields plus the server's. Sub-agent
tools become calls into sibling objects (:mod:`.subagents`).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import TYPE_CHECKING, Any

from ..providers import Tool, ToolContext
from .companions import companion_tools
from .contexts import ServerToolContext
from .definition import DEFAULT_SUB_AGENT_TIMEOUT_MS, AgentDefinition, ApprovalTool, SubAgentTool
from .subagents import sub_agent_as_tool

if TYPE_CHECKING:
    from .server import AgentServer

__all__ = ["served_tools"]


def served_tools(server: AgentServer, definition: AgentDefinition) -> list[Tool]:
    """``definition``'s tools for one run of ``server``'s session."""
    tools: list[Tool] = []
    for tool in definition.tools:
        if isinstance(tool, SubAgentTool):
            tools.append(sub_agent_as_tool(server, tool))
        elif isinstance(tool, ApprovalTool):  # the model loop asks a person before it runs it
            served = _with_server_context(server, definition, tool.tool)
            tools.append(dataclasses.replace(served, needs_approval=True))
        elif tool.execute is not None:
            tools.append(_with_server_context(server, definition, tool))
        else:
            tools.append(tool)  # a client tool: the browser answers it
    if definition.companion_types:  # persistent children: the seed's companion tools
        tools += companion_tools(server, definition.companion_types, DEFAULT_SUB_AGENT_TIMEOUT_MS)
    return tools


def _with_server_context(server: AgentServer, definition: AgentDefinition, tool: Tool) -> Tool:
    inner = tool.execute
    assert inner is not None

    async def execute(args: dict[str, Any], ctx: ToolContext) -> Any:
        record = server.session
        order = itertools.count()

        def record_metric(kind: str, name: str, value: float) -> None:
            key = f"{ctx.idempotency_key}:{next(order)}"  # a re-run writes the same rows
            server.record_metric(kind, name, value, key=key)

        served = ServerToolContext(
            ctx.agent,
            ctx.call_id,
            ctx.idempotency_key,
            env=server.env,
            session_id=record.session_id or server.name,
            run_id=record.run_id or "",
            agent_type=definition.name,
            logger=server.log,
            record_metric=record_metric,
        )
        began = server._core.now()
        ok = False
        try:
            result = await inner(args, served)
            ok = True
            return result
        finally:
            server.usage_event({"kind": "tool", "toolName": tool.name, "toolCallId": ctx.call_id,
                                "success": ok, "durationMs": int(server._core.now() - began),
                                "at": int(server._core.now())})  # fmt: skip

    return dataclasses.replace(tool, execute=execute)
