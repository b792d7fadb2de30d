"""The session's stream: every chunk of every run, numbered, stored, and pushed to its readers.

One Durable Object hosts one session; its agent loop appends chunks here and clients read them
over SSE (:meth:`SessionStream.sse`) or a hibernatable WebSocket (:meth:`SessionStream.attach`):
first the stored chunks from ``fromSequence`` (replay), then the live ones. ``/history`` pages
through the same rows (:meth:`SessionStream.history`).

**Sequences are the storage's, not a counter's.** ``append`` inserts with
``max(sequence) + 1`` computed by SQLite in the same statement, so the numbers are gap-free
whatever happened before: a crash drops the uncommitted rows *and* the numbers they took, a
restart reads nothing from memory, and a rolled-back ``transactionSync`` cannot leave a hole.

**Events** (the same JSON on both transports; SSE sends ``data: <json>\\n\\n`` per event):
``{"type":"chunk","sequence":n,"chunk":{...}}``, then at the end of a run one terminal event,
``{"type":"end","finalOutput":...}`` or ``{"type":"fail","error":"..."}``. The terminal is kept
(in the agent's sync KV) until :meth:`SessionStream.reopen` starts a new run in the session, so a
late client gets replay + terminal. SSE responses close after the terminal; WebSockets stay open
(a client may watch several runs). A chunk is serialised once: the stored text is spliced into
the event, and the SSE bytes are encoded once and written to every subscriber.

**Output gate.** Every event leaves through the Workers surface (``ws.send``, a
``TransformStream`` writer) right after its row was written, so the runtime's output gate holds
it until that row is durable: no client ever sees a sequence that a crash could take back.

**Replay then live, never a duplicate or a hole.** A WebSocket is replayed synchronously (there
is no back-pressure on ``send``) and joins the live set in the same turn, so no ``append`` can
fall in between. An SSE subscriber replays page by page, awaiting its writer's back-pressure
between pages (a slow client with a long history does not fill the object's memory); while it
replays, ``append`` skips it — the next page reads those rows — and it turns live in the same
turn as the read that found nothing more. A run that ends meanwhile hands it its terminal with
the last sequence before it, so it stops exactly there.

**A reader that stops reading costs bounded memory.** Live events are written without waiting
(the run cannot wait for its slowest reader): an SSE response whose client falls more than
:attr:`SessionStream.MAX_SSE_BACKLOG_BYTES` (1 MiB) behind the response stream's own buffer is
aborted, its queued bytes freed, and the client reconnects with ``fromSequence`` to replay at its
own pace. A WebSocket reader is bounded by the runtime: doemu drops a client with 8 MiB of frames
waiting for it (``doemu.sockets.bridge.MAX_UNSENT_BYTES``), and the object sees a 1006 close.

**Who is subscribed.** WebSocket readers are marked in their socket attachment, which survives
hibernation: after the object is evicted and woken, the live set is rebuilt from the agent's
connections on first use (then kept in memory). SSE readers exist only in memory — their
response keeps the object alive, and a reset object fails them (the client reconnects with
``fromSequence``). A reader that went away is noticed by its writer's ``closed`` promise (or at
the next write) and dropped; one shared timer writes the heartbeat comment while any is open.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from js import Date, TextEncoder, TransformStream
from workers import Response

from ..core.connections import Connection
from ..core.portable import wait_until
from ..core.protocol import dumps, parse_frame
from ..core.sql import execute, query_rows
from .errors import StreamClosedError, StreamPayloadError, StreamRangeError

__all__ = ["SessionStream", "SseFormat"]

_TABLE = "cf_server_stream_chunks"
#: The attachment flag that makes a WebSocket connection a reader of the stream.
_READER_FLAG = "server_stream"
_OPEN = 1  # WebSocket.READY_STATE_OPEN
_WHOLE = re.compile(r"-?[0-9]+")
_PONG = '{"type":"pong"}'


class SseFormat:
    """How one SSE response writes the session's events: the session protocol itself (this
    class), or a translation of it (:class:`~.uistream.UIMessageFormat`, the AI SDK's
    UI-message stream). ``head`` is written first; ``chunk`` and ``end`` return the SSE text of
    a stored chunk and of the terminal event (empty: nothing to write). A format may keep state:
    each response gets its own instance, and sees every event once, in order."""

    #: Formats that are the same for every reader share their encoded bytes.
    shared: ClassVar[bool] = True

    def head(self) -> str:
        return ""

    def chunk(self, sequence: int, chunk_text: str) -> str:
        return f"data: {_chunk_event(sequence, chunk_text)}\n\n"

    def end(self, event_text: str) -> str:
        return f"data: {event_text}\n\n"


_SESSION_FORMAT = SseFormat()


class _SseReader:
    """One SSE response: its writer, its format, where its replay stands, the terminal it
    ends with, and how far its client is behind."""

    __slots__ = ("backlog", "end", "format", "live", "next_sequence", "writer")

    def __init__(self, writer: Any, next_sequence: int, fmt: SseFormat) -> None:
        self.writer = writer
        self.next_sequence = next_sequence
        self.format = fmt
        self.live = False
        #: (last sequence before it, event text): the terminal this response ends with.
        self.end: tuple[int, str] | None = None
        #: Bytes of live writes not yet taken by the stream (its own buffer is full).
        self.backlog = 0


class SessionStream:
    """The chunks of one session's runs, stored and streamed (see the module docstring).

    ``agent`` is the :class:`~agents.Agent` hosting the session (its ``ctx`` and connections);
    ``heartbeat_ms`` is the SSE heartbeat period (0: none). Build one per activation, in the
    agent's ``__init__``; the tables are created there (idempotent).
    """

    SCHEMA: ClassVar[tuple[str, ...]] = (
        f"CREATE TABLE IF NOT EXISTS {_TABLE} (sequence INTEGER PRIMARY KEY, "
        "chunk TEXT NOT NULL, created_at INTEGER NOT NULL)",
    )
    #: Where the last run's terminal event is kept (JSON text in ``ctx.storage.kv``).
    TERMINAL_KEY: ClassVar[str] = "cf:server:stream:terminal"
    #: A stored row must stay under Cloudflare's 2 MB row limit (UTF-8 bytes of the chunk).
    MAX_CHUNK_BYTES: ClassVar[int] = 1_800_000
    #: ``history``'s ``limit`` is clamped to ``1..HISTORY_MAX_LIMIT``.
    HISTORY_MAX_LIMIT: ClassVar[int] = 1000
    #: Rows read per replay step.
    REPLAY_PAGE: ClassVar[int] = 500
    #: How far a live SSE client may fall behind: bytes written to its response that wait
    #: beyond the response stream's own buffer (64 KiB on doemu) because the client is not
    #: reading. A run cannot wait for its slowest reader, so past this the response is aborted
    #: (the client sees the stream fail) and its queued bytes are freed; every chunk is stored,
    #: so the client reconnects with ``fromSequence`` and replays at its own pace (replay does
    #: wait for the client). WebSocket readers are bounded by the runtime instead (doemu drops a
    #: client with 8 MiB unsent).
    MAX_SSE_BACKLOG_BYTES: ClassVar[int] = 1024 * 1024
    SSE_HEADERS: ClassVar[Mapping[str, str]] = {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
    }

    def __init__(self, agent: Any, *, heartbeat_ms: int = 30_000) -> None:
        if heartbeat_ms < 0:
            raise ValueError(f"heartbeat_ms must be 0 (off) or more, got {heartbeat_ms}")
        self._agent = agent
        self._ctx = agent.ctx
        self._sql = agent.ctx.storage.sql
        for statement in self.SCHEMA:
            execute(self._sql, statement)
        self._heartbeat_s = heartbeat_ms / 1000
        self._encoder = TextEncoder.new()
        self._heartbeat_bytes = self._encoder.encode(": heartbeat\n\n")
        stored = self._ctx.storage.kv.get(self.TERMINAL_KEY)
        self._terminal: str | None = stored if isinstance(stored, str) else None
        self._sse: list[_SseReader] = []
        #: Connection id -> socket of the WebSocket readers; None until first needed.
        self._sockets: dict[str, Any] | None = None
        self._ticker: asyncio.Future[None] | None = None

    # -- state ----------------------------------------------------------------------------------
    @property
    def latest_sequence(self) -> int:
        """The newest stored sequence; -1 while the stream is empty."""
        rows = query_rows(self._sql, f"SELECT max(sequence) AS n FROM {_TABLE}")
        n = rows[0]["n"] if rows else None
        return -1 if n is None else int(n)

    @property
    def terminal(self) -> dict[str, Any] | None:
        """The last run's ``end``/``fail`` event while no new run started (else None)."""
        if self._terminal is None:
            return None
        event: dict[str, Any] = json.loads(self._terminal)
        return event

    @property
    def sse_readers(self) -> int:
        """How many SSE responses are open on this stream (in this activation)."""
        return len(self._sse)

    # -- the run's side ---------------------------------------------------------------------------
    def append(self, chunk: Mapping[str, Any]) -> int:
        """Store ``chunk`` (a JSON object) with the next sequence, send it to every live reader
        and return its sequence. Raises :class:`StreamPayloadError` (nothing stored) for a chunk
        that is not a JSON object, and :class:`StreamClosedError` after ``finish``/``fail``."""
        self._check_open()
        if not isinstance(chunk, Mapping):
            raise StreamPayloadError(
                f"a stream chunk must be a JSON object (a mapping), got {type(chunk).__name__}"
            )
        text = _json(dict(chunk), "a stream chunk")
        if len(text) * 4 > self.MAX_CHUNK_BYTES and len(text.encode()) > self.MAX_CHUNK_BYTES:
            raise StreamPayloadError(
                f"a stream chunk of {len(text.encode())} bytes is over the "
                f"{self.MAX_CHUNK_BYTES}-byte limit of one stored row"
            )
        rows = query_rows(
            self._sql,
            f"INSERT INTO {_TABLE} (sequence, chunk, created_at) "
            f"SELECT coalesce(max(sequence), -1) + 1, ?, ? FROM {_TABLE} RETURNING sequence",
            text,
            int(Date.now()),
        )
        sequence = int(rows[0]["sequence"])
        self._publish(_chunk_event(sequence, text), chunk=(sequence, text))
        return sequence

    def finish(self, final_output: Any) -> None:
        """End the run: ``{"type":"end","finalOutput":…}`` is stored and sent; SSE responses
        close after it, WebSockets stay open."""
        self._end({"type": "end", "finalOutput": final_output}, "the run's final output")

    def fail(self, error: str) -> None:
        """End the run as failed: ``{"type":"fail","error":…}`` (``error`` as text), likewise."""
        self._end({"type": "fail", "error": str(error)}, "the run's error")

    def pause(self, event: Mapping[str, Any]) -> None:
        """The run stopped without ending (``{"type": "suspended"|"interrupted", …}``): stored
        and sent like a terminal — SSE readers close, nothing waits on an object that may now
        hibernate — until the run goes on with :meth:`reopen`."""
        self._end(dict(event), "the run's pause")

    def reopen(self) -> None:
        """A new run begins in this session: the stored terminal is cleared (sequences go on)."""
        if self._terminal is not None:
            self._ctx.storage.kv.delete(self.TERMINAL_KEY)
            self._terminal = None

    def _check_open(self) -> None:
        if self._terminal is not None:
            kind = json.loads(self._terminal).get("type")
            raise StreamClosedError(
                f"the session's stream holds the last run's {kind!r} event: call reopen() "
                "before a new run appends, finishes or fails"
            )

    def _end(self, event: dict[str, Any], what: str) -> None:
        self._check_open()
        text = _json(event, what)
        self._ctx.storage.kv.put(self.TERMINAL_KEY, text)
        self._terminal = text
        self._publish(text, end_after=self.latest_sequence)

    # -- reading ----------------------------------------------------------------------------------
    def history(self, from_sequence: int = 0, limit: int = 100) -> dict[str, Any]:
        """``{"chunks": [{"sequence", "chunk"}…], "hasMore", "latestSequence"}`` from
        ``from_sequence`` on, at most ``limit`` chunks (clamped to ``1..HISTORY_MAX_LIMIT``)."""
        limit = min(max(int(limit), 1), self.HISTORY_MAX_LIMIT)
        rows = self._rows(max(int(from_sequence), 0), limit + 1)
        chunks = [
            {"sequence": int(row["sequence"]), "chunk": json.loads(row["chunk"])}
            for row in rows[:limit]
        ]
        return {
            "chunks": chunks,
            "hasMore": len(rows) > limit,
            "latestSequence": self.latest_sequence,
        }

    def message_start(self, agent_id: str, since: int = 0) -> tuple[int, str] | None:
        """Where the latest assistant message of ``agent_id`` (from ``since`` on) began: the
        sequence of its first ``message_start`` chunk and its id (a message continued after a
        client's answer has several). None when there is none."""
        rows = query_rows(
            self._sql,
            f"SELECT sequence, json_extract(chunk, '$.messageId') AS id FROM {_TABLE} "
            "WHERE sequence >= ? AND json_extract(chunk, '$.type') = 'message_start' "
            "AND json_extract(chunk, '$.agentId') = ? ORDER BY sequence DESC LIMIT 1",
            max(int(since), 0),
            agent_id,
        )
        if not rows:
            return None
        message_id = str(rows[0]["id"])
        first = query_rows(
            self._sql,
            f"SELECT min(sequence) AS n FROM {_TABLE} WHERE sequence >= ? "
            "AND json_extract(chunk, '$.type') = 'message_start' "
            "AND json_extract(chunk, '$.messageId') = ?",
            max(int(since), 0),
            message_id,
        )
        return int(first[0]["n"]), message_id

    def check_from_sequence(self, value: Any) -> int:
        """``value`` (a query parameter's text, an int, or None for "absent" = 0) as a sequence
        to read from: a whole number in ``0..latest_sequence + 1``. Anything else raises
        :class:`StreamRangeError` naming the value and the range, with ``status`` 400 (not a
        whole number) or 416 (outside the range)."""
        if value is None:
            return 0
        latest = self.latest_sequence
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        valid = f"a whole number from 0 to {latest + 1} (latestSequence {latest} + 1)"
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str) and _WHOLE.fullmatch(value):
            # More digits than any sequence can have is past the end (and int() of thousands
            # of digits is refused, or slow).
            number = int(value) if len(value) <= 19 else (-1 if value[0] == "-" else latest + 2)
        else:
            raise StreamRangeError(
                f"fromSequence must be {valid}, got {shown}",
                value=value,
                latest_sequence=latest,
                status=400,
            )
        if not 0 <= number <= latest + 1:
            raise StreamRangeError(
                f"fromSequence {shown} is out of range: it must be {valid}",
                value=value,
                latest_sequence=latest,
                status=416,
            )
        return number

    def _rows(self, start: int, limit: int, upto: int | None = None) -> list[dict[str, Any]]:
        """Up to ``limit`` stored rows from ``start`` (to ``upto`` at most), in order.

        "No upper bound" is a query without one, not a huge number: Pyodide passes an int of
        2**53 - 1 or more to JavaScript as a BigInt, which SQL bindings refuse on Cloudflare."""
        if upto is None:
            return query_rows(
                self._sql,
                f"SELECT sequence, chunk FROM {_TABLE} WHERE sequence >= ? ORDER BY sequence "
                "LIMIT ?",
                start,
                limit,
            )
        return query_rows(
            self._sql,
            f"SELECT sequence, chunk FROM {_TABLE} WHERE sequence BETWEEN ? AND ? "
            "ORDER BY sequence LIMIT ?",
            start,
            upto,
            limit,
        )

    # -- SSE --------------------------------------------------------------------------------------
    def sse(self, from_sequence: int = 0, fmt: SseFormat | None = None) -> Response:
        """A ``text/event-stream`` response: the chunks from ``from_sequence``, then live ones,
        until a terminal event (stored or live), after which it closes. A heartbeat comment
        (``: heartbeat``) is written every ``heartbeat_ms`` while it is open. Raises
        :class:`StreamRangeError` for a ``from_sequence`` outside ``0..latest_sequence + 1``."""
        start = self.check_from_sequence(from_sequence)
        stream = TransformStream.new()
        fmt = fmt or _SESSION_FORMAT
        reader = _SseReader(stream.writable.getWriter(), start, fmt)
        if self._terminal is not None:
            reader.end = (self.latest_sequence, self._terminal)
        head = fmt.head()
        if head:
            self._write(reader, self._encoder.encode(head))
        self._sse.append(reader)
        wait_until(self._ctx, self._serve(reader))
        if self._heartbeat_s > 0 and self._ticker is None:
            self._ticker = wait_until(self._ctx, self._beat())
        headers = dict(self.SSE_HEADERS)
        headers.update(getattr(fmt, "headers", {}))
        return Response(stream.readable, headers=headers)

    async def _serve(self, reader: _SseReader) -> None:
        """Replay, go live, then wait for the response to end (however it ends) to drop it."""
        try:
            await self._replay_sse(reader)
            if reader in self._sse:
                await reader.writer.closed
        except Exception:
            pass  # the client went away: its writer failed
        except asyncio.CancelledError:
            # The object is being torn down (reset): nothing will feed this response again, so
            # fail it now and the client reconnects with fromSequence, instead of waiting on it.
            _handled(reader.writer.abort("the session's Durable Object was reset"))
            raise
        finally:
            self._drop(reader)

    async def _replay_sse(self, reader: _SseReader) -> None:
        while True:
            upto = reader.end[0] if reader.end is not None else None
            rows = self._rows(reader.next_sequence, self.REPLAY_PAGE, upto)
            if rows:  # one write per page: a replay costs per page, not per chunk
                fmt = reader.format
                page = "".join(fmt.chunk(int(row["sequence"]), row["chunk"]) for row in rows)
                if page and not self._write(reader, self._encoder.encode(page)):
                    return
                reader.next_sequence = int(rows[-1]["sequence"]) + 1
            if len(rows) < self.REPLAY_PAGE:
                break  # caught up; no await since the read, so nothing was appended since
            await reader.writer.ready  # back-pressure: the client takes a page at its pace
        if reader.end is not None:
            self._close_sse(reader, reader.end[1])
        else:
            reader.live = True

    def _write(self, reader: _SseReader, data: Any, live: bool = False) -> bool:
        """Write ``data`` to one response; False (and the reader dropped) if it is gone, or,
        for a ``live`` write (one that does not wait for the client, unlike a replay page),
        too far behind (:attr:`MAX_SSE_BACKLOG_BYTES`)."""
        writer = reader.writer
        try:
            if writer.desiredSize is None:  # errored: the client went away
                raise ConnectionError("the SSE client went away")
            result = writer.write(data)
        except Exception:
            self._drop(reader)
            return False
        if not live or (isinstance(result, asyncio.Future) and result.done()):
            _handled(result)  # a replay page (its caller awaits ready), or taken at once
            return True
        # The stream's buffer is full: these bytes wait for the client until the write settles.
        size = _size(data)
        reader.backlog += size
        if reader.backlog > self.MAX_SSE_BACKLOG_BYTES:
            self._abandon(reader)
            return False
        _settled(result, reader, size)
        return True

    def _abandon(self, reader: _SseReader) -> None:
        """A client too far behind: fail its response, free what waits, drop it."""
        _handled(
            reader.writer.abort(
                f"the SSE client fell more than {self.MAX_SSE_BACKLOG_BYTES} bytes behind; "
                "reconnect with fromSequence to replay the rest"
            )
        )
        reader.backlog = 0
        self._drop(reader)

    @property
    def sse_buffered_bytes(self) -> int:
        """Bytes written to the open SSE responses that their clients have not taken yet,
        beyond each stream's own buffer (each at most :attr:`MAX_SSE_BACKLOG_BYTES`)."""
        return sum(reader.backlog for reader in self._sse)

    def _close_sse(self, reader: _SseReader, event_text: str) -> None:
        """Write the terminal ``event_text`` in the reader's format and close the response."""
        data = reader.format.end(event_text)
        if not data or self._write(reader, self._encoder.encode(data)):
            _handled(reader.writer.close())
        self._drop(reader)

    def _drop(self, reader: _SseReader) -> None:
        if reader in self._sse:
            self._sse.remove(reader)
        if not self._sse and self._ticker is not None:
            # Cancelled even when it is the running task (a write of its own found the last
            # reader gone): it ends at its next await, before a later reader's timer starts.
            self._ticker.cancel()
            self._ticker = None

    async def _beat(self) -> None:
        """The one heartbeat timer: runs while any SSE response is open."""
        while self._sse:
            await asyncio.sleep(self._heartbeat_s)
            for reader in list(self._sse):
                self._write(reader, self._heartbeat_bytes, live=True)

    # -- WebSocket --------------------------------------------------------------------------------
    def attach(self, connection: Connection, from_sequence: int = 0) -> None:
        """Make ``connection`` (a WebSocket of the agent) a reader: the stored chunks from
        ``from_sequence`` and the stored terminal are sent now, live events follow — also after
        the object hibernated (the mark is in the socket's attachment). Raises
        :class:`StreamRangeError` for a ``from_sequence`` outside ``0..latest_sequence + 1``."""
        start = self.check_from_sequence(from_sequence)
        while True:
            rows = self._rows(start, self.REPLAY_PAGE)
            for row in rows:
                start = int(row["sequence"]) + 1
                if not connection._send_quiet(_chunk_event(start - 1, row["chunk"])):
                    return
            if len(rows) < self.REPLAY_PAGE:
                break
        if self._terminal is not None and not connection._send_quiet(self._terminal):
            return
        connection._set_flag(_READER_FLAG, True)
        self._readers()[connection.id] = connection.socket

    def handle_message(self, connection: Connection, message: Any) -> bool:
        """Answer ``{"type":"ping"}`` with ``{"type":"pong"}``; True when ``message`` was the
        stream's (every other message: False, for the agent's own handling)."""
        frame = parse_frame(message)
        if isinstance(frame, dict) and frame.get("type") == "ping":
            connection._send_quiet(_PONG)
            return True
        return False

    def _readers(self) -> dict[str, Any]:
        """The WebSocket readers; after a wake, rebuilt once from the marked connections."""
        if self._sockets is None:
            self._sockets = {
                c.id: c.socket for c in self._agent.get_connections() if c._flag(_READER_FLAG)
            }
        return self._sockets

    # -- delivery ---------------------------------------------------------------------------------
    def _publish(
        self, event: str, end_after: int | None = None, chunk: tuple[int, str] | None = None
    ) -> None:
        """Send ``event`` to every live reader; ``end_after`` (a terminal's last sequence) also
        closes the SSE responses and hands it to those still replaying. ``chunk`` (sequence,
        stored text) is the event's chunk, for readers whose format translates it."""
        if self._sse:
            shared: Any = None  # the session format's bytes, encoded once for every reader
            for reader in list(self._sse):
                if end_after is not None:
                    if reader.live:
                        self._close_sse(reader, event)
                    elif reader.end is None:
                        reader.end = (end_after, event)
                    continue
                if not reader.live or chunk is None:
                    continue
                if reader.format.shared:
                    if shared is None:
                        shared = self._encoder.encode(reader.format.chunk(*chunk))
                    self._write(reader, shared, live=True)
                elif text := reader.format.chunk(*chunk):
                    self._write(reader, self._encoder.encode(text), live=True)
        sockets = self._readers()
        for connection_id, ws in list(sockets.items()):
            try:
                if ws.readyState == _OPEN:
                    ws.send(event)
                    continue
            except Exception:
                pass  # closed meanwhile: no longer a reader
            del sockets[connection_id]


def _chunk_event(sequence: int, chunk_text: str) -> str:
    """The chunk event's JSON, the stored chunk text spliced in (never parsed again)."""
    return f'{{"type":"chunk","sequence":{sequence},"chunk":{chunk_text}}}'


def _json(value: Any, what: str) -> str:
    try:
        return dumps(value)
    except (TypeError, ValueError) as exc:
        raise StreamPayloadError(f"{what} must be JSON-serialisable: {exc}") from exc


def _ignore(*_args: Any) -> None:
    return None


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _size(data: Any) -> int:
    """Bytes in an encoded chunk (``bytes`` on doemu, a ``Uint8Array`` on Cloudflare)."""
    size = getattr(data, "byteLength", None)
    return int(size) if isinstance(size, int) else len(data)


def _settled(result: Any, reader: _SseReader, size: int) -> None:
    """When the write ``result`` settles (the client took it, or the stream failed), its
    ``size`` bytes no longer wait for ``reader``."""

    def done(*_args: Any) -> None:
        reader.backlog = max(0, reader.backlog - size)

    if isinstance(result, asyncio.Future):

        def settled(future: asyncio.Future[Any]) -> None:
            _retrieve(future)
            done()

        result.add_done_callback(settled)
    elif hasattr(result, "then"):  # a JavaScript promise (Cloudflare)
        result.then(done, done)
    else:
        done()


def _handled(result: Any) -> None:
    """Mark a write's (or close's) outcome as handled: its one failure is a client that went
    away, which the reader's task already deals with — not an unhandled rejection to log."""
    if isinstance(result, asyncio.Future):
        if result.done():
            _retrieve(result)
        else:
            result.add_done_callback(_retrieve)
    elif hasattr(result, "catch"):  # a JavaScript promise (Cloudflare)
        result.catch(_ignore)
