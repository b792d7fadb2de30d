"""What a run's assistant message says: its text, the calls waiting for a client, and the
calls waiting for a person's approval."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..providers.output import OUTPUT_PART

__all__ = [
    "output_of",
    "pending_approvals",
    "pending_client_calls",
    "step_has_server_results",
    "text_of",
]


def text_of(message: Mapping[str, Any] | None) -> str:
    parts = (message or {}).get("parts") or ()
    return "".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")


def output_of(message: Mapping[str, Any] | None) -> Any:
    """A run's output: the validated value of an agent with an output schema (the message's
    structured-output part), else the answer's text."""
    for part in reversed((message or {}).get("parts") or ()):
        if isinstance(part, Mapping) and part.get("type") == OUTPUT_PART:
            return part.get("data")
    return text_of(message)


def pending_client_calls(message: Mapping[str, Any] | None) -> dict[str, Any]:
    """The calls of ``message`` waiting for a client (an ``input-available`` part with no
    ledger operation: the model loop runs every server tool itself)."""
    pending: dict[str, Any] = {}
    for part in (message or {}).get("parts") or ():
        kind = str(part.get("type", ""))
        meta = (part.get("callProviderMetadata") or {}).get("agents") or {}
        if (
            kind.startswith("tool-")
            and part.get("state") == "input-available"
            and not meta.get("opId")
        ):
            pending[str(part["toolCallId"])] = {"toolName": kind[5:], "input": part.get("input")}
    return pending


def pending_approvals(message: Mapping[str, Any] | None) -> dict[str, Any]:
    """The server tool calls of ``message`` waiting for a person's approval (``Tool``'s
    ``needs_approval``: the model loop asked, the part is ``approval-requested``)."""
    pending: dict[str, Any] = {}
    for part in (message or {}).get("parts") or ():
        kind = str(part.get("type", ""))
        if kind.startswith("tool-") and part.get("state") == "approval-requested":
            pending[str(part["toolCallId"])] = {
                "toolName": kind[5:],
                "input": part.get("input"),
                "approval": True,
            }
    return pending


def step_has_server_results(message: Mapping[str, Any] | None) -> bool:
    """Whether the last step of ``message`` ran server tools (calls with a ledger operation
    and a result) — with client calls still pending, the seed's ``suspended_step_partial``."""
    parts = list((message or {}).get("parts") or ())
    starts = [i for i, p in enumerate(parts) if p.get("type") == "step-start"]
    for part in parts[starts[-1] if starts else 0 :]:
        meta = (part.get("callProviderMetadata") or {}).get("agents") or {}
        if meta.get("opId") and str(part.get("state", "")).startswith("output-"):
            return True
    return False
