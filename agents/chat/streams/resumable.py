"""Resumable chat streams: every chunk a turn broadcasts, kept until its message is persisted.

A client that reconnects mid-turn (or after a restart) acknowledges ``cf_agent_stream_resuming``
and is sent every stored chunk again, then either "keep listening" or "done" (research §1.6).
:class:`ResumableStreams` is the store behind that: ``ResumableStream`` of ``agents`` 0.32.0 on
DESIGN.md's tables. Clients never see tables; they see the frames, and those are the published
package's byte for byte (:mod:`agents.chat.requests.replay` builds them from this store).

**Tables** and row types: :mod:`agents.chat.streams.rows`.

**Buffering (§3.4).** Chunks are buffered and flushed as one segment when the buffer reaches 10
chunks; before adding when it already holds 100, or when the new chunk would take it past
512,000 bytes (a big chunk starts its own segment); immediately when the caller asks (after
``tool-output-*`` chunks, so a tool result is never lost); and by every lifecycle call and replay.
A chunk over 1,800,000 bytes is not stored at all (still broadcast, without ``seq``). Sizes are
UTF-8 bytes of the body as ``JSON.stringify`` escapes it. Unflushed chunks are lost in a crash,
as on Cloudflare.

**Lifecycle (§3.5).** :meth:`start` flushes, numbers the new stream after any earlier stream of
the same request (``seq_base``), reclaims leftovers — finished rows, and ``streaming`` rows
idle for over an hour — and inserts the row. :meth:`finish` ends the producer but leaves the row
``streaming``: the agent persists the assistant message and calls :meth:`cutover` right after,
with no ``await`` between the two, so the message write, the settlement and the deletion of the
stream's rows land in one implicit transaction (on doemu and on Cloudflare alike, storage writes
coalesce until the next ``await``). A crash therefore leaves either the live stream (evidence
for recovery) or the persisted message, never neither. Errored streams keep their rows (the
terminal replay needs them) until the next :meth:`start`. On wake, :meth:`restore` makes the
newest ``streaming`` row the active stream, not live: an orphan whose producer died.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, ClassVar

from ...core.protocol import dumps
from ...core.sql import delete_in, execute, query_rows
from ..protocol.frames import Outcome
from .rows import (
    SCHEMA,
    ActiveStream,
    StreamRecord,
    StreamStatus,
    create_tables,
    stored_chunk_bytes,
    unpack_segment,
)

__all__ = [
    "SCHEMA",
    "ActiveStream",
    "ResumableStreams",
    "StreamRecord",
    "StreamStatus",
    "create_tables",
    "stored_chunk_bytes",
]

_log = logging.getLogger("agents.chat")

_NEWEST_FIRST = "ORDER BY created_at DESC, rowid DESC"


class ResumableStreams:
    """The chat's stream chunks and metadata on ``ctx.storage.sql`` (see the module docstring).

    ``now_ms`` is the clock (``Date.now``), ``new_id`` makes stream and chunk ids (a nanoid).
    Create the tables first (:data:`SCHEMA`), then call :meth:`restore` once per wake.
    """

    #: ``CHUNK_BUFFER_SIZE``, ``CHUNK_BUFFER_MAX_SIZE``, ``SEGMENT_MAX_BYTES``,
    #: ``CHUNK_MAX_BYTES``, ``ABANDONED_STREAM_RETENTION_MS``, ``MAX_REMEMBERED_DELETED_TERMINALS``.
    buffer_size: ClassVar[int] = 10
    buffer_max: ClassVar[int] = 100
    segment_max_bytes: ClassVar[int] = 512_000
    chunk_max_bytes: ClassVar[int] = 1_800_000
    abandoned_after_ms: ClassVar[int] = 3_600_000
    remembered_deletions: ClassVar[int] = 32
    SCHEMA: ClassVar[tuple[str, ...]] = SCHEMA

    def __init__(self, sql: Any, now_ms: Callable[[], float], new_id: Callable[[], str]) -> None:
        self._sql = sql
        self._now_ms = now_ms
        self._new_id = new_id
        self._active: ActiveStream | None = None
        #: ``seq`` of the active stream's next stored chunk; None for a restored stream.
        self._next_seq: int | None = None
        self._buffer: list[str] = []
        self._buffer_stream: str | None = None
        self._buffer_bytes = 0
        self._pending_cutover: str | None = None
        self._last_closed: str | None = None
        #: request id -> (origin message ids, outcome) of recently deleted streams, oldest first.
        self._deleted: OrderedDict[str, tuple[tuple[str, ...] | None, Outcome | None]] = (
            OrderedDict()
        )
        #: Called after every segment is written: what makes recovery's durable progress
        #: counter advance (a flushed segment is the unit of recovery work).
        self.on_flushed: Callable[[], None] | None = None

    # -- state -------------------------------------------------------------------------------------
    @property
    def active(self) -> ActiveStream | None:
        return self._active

    @property
    def pending_cutover(self) -> str | None:
        """The stream :meth:`finish`\\ ed and waiting for :meth:`cutover`, if any."""
        return self._pending_cutover

    @property
    def last_closed(self) -> str | None:
        """The stream most recently ended by finish, complete or mark_error."""
        return self._last_closed

    def stream(self, stream_id: str) -> StreamRecord | None:
        rows = query_rows(
            self._sql, "SELECT * FROM cf_ai_chat_stream_metadata WHERE id = ?", stream_id
        )
        return StreamRecord.from_row(rows[0]) if rows else None

    def latest(self, request_id: str, status: StreamStatus | None = None) -> StreamRecord | None:
        """The request's newest stream (with that status)."""
        query = "SELECT * FROM cf_ai_chat_stream_metadata WHERE request_id = ?"
        params: list[Any] = [request_id]
        if status is not None:
            query += " AND status = ?"
            params.append(status)
        rows = query_rows(self._sql, f"{query} {_NEWEST_FIRST} LIMIT 1", *params)
        return StreamRecord.from_row(rows[0]) if rows else None

    def rows(self) -> list[StreamRecord]:
        """Every stream, newest first."""
        rows = query_rows(self._sql, f"SELECT * FROM cf_ai_chat_stream_metadata {_NEWEST_FIRST}")
        return [StreamRecord.from_row(row) for row in rows]

    def seq_base(self, stream_id: str) -> int:
        record = self.stream(stream_id)
        return record.seq_base if record is not None else 0

    def origin_message_ids(self, request_id: str) -> list[str] | None:
        """``messageIds`` of the request: its newest stream's, else a recently deleted one's."""
        record = self.latest(request_id)
        ids = record.origin_message_ids if record is not None else None
        if ids is None and request_id in self._deleted:
            ids = self._deleted[request_id][0]
        return list(ids) if ids else None

    def outcome(self, request_id: str) -> Outcome | None:
        """How the request's newest stream ended (None: normally, or unknown)."""
        record = self.latest(request_id)
        outcome = record.outcome if record is not None else None
        if outcome is None and request_id in self._deleted:
            outcome = self._deleted[request_id][1]
        return outcome

    def stored_bodies(self, stream_id: str) -> list[str]:
        """Every stored chunk body of the stream, in order (the live buffer is flushed first)."""
        self.flush()
        rows = query_rows(
            self._sql,
            "SELECT body FROM cf_ai_chat_stream_chunks WHERE stream_id = ? ORDER BY chunk_index",
            stream_id,
        )
        return [body for row in rows for body in unpack_segment(row["body"])]

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(
        self,
        request_id: str,
        *,
        message_id: str | None = None,
        continuation: bool = False,
        origin_message_ids: Sequence[str] = (),
    ) -> str:
        """Open the turn's stream and make it the active, live one; returns its id."""
        self.flush()
        seq_base = self._next_seq_for_request(request_id)  # before reclaim deletes that stream
        self.reclaim()
        stream_id = self._new_id()
        now = int(self._now_ms())
        origin = tuple(origin_message_ids) or None
        execute(
            self._sql,
            "INSERT INTO cf_ai_chat_stream_metadata (id, request_id, status, created_at, "
            "completed_at, message_id, is_continuation, origin_message_ids, seq_base, outcome, "
            "error_message, updated_at) VALUES (?, ?, 'streaming', ?, NULL, ?, ?, ?, ?, NULL, "
            "NULL, ?)",
            stream_id,
            request_id,
            now,
            message_id,
            1 if continuation else 0,
            dumps(list(origin)) if origin else None,
            seq_base,
            now,
        )
        self._active = ActiveStream(stream_id, request_id, continuation, True, message_id, origin)
        self._next_seq = seq_base
        return stream_id

    def store(self, body: str, *, flush_now: bool = False) -> int | None:
        """Buffer one chunk body of the active stream; returns its ``seq``.

        None when it is not stored (over 1,800,000 bytes), when the stream was restored (its
        count is unknown) or when no stream is active. ``flush_now`` writes the buffer at once
        (the agent passes it for ``tool-output-available``/``-error``/``-denied`` chunks).
        """
        size = stored_chunk_bytes(body)
        if size > self.chunk_max_bytes:
            _log.warning(
                "[ResumableStream] Skipping oversized chunk (%d bytes) to prevent SQLite row "
                "limit crash. Live clients still receive it.",
                size,
            )
            return None
        active = self._active
        if active is None:
            _log.debug("chunk not stored: no active stream")
            return None
        seq = self._next_seq
        if seq is not None:
            self._next_seq = seq + 1
        if len(self._buffer) >= self.buffer_max:
            self.flush()
        if self._buffer and self._buffer_bytes + size > self.segment_max_bytes:
            self.flush()
        self._buffer.append(body)
        self._buffer_bytes += size
        self._buffer_stream = active.stream_id
        if flush_now or len(self._buffer) >= self.buffer_size:
            self.flush()
        return seq

    def flush(self) -> None:
        """Write the buffered chunks as one segment (a no-op when the buffer is empty)."""
        if not self._buffer:
            return
        bodies, stream_id = self._buffer, self._buffer_stream
        self._buffer, self._buffer_stream, self._buffer_bytes = [], None, 0
        segment = bodies[0] if len(bodies) == 1 else dumps(bodies)
        rows = query_rows(
            self._sql,
            "SELECT status, (SELECT coalesce(max(chunk_index), -1) + 1 "
            "FROM cf_ai_chat_stream_chunks WHERE stream_id = ?) AS next "
            "FROM cf_ai_chat_stream_metadata WHERE id = ?",
            stream_id,
            stream_id,
        )
        if not rows or rows[0]["status"] != "streaming":
            # Settled or deleted while the chunks were buffered (a late writer): dropped.
            _log.debug("dropped %d chunks of closed stream %s", len(bodies), stream_id)
            return
        execute(
            self._sql,
            "INSERT INTO cf_ai_chat_stream_chunks (id, stream_id, body, chunk_index, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            self._new_id(),
            stream_id,
            segment,
            int(rows[0]["next"]),
            int(self._now_ms()),
        )
        if self.on_flushed is not None:
            self.on_flushed()

    def finish(self, outcome: Outcome | None = None) -> str | None:
        """The active stream's producer is done; returns its id, now awaiting :meth:`cutover`.

        The row stays ``streaming`` until the cutover (a crash in between leaves a live
        stream for recovery, not a lost turn). ``outcome`` is recorded unless ``completed``.
        """
        active = self._active
        if active is None:
            return None
        self.flush()
        self._record_outcome(active.stream_id, outcome)
        self._pending_cutover = self._last_closed = active.stream_id
        self._active = None
        return active.stream_id

    def cutover(self, stream_id: str | None = None, *, delete_rows: bool = True) -> bool:
        """Settle the finished stream ``completed`` and delete its rows; True if it settled.

        Call it right after persisting the turn's message, with no ``await`` between: both
        land in one implicit transaction. ``stream_id`` defaults to :attr:`pending_cutover`;
        ``delete_rows=False`` keeps the settled rows until the next :meth:`start`. False (and
        nothing deleted) when the stream was already settled or deleted by another path.
        """
        self.flush()
        stream_id = stream_id or self._pending_cutover
        if stream_id is None:
            return False
        record = self._settle(stream_id, "completed")
        if record is not None and delete_rows:
            self._delete([record])
        if self._pending_cutover == stream_id:
            self._pending_cutover = None
        if self._active is not None and self._active.stream_id == stream_id:
            self._active = None
        return record is not None

    def finalize_pending(self) -> None:
        """Settle a finished stream that had nothing to persist (its rows wait for the next
        :meth:`start`)."""
        if self._pending_cutover is not None:
            self._settle(self._pending_cutover, "completed")
            self._pending_cutover = None

    def complete(self, stream_id: str, outcome: Outcome | None = None) -> None:
        """Settle ``completed`` now, keeping the rows until the next :meth:`start` (a recovering
        turn, an orphan finalised by a resume ACK — whose outcome defaults to ``aborted``)."""
        self.flush()
        active = self._active
        is_active = active is not None and active.stream_id == stream_id
        if outcome is None and is_active and active is not None and not active.live:
            outcome = "aborted"
        self._record_outcome(stream_id, outcome)
        self._settle(stream_id, "completed")
        self._closed(stream_id)

    def mark_error(self, message: str | None = None, *, stream_id: str | None = None) -> None:
        """Settle the (active) stream ``error``; its rows stay for the terminal replay."""
        stream_id = stream_id or (self._active.stream_id if self._active else None)
        if stream_id is None:
            return
        self.flush()
        self._settle(stream_id, "error", message)
        self._closed(stream_id)

    def restore(self) -> ActiveStream | None:
        """On wake: the newest ``streaming`` row, of any age, becomes the active stream
        (``live=False``, ``seq`` unknown); None if there is none."""
        rows = query_rows(
            self._sql,
            f"SELECT * FROM cf_ai_chat_stream_metadata WHERE status = 'streaming' "
            f"{_NEWEST_FIRST} LIMIT 1",
        )
        if not rows:
            return None
        r = StreamRecord.from_row(rows[0])
        self._active = ActiveStream(
            r.id, r.request_id, r.continuation, False, r.message_id, r.origin_message_ids
        )
        self._next_seq = None
        return self._active

    def reclaim(self) -> int:
        """Delete finished streams and ``streaming`` ones (not the active) with no activity for
        an hour: the row's ``updated_at`` (set at start), then its newest chunk. Returns how
        many streams went. :meth:`start` runs it, so nothing needs an alarm."""
        cutoff = int(self._now_ms()) - self.abandoned_after_ms
        active_id = self._active.stream_id if self._active is not None else None
        doomed = [
            record
            for record in self.rows()
            if record.status != "streaming"
            or (
                record.id != active_id
                and record.updated_at < cutoff
                and self._last_activity(record) < cutoff
            )
        ]
        self._delete(doomed)
        return len(doomed)

    def clear_all(self) -> None:
        """Delete every stream and forget everything (``cf_agent_chat_clear``)."""
        self._buffer, self._buffer_stream, self._buffer_bytes = [], None, 0
        execute(self._sql, "DELETE FROM cf_ai_chat_stream_chunks")
        execute(self._sql, "DELETE FROM cf_ai_chat_stream_metadata")
        self._deleted.clear()
        self._active = self._pending_cutover = self._last_closed = None
        self._next_seq = None

    # -- internals ---------------------------------------------------------------------------------
    def _next_seq_for_request(self, request_id: str) -> int:
        prior = self.latest(request_id)
        if prior is None:
            return 0
        return prior.seq_base + len(self.stored_bodies(prior.id))

    def _last_activity(self, record: StreamRecord) -> int:
        rows = query_rows(
            self._sql,
            "SELECT created_at FROM cf_ai_chat_stream_chunks WHERE stream_id = ? "
            "ORDER BY chunk_index DESC LIMIT 1",
            record.id,
        )
        return int(rows[0]["created_at"]) if rows else record.updated_at

    def _record_outcome(self, stream_id: str, outcome: Outcome | None) -> None:
        if outcome is None or outcome == "completed":
            return
        execute(
            self._sql,
            "UPDATE cf_ai_chat_stream_metadata SET outcome = ? WHERE id = ?",
            outcome,
            stream_id,
        )

    def _settle(
        self, stream_id: str, status: StreamStatus, error_message: str | None = None
    ) -> StreamRecord | None:
        """``streaming`` → ``status``; the settled record, or None if it was not streaming."""
        record = self.stream(stream_id)
        if record is None or record.status != "streaming":
            return None
        now = int(self._now_ms())
        execute(
            self._sql,
            "UPDATE cf_ai_chat_stream_metadata SET status = ?, completed_at = ?, updated_at = ?, "
            "error_message = ? WHERE id = ?",
            status,
            now,
            now,
            error_message,
            stream_id,
        )
        return replace(
            record, status=status, completed_at=now, updated_at=now, error_message=error_message
        )

    def _closed(self, stream_id: str) -> None:
        if self._pending_cutover == stream_id:
            self._pending_cutover = None
        self._last_closed = stream_id
        if self._active is not None and self._active.stream_id == stream_id:
            self._active = None

    def _delete(self, records: Iterable[StreamRecord]) -> None:
        """Delete streams and their chunks, remembering their ``messageIds``/``outcome``."""
        ids: list[str] = []
        for record in records:
            ids.append(record.id)
            if record.origin_message_ids or record.outcome:
                self._deleted.pop(record.request_id, None)
                self._deleted[record.request_id] = (record.origin_message_ids, record.outcome)
                while len(self._deleted) > self.remembered_deletions:
                    self._deleted.popitem(last=False)
        delete_in(self._sql, "cf_ai_chat_stream_chunks", "stream_id", ids)
        delete_in(self._sql, "cf_ai_chat_stream_metadata", "id", ids)
