"""The resumable streams' tables and their row types (the store is
:mod:`agents.chat.streams.resumable`).

**Tables.** ``cf_ai_chat_stream_metadata`` has one row per turn stream: ``status`` is
``streaming``, ``completed`` or ``error``; ``request_id`` the turn's request; ``message_id``
the assistant message it produces (so a recovered partial lands on the right message);
``is_continuation``, ``origin_message_ids`` (JSON, echoed as ``messageIds`` on replayed
terminals), ``seq_base`` (the ``seq`` of its first chunk), ``outcome`` (how it ended, unless
normally); times in ms. ``cf_ai_chat_stream_chunks`` holds *segments*: ``chunk_index`` counts
segments per stream, and a segment's ``body`` is one chunk body, or a JSON array of bodies when
several were flushed together (the SDK's packing: a flush is one row write, not ten).
Chunk bodies are the exact JSON texts that were broadcast; nothing here re-serialises them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Literal

from ...core.sql import execute
from ..protocol.frames import Outcome

__all__ = [
    "SCHEMA",
    "ActiveStream",
    "StreamRecord",
    "StreamStatus",
    "create_tables",
    "stored_chunk_bytes",
    "unpack_segment",
]

StreamStatus = Literal["streaming", "completed", "error"]

SCHEMA: Final[tuple[str, ...]] = (
    # The legacy SDK's columns first, in its order; then what 0.32.0 keeps in stream metadata.
    """CREATE TABLE IF NOT EXISTS cf_ai_chat_stream_metadata (
  id TEXT PRIMARY KEY,
  request_id TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('streaming', 'completed', 'error')),
  created_at INTEGER NOT NULL,
  completed_at INTEGER,
  message_id TEXT,
  is_continuation INTEGER NOT NULL DEFAULT 0,
  origin_message_ids TEXT,
  seq_base INTEGER NOT NULL DEFAULT 0,
  outcome TEXT,
  error_message TEXT,
  updated_at INTEGER NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS idx_stream_metadata_request_id "
    "ON cf_ai_chat_stream_metadata(request_id, created_at)",
    """CREATE TABLE IF NOT EXISTS cf_ai_chat_stream_chunks (
  id TEXT PRIMARY KEY,
  stream_id TEXT NOT NULL,
  body TEXT NOT NULL,
  chunk_index INTEGER NOT NULL,
  created_at INTEGER NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS idx_stream_chunks_stream_id "
    "ON cf_ai_chat_stream_chunks(stream_id, chunk_index)",
)

#: Cloudflare's limit on bound parameters per statement.


def create_tables(sql: Any) -> None:
    """Run :data:`SCHEMA` on ``sql`` (``ctx.storage.sql``); idempotent."""
    for statement in SCHEMA:
        execute(sql, statement)


def stored_chunk_bytes(body: str) -> int:
    """``storedChunkBytes``: UTF-8 bytes of ``JSON.stringify(body)`` (the escaped form)."""
    return len(json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def unpack_segment(segment: str) -> list[str]:
    """A stored segment's chunk bodies: a JSON array of bodies, else the body itself (a chunk
    body is a JSON object's text, so it never reads as an array)."""
    try:
        value = json.loads(segment)
    except ValueError:
        return [segment]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    return [segment]


@dataclass(frozen=True, slots=True)
class StreamRecord:
    """One ``cf_ai_chat_stream_metadata`` row."""

    id: str
    request_id: str
    status: StreamStatus
    message_id: str | None
    continuation: bool
    origin_message_ids: tuple[str, ...] | None
    seq_base: int
    outcome: Outcome | None
    error_message: str | None
    created_at: int
    completed_at: int | None
    updated_at: int

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> StreamRecord:
        origin: tuple[str, ...] | None = None
        if row.get("origin_message_ids"):
            try:
                ids = json.loads(row["origin_message_ids"])
                origin = tuple(str(i) for i in ids) if isinstance(ids, list) and ids else None
            except ValueError:
                origin = None
        return cls(
            id=str(row["id"]),
            request_id=str(row["request_id"]),
            status=row["status"],
            message_id=row.get("message_id"),
            continuation=bool(row.get("is_continuation")),
            origin_message_ids=origin,
            seq_base=int(row.get("seq_base") or 0),
            outcome=row.get("outcome"),
            error_message=row.get("error_message"),
            created_at=int(row["created_at"]),
            completed_at=None if row.get("completed_at") is None else int(row["completed_at"]),
            updated_at=int(row["updated_at"]),
        )


@dataclass(frozen=True, slots=True)
class ActiveStream:
    """The stream a connecting client is told about (``cf_agent_stream_resuming``).

    ``live`` is False for a stream restored on wake: its producer died with the old process.
    """

    stream_id: str
    request_id: str
    continuation: bool
    live: bool
    message_id: str | None
    origin_message_ids: tuple[str, ...] | None
