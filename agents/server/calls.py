"""What a run's assistant message says: its text, and the calls waiting for a client."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["pending_client_calls", "text_of"]


def text_of(message: Mapping[str, Any] | None) -> str:
    parts = (message or {}).get("parts") or ()
    return "".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")


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
