"""Transcript repair before every model call (the SDK's ``repairInterruptedToolParts``).

A tool call whose process died before its result was recorded leaves a part with no settled
state (``input-available``, ``input-streaming``). Sent to a provider as is, that transcript is
refused (a tool call without a result), and deleting the part would let the model silently run
the tool again. So before every turn such a part is *repaired* — by default into an
``output-error`` saying the call was interrupted — and the corrected transcript persisted in one
write. Left alone: settled parts, parts still waiting for a client (an ``approval-requested``
part, an ``input-available`` part of a client tool the browser will answer), and an approved
call a continuation is about to run (``approval-responded`` in the last message, or on a
continuation turn), and a server tool call of the last message that the model loop of
:mod:`agents.providers` ran under the operation ledger (its ``callProviderMetadata`` names the
operation): the loop settles it from the ledger — its stored result, a safe re-run, or "may
have executed" — which is more than this repair can know.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from .parts import SETTLED_TOOL_STATES

__all__ = [
    "APPROVED_NOT_RUN_TEXT",
    "INTERRUPTED_TOOL_TEXT",
    "client_tool_names",
    "default_repair",
    "ledger_managed",
    "repair_interrupted_tool_parts",
    "tool_name",
]

INTERRUPTED_TOOL_TEXT: Final = "The tool call was interrupted before a result was recorded."
APPROVED_NOT_RUN_TEXT: Final = (
    "The tool call was approved but did not run before the next turn started."
)


def tool_name(part: Mapping[str, Any]) -> str | None:
    """``tool-<name>`` parts carry the name in their type; ``dynamic-tool`` parts in
    ``toolName``."""
    kind = part.get("type")
    if kind == "dynamic-tool":
        name = part.get("toolName")
        return name if isinstance(name, str) else None
    if isinstance(kind, str) and kind.startswith("tool-"):
        return kind[len("tool-") :]
    return None


def client_tool_names(client_tools: Iterable[Any] | None) -> frozenset[str]:
    """The names in a request's ``clientTools`` schemas: tools the browser resolves."""
    return frozenset(
        t["name"]
        for t in client_tools or ()
        if isinstance(t, Mapping) and isinstance(t.get("name"), str)
    )


def default_repair(part: Mapping[str, Any]) -> dict[str, Any]:
    """The SDK's default: an errored result naming what happened."""
    text = (
        APPROVED_NOT_RUN_TEXT
        if part.get("state") == "approval-responded"
        else INTERRUPTED_TOOL_TEXT
    )
    return {**part, "state": "output-error", "errorText": text}


def _awaits_client(part: Mapping[str, Any], client_tools: frozenset[str]) -> bool:
    state = part.get("state")
    if state == "approval-requested":
        return True
    return state == "input-available" and tool_name(part) in client_tools


def ledger_managed(part: Mapping[str, Any]) -> bool:
    """A server tool call the model loop runs under the operation ledger (it names the
    operation in ``callProviderMetadata``), still without its result."""
    meta = part.get("callProviderMetadata")
    inner = meta.get("agents") if isinstance(meta, Mapping) else None
    return (
        part.get("state") == "input-available"
        and isinstance(inner, Mapping)
        and bool(inner.get("opId"))
    )


def repair_interrupted_tool_parts(
    messages: Sequence[Mapping[str, Any]],
    *,
    client_tools: frozenset[str],
    repair_part: Callable[[dict[str, Any]], Mapping[str, Any]] = default_repair,
    repair_approval_responded: bool,
) -> tuple[list[Any], list[str]]:
    """The transcript with interrupted tool parts repaired, and the repaired call ids (empty:
    nothing to persist). ``repair_approval_responded``: no continuation will run approved calls
    (a turn that is not itself a continuation); the last message's are kept regardless."""
    repaired: list[Any] = []
    ids: list[str] = []
    for index, message in enumerate(messages):
        last = index == len(messages) - 1
        parts: list[Any] = []
        changed = False
        for part in message.get("parts") or ():
            call_id = part.get("toolCallId") if isinstance(part, Mapping) else None
            if (
                not isinstance(call_id, str)
                or tool_name(part) is None
                or part.get("state") in SETTLED_TOOL_STATES
            ):
                parts.append(part)
                continue
            if part.get("state") == "approval-responded":
                if not repair_approval_responded or last:
                    parts.append(part)
                    continue
                approval = part.get("approval")
                if isinstance(approval, Mapping) and approval.get("approved") is False:
                    parts.append({**part, "state": "output-denied"})
                    changed = True
                    ids.append(call_id)
                    continue
            if _awaits_client(part, client_tools) or (last and ledger_managed(part)):
                parts.append(part)
                continue
            parts.append(dict(repair_part(dict(part))))
            changed = True
            ids.append(call_id)
        repaired.append({**message, "parts": parts} if changed else message)
    return repaired, ids
