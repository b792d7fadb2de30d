"""The session stream's chunks, from the model loop's UI-message chunks.

The run itself is an ``AIChatAgent`` turn (so it is stored, resumed and recovered by the chat
layer); what the agent server's clients read is the seed's chunk vocabulary — ``text_delta``,
``tool_call_start``, ``tool_result``, ``step_completed`` … — each tagged with the session
(``agentId``) that produced it, so a parent's stream can carry its children's chunks between
``subagent_start`` and ``subagent_end``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..providers.output import CORRECTION_PART, OUTPUT_PART

__all__ = ["stream_chunks"]


def stream_chunks(chunk: Mapping[str, Any], agent_id: str, agent_type: str) -> list[dict[str, Any]]:
    """The stream chunks for one UI-message chunk (none for framing chunks)."""
    kind = chunk.get("type")
    base = {"agentId": agent_id, "agentType": agent_type}
    if kind == "start" and chunk.get("messageId"):  # the assistant message the run writes
        return [{"type": "message_start", "messageId": chunk["messageId"], **base}]
    if kind == "text-delta":
        return [{"type": "text_delta", "delta": str(chunk.get("delta", "")), **base}]
    if kind == "reasoning-delta":
        return [{"type": "thinking", "delta": str(chunk.get("delta", "")), **base}]
    if kind == "tool-input-available":
        return [
            {
                "type": "tool_call_start",
                "toolCallId": chunk.get("toolCallId"),
                "toolName": chunk.get("toolName"),
                "input": chunk.get("input"),
                **base,
            }
        ]
    if kind == "tool-output-available":
        return [
            {
                "type": "tool_result",
                "toolCallId": chunk.get("toolCallId"),
                "result": chunk.get("output"),
                **base,
            }
        ]
    if kind == "tool-output-error":
        return [
            {
                "type": "tool_result",
                "toolCallId": chunk.get("toolCallId"),
                "error": chunk.get("errorText"),
                **base,
            }
        ]
    if kind == "tool-output-denied":  # a person denied the call: it never ran
        return [
            {
                "type": "tool_result",
                "toolCallId": chunk.get("toolCallId"),
                "error": "The user denied this tool call.",
                "denied": True,
                **base,
            }
        ]
    if kind == "finish-step":
        return [{"type": "step_completed", **base}]
    if kind == OUTPUT_PART:  # the final answer, accepted by the output schema
        return [{"type": "output", "output": chunk.get("data"), **base}]
    if kind == CORRECTION_PART:  # refused: the model is told why (or the budget is spent)
        data: Mapping[str, Any] = chunk.get("data") or {}
        return [{"type": "output_rejected", "step": data.get("step"), "error": data.get("error"),
                 "retry": "correction" in data, **base}]  # fmt: skip
    return []
