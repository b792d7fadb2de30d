"""UI-message chunk builders shared by the message tests: a plain reply and a feeder."""

from __future__ import annotations

from typing import Any

from agents.chat.transcript.messages import AssistantMessage

__all__ = ["feed", "text_reply"]


Chunks = list[dict[str, Any]]


def text_reply(*deltas: str, finish: str = "stop") -> Chunks:
    """What ``streamText().toUIMessageStream()`` emits for a plain reply (§4.1)."""
    return [
        {"type": "start"},
        {"type": "start-step"},
        {"type": "text-start", "id": "t0"},
        *({"type": "text-delta", "id": "t0", "delta": d} for d in deltas),
        {"type": "text-end", "id": "t0"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": finish},
    ]


def feed(message: AssistantMessage, chunks: Chunks) -> Chunks:
    out: Chunks = []
    for chunk in chunks:
        out += message.consume(chunk)
    return out
