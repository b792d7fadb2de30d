"""Tools the model may call, run through the agent's operation ledger.

A tool with ``execute`` runs on the server; one without is answered by the browser (a client
tool: the reply ends with ``finishReason: "tool-calls"`` and the client's result continues the
turn). Every server execution goes through :meth:`Agent.operation` under an id derived from its
position in the turn (assistant message, step, index) and its arguments — so a turn recovered
after a kill never silently runs a side effect twice: a completed call returns its stored
result, a call that may have run tells the model so (``output-error`` with the ledger's "may
have executed; verify before retrying"), and an ``idempotent`` tool — one that passes
``ctx.idempotency_key`` to an upstream that collapses duplicates — simply runs again.

A server tool with ``needs_approval`` (True, or a function of the call's arguments) is not run
when the model calls it: the reply asks the person first (the AI SDK's ``needsApproval`` and its
``tool-approval-request`` chunk) and ends; the answer (``cf_agent_tool_approval``) is stored in
the message, and the continuation runs an approved call through the same ledger — so an approval
answered twice, or a continuation recovered after a kill, never runs the side effect twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .base import ToolSpec

__all__ = [
    "PENDING",
    "ApprovalCheck",
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "ToolPending",
    "run_tool",
]


class ToolPending:
    """What ``execute`` returns when the call goes on elsewhere and has no result yet (a
    sub-agent waiting for its own client): the reply ends there, the call's ledger entry stays
    ``started``, and a later continuation runs ``execute`` again to settle it."""

    def __repr__(self) -> str:
        return "PENDING"


#: The one :class:`ToolPending` value.
PENDING = ToolPending()


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What ``execute`` gets beside the arguments."""

    agent: Any
    call_id: str
    #: The ledger's operation id: pass it upstream as the idempotency key.
    idempotency_key: str

    @property
    def env(self) -> Any:
        """The Worker's ``env`` (bindings, vars, secrets): the agent's, at hand for the tool."""
        return self.agent.env


ToolFn = Callable[[dict[str, Any], ToolContext], Awaitable[Any]]
#: ``needs_approval`` as a function: the call's arguments → whether a person must approve it.
ApprovalCheck = Callable[[dict[str, Any]], bool]


@dataclass(frozen=True, slots=True)
class Tool(ToolSpec):
    """A tool: its model-facing spec (name, description, JSON-schema parameters), and
    ``execute`` unless the browser answers it."""

    execute: ToolFn | None = None
    #: ``execute`` passes ``ctx.idempotency_key`` to an upstream that collapses duplicates, so
    #: running it again after a kill is safe.
    idempotent: bool = False
    #: A person approves each call before it runs (True), or the calls this function of the
    #: arguments says (the AI SDK's ``needsApproval``). Only a server tool can be gated: a client
    #: tool's call already waits for the browser.
    needs_approval: bool | ApprovalCheck = False

    def __post_init__(self) -> None:
        gated = self.needs_approval
        if not isinstance(gated, bool) and not callable(gated):
            raise TypeError(
                f"tool {self.name!r}: needs_approval must be True/False or a function of the "
                f"call's arguments, got {type(gated).__name__}"
            )
        if gated is not False and self.execute is None:
            raise ValueError(
                f"tool {self.name!r} has needs_approval but no execute: a client tool's call "
                "already waits for the browser"
            )

    @property
    def spec(self) -> ToolSpec:
        return self

    def requires_approval(self, args: Mapping[str, Any]) -> bool:
        """Whether the call with ``args`` waits for a person's approval before it runs."""
        gated = self.needs_approval
        if isinstance(gated, bool):
            return gated
        return bool(gated(dict(args)))


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    ok: bool
    #: The output (``ok``) or the error text the model reads.
    value: Any
    status: str


def tool_op(agent: Any, tool: Tool, args: Mapping[str, Any], position: str) -> Any:
    return agent.operation(f"tool:{tool.name}", dict(args), turn=position,
                           idempotent=tool.idempotent)  # fmt: skip


async def run_tool(
    agent: Any, tool: Tool, call_id: str, args: Mapping[str, Any], position: str
) -> ToolOutcome:
    """Run ``tool`` once per ledger entry; what it returned, or why the model gets no result."""
    assert tool.execute is not None
    op = tool_op(agent, tool, args, position)
    try:
        async with op:
            if op.replayed:
                return ToolOutcome(True, op.result, "replayed")
            if op.ambiguous:
                return ToolOutcome(False, op.ambiguity, "ambiguous")
            result = await tool.execute(dict(args), ToolContext(agent, call_id, op.id))
            if isinstance(result, ToolPending):
                op.defer()
                return ToolOutcome(False, None, "pending")
            op.complete(result)
            return ToolOutcome(True, result, str(op.status))
    except Exception as exc:  # the tool failed: the model reads why (the ledger says failed)
        return ToolOutcome(False, f"{type(exc).__name__}: {exc}", "failed")
