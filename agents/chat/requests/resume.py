"""The stream-resume handshake: who is told what about a stream, and when (research §1.4, §1.6).

A client that (re)connects while a reply streams must not see half of it: on connect (before
``cf_agent_identity``) it is told ``cf_agent_stream_resuming {id}`` and joins the *pending* set,
which every chat broadcast skips. When it acknowledges (``cf_agent_stream_resume_ack``), it is
sent every stored chunk of the stream (``replay: true``), then ``replayComplete`` if the producer
still runs — live chunks follow — or ``done: true`` if the producer died with an earlier
process (an *orphan*: the caller then keeps its partial reply).

A client's probe (``cf_agent_stream_resume_request {probeId}``) is answered with the same
``resuming`` (with the probe's id), with ``cf_agent_stream_pending`` while a turn is accepted but
not streaming yet (the connection is told ``resuming`` as soon as it starts), or with
``cf_agent_stream_resume_none {reason: "idle"}``. The connection whose tool answer asked for an
auto-continuation is told ``idle`` while that continuation is scheduled or runs: it was never
left out of the live frames, so it has nothing to resume (the package parks it and replays the
continuation to it instead — see ``docs/chat.md``). A turn interrupted by a crash and finalised by
recovery stays resumable until the next turn starts: its stored chunks are replayed, then
``done: true``. A turn that ended in a terminal error — a recovery that gave up — leaves a
durable *terminal record* (``cf:chat:last-terminal``): a probe is told ``resuming`` with its id,
and the acknowledgement gets the terminal error frame (R17), so a client that connects after the
fact still learns how the reply ended.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...core.connections import Connection
from ..protocol import frames
from ..streams.resumable import ActiveStream, ResumableStreams
from ..turns.queue import TurnQueue
from .replay import replay_frames

__all__ = ["ResumeHandshake"]


class ResumeHandshake:
    """The in-memory side of resuming: the pending and parked connections (lost on eviction,
    as in the SDK; a reconnecting client simply probes again)."""

    __slots__ = ("_asked", "_parked", "_queue", "_streams", "_terminal", "interrupted", "pending")

    def __init__(
        self,
        streams: ResumableStreams,
        queue: TurnQueue,
        terminal: Callable[[], Mapping[str, Any] | None] = lambda: None,
        asked_continuation: Callable[[str], bool] = lambda _connection_id: False,
    ) -> None:
        self._streams = streams
        self._queue = queue
        #: Reads the durable terminal record (``{requestId, body, messageIds?}``), if any.
        self._terminal = terminal
        #: Whether a connection asked (``autoContinue``) for the continuation under way.
        self._asked = asked_continuation
        #: Connections told ``resuming`` that have not acknowledged: no live chat frame for them.
        self.pending: set[str] = set()
        #: Connections told ``stream_pending``: they are told ``resuming`` when the stream starts.
        self._parked: dict[str, Connection] = {}
        #: The request of a turn a crash interrupted and recovery finalised (still replayable).
        self.interrupted: str | None = None

    def on_connect(self, connection: Connection) -> None:
        """Before ``cf_agent_identity``: a stream is active, so the client is told first."""
        active = self._streams.active
        if active is not None:
            self.pending.add(connection.id)
            connection._send_quiet(frames.resuming_frame(active.request_id))

    def request(self, connection: Connection, probe_id: str | None) -> None:
        """Answer a probe (see the module docstring)."""
        if connection.id not in self.pending and self._asked(connection.id):
            # The tab that asked for the continuation (its tool answer's autoContinue) gets its
            # every chunk live: nothing to resume. The published hook probes right after the
            # answer; parked and replayed instead, as the package does, it cannot apply an
            # approved call's output (e2e/test_chat_differential.py, docs/chat.md).
            connection._send_quiet(frames.resume_none_frame("idle", probe_id))
            return
        active = self._streams.active
        if active is not None:
            self.pending.add(connection.id)
            connection._send_quiet(frames.resuming_frame(active.request_id, probe_id))
        elif self._queue.busy:
            self._parked[connection.id] = connection
            connection._send_quiet(
                frames.stream_pending_frame(self._queue.active_request_id, probe_id)
            )
        elif self.interrupted is not None:
            self.pending.add(connection.id)
            connection._send_quiet(frames.resuming_frame(self.interrupted, probe_id))
        elif (record := self._terminal()) is not None:
            self.pending.add(connection.id)
            connection._send_quiet(frames.resuming_frame(str(record["requestId"]), probe_id))
        else:
            connection._send_quiet(frames.resume_none_frame("idle", probe_id))

    def ack(self, connection: Connection, request_id: str) -> ActiveStream | None:
        """Replay ``request_id``'s stream to ``connection``; returns the orphan it replayed to
        the end (whose partial the caller keeps), else None."""
        self.pending.discard(connection.id)
        active = self._streams.active
        if active is not None and active.request_id != request_id:
            return None  # an older request: ignored, as the SDK does
        record = self._terminal() if active is None else None
        if record is not None and record.get("requestId") == request_id:
            ids = record.get("messageIds")
            connection._send_quiet(
                frames.response_frame(
                    request_id,
                    str(record.get("body", "")),
                    done=True,
                    error=True,
                    message_ids=list(ids) if isinstance(ids, list) else None,
                )
            )
            return None
        live = active.live if active is not None else False
        for frame in replay_frames(self._streams, request_id, live=live):
            if not connection._send_quiet(frame):
                return None  # gone mid-replay: the stream waits for the next attempt
        return active if active is not None and not active.live else None

    def started(self, request_id: str) -> None:
        """A turn's stream started: parked connections are told ``resuming`` now."""
        self.interrupted = None
        parked, self._parked = self._parked, {}
        for connection_id, connection in parked.items():
            self.pending.add(connection_id)
            connection._send_quiet(frames.resuming_frame(request_id))

    def finished(self) -> None:
        """The stream ended: whoever still waited to resume gets the terminal frames live."""
        self.pending.clear()
        parked, self._parked = self._parked, {}
        for connection in parked.values():
            connection._send_quiet(frames.resume_none_frame(None))

    def forget(self, connection_id: str) -> None:
        self.pending.discard(connection_id)
        self._parked.pop(connection_id, None)

    def clear(self) -> None:
        """``cf_agent_chat_clear``: nothing is resumable any more."""
        self.finished()
        self.interrupted = None
