"""Replaying a resumable stream to a client that acknowledged ``cf_agent_stream_resuming``.

The frames are the published package's byte for byte (research §1.6, R13–R17): its replay
builders order keys differently from the live frames of :mod:`agents.chat.protocol.frames`, which
is why
they are built here and not there. What is replayed comes from :class:`ResumableStreams`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...core.protocol import dumps
from ..protocol.frames import USE_CHAT_RESPONSE, Outcome
from ..streams.resumable import ResumableStreams, StreamRecord

__all__ = [
    "replay_chunk_frame",
    "replay_control_frame",
    "replay_errored_frames",
    "replay_frames",
]


def replay_chunk_frame(request_id: str, body: str, seq: int, *, continuation: bool) -> str:
    """R13: one replayed chunk, keys in ``sendReplayBodies``' order (``seq`` before
    ``continuation``, unlike live frames' builder ``frames.response_frame``)."""
    frame: dict[str, Any] = {
        "body": body,
        "done": False,
        "id": request_id,
        "type": USE_CHAT_RESPONSE,
        "replay": True,
        "seq": seq,
    }
    if continuation:
        frame["continuation"] = True
    return dumps(frame)


def replay_control_frame(
    request_id: str,
    *,
    done: bool,
    replay_complete: bool = False,
    continuation: bool = False,
    message_ids: Sequence[str] | None = None,
    outcome: Outcome | None = None,
) -> str:
    """R14/R15/R16: the end of a replay, keys in ``sendReplayControl``' order.

    ``messageIds`` then ``outcome``, both only on ``done`` frames (the live terminal frames put
    ``outcome`` first: this is why replays do not use ``frames.response_frame``).
    """
    frame: dict[str, Any] = {
        "body": "",
        "done": done,
        "id": request_id,
        "type": USE_CHAT_RESPONSE,
        "replay": True,
    }
    if replay_complete:
        frame["replayComplete"] = True
    if continuation:
        frame["continuation"] = True
    if done and message_ids:
        frame["messageIds"] = list(message_ids)
    if done and outcome:
        frame["outcome"] = outcome
    return dumps(frame)


def replay_frames(streams: ResumableStreams, request_id: str, *, live: bool) -> list[str]:
    """The frames answering a resume ACK for ``request_id`` (research §1.6, R13–R16).

    * Another request's stream is active: ``[]`` (the ACK is ignored).
    * ``live``: the stored chunks (R13) of the request's active stream — or of its
      just-closed stream whose terminal frames the agent still holds — then R14
      ``replayComplete``; only R14 when the rows are gone.
    * not ``live``, the request's stream is the active one (an orphan restored on wake):
      R13… then R15 (``done``, ``outcome: "aborted"``, its ``messageIds``). The caller then
      settles it with ``streams.complete(stream_id, "aborted")`` and persists the partial — only
      once the frames were sent, so a socket that closed mid-replay leaves it for the next.
    * not ``live``, a completed stream of the request exists: R13… then R16 with its
      ``messageIds`` and ``outcome``; else the bare R16, whose ``messageIds``/``outcome``
      come from the newest stream or the memory of the last 32 deleted ones.

    ``seq`` of replayed chunks starts at the stream's ``seq_base``.
    """
    streams.flush()
    active = streams.active
    if active is not None and active.request_id != request_id:
        return []
    record: StreamRecord | None
    if active is not None:
        record = streams.stream(active.stream_id)
    elif live:
        closed = streams.stream(streams.last_closed) if streams.last_closed else None
        record = closed if closed is not None and closed.request_id == request_id else None
    else:
        record = streams.latest(request_id, "completed")
    frames = _chunk_frames(streams, record) if record is not None else []
    continuation = record.continuation if record is not None else False
    if live:
        frames.append(
            replay_control_frame(
                request_id, done=False, replay_complete=True, continuation=continuation
            )
        )
    elif record is not None:
        outcome: Outcome | None = "aborted" if active is not None else record.outcome
        frames.append(
            replay_control_frame(
                request_id,
                done=True,
                continuation=continuation,
                message_ids=record.origin_message_ids,
                outcome=outcome,
            )
        )
    else:
        frames.append(
            replay_control_frame(
                request_id,
                done=True,
                message_ids=streams.origin_message_ids(request_id),
                outcome=streams.outcome(request_id),
            )
        )
    return frames


def replay_errored_frames(streams: ResumableStreams, request_id: str) -> list[str]:
    """R13 frames of the request's newest errored stream, no terminal: what precedes the
    terminal record's error frame (R17). ``[]`` when it has none."""
    streams.flush()
    record = streams.latest(request_id, "error")
    return _chunk_frames(streams, record) if record is not None else []


def _chunk_frames(streams: ResumableStreams, record: StreamRecord) -> list[str]:
    return [
        replay_chunk_frame(
            record.request_id, body, record.seq_base + i, continuation=record.continuation
        )
        for i, body in enumerate(streams.stored_bodies(record.id))
    ]
