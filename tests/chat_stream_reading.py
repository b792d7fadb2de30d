"""Shared by the producer and scripted-model tests: a hello-world reply, a user message, and
reading UI-message streams back (collecting chunks, reading a body, decoding its SSE)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agents.chat.transcript.chunks import SseDecoder

__all__ = ["HELLO", "Chunk", "collect", "decode", "read_events", "user"]


Chunk = dict[str, Any]

HELLO = [
    {"type": "start"},
    {"type": "start-step"},
    {"type": "text-start", "id": "txt-0"},
    {"type": "text-delta", "id": "txt-0", "delta": "Hello"},
    {"type": "text-delta", "id": "txt-0", "delta": ", "},
    {"type": "text-delta", "id": "txt-0", "delta": "world"},
    {"type": "text-end", "id": "txt-0"},
    {"type": "finish-step"},
    {"type": "finish", "finishReason": "stop"},
]


def user(text: str) -> dict[str, Any]:
    return {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}


async def collect(chunks: AsyncIterator[Chunk]) -> list[Chunk]:
    return [chunk async for chunk in chunks]


async def read_events(body: Any) -> list[bytes]:
    """Every read of a body, as bytes (one SSE event per read when streamed by these helpers)."""
    return [bytes(piece) async for piece in body]


def decode(events: list[bytes]) -> list[Chunk]:
    decoder = SseDecoder()
    chunks = [chunk for event in events for chunk in decoder.feed(event)]
    return chunks + decoder.finish()
