"""``AIChatAgent`` and the chat layer: durable chat turns, resumable streams, the SDK's chat
protocol (work in progress: the pieces land module by module)."""

from __future__ import annotations

__all__: list[str] = []
