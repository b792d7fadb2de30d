"""Resumable chat streams on real SQLite (``agents.chat.streams.resumable``).

A tiny Durable Object drives :class:`ResumableStreams` over its own ``ctx.storage.sql`` with the
harness's manual clock (``Date.now``). Thresholds and frames are those of ``ResumableStream`` in
``agents`` 0.32.0 (research §1.2 R13–R16, §1.6, §3.4, §3.5); replayed frames are compared byte
for byte with what the published package sends.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any, ClassVar

from js import Date
from workers import DurableObject

from agents.chat.requests.replay import replay_errored_frames, replay_frames
from agents.chat.streams.resumable import (
    ResumableStreams,
    create_tables,
    stored_chunk_bytes,
)
from doemu.testing.plugin import HarnessFactory

HOUR = 3_600_000


class BigBufferStreams(ResumableStreams):
    """Segments of up to 1,000 chunks, so the 100-chunk cap of the buffer shows."""

    buffer_size: ClassVar[int] = 1000


class Streams(DurableObject):
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        create_tables(ctx.storage.sql)
        self._streams = self._make(ResumableStreams)
        self._restored = self._streams.restore()

    def _make(self, cls: type[ResumableStreams]) -> ResumableStreams:
        return cls(self.ctx.storage.sql, Date.now, lambda: uuid.uuid4().hex[:21])

    async def big_buffer(self) -> None:
        self._streams = self._make(BigBufferStreams)

    async def call(self, method: str, *args: Any) -> Any:
        """``streams.<method>(*args)``, dataclasses as dicts."""
        return _plain(getattr(self._streams, method)(*args))

    async def start(
        self, request_id: str, message_id: str | None = None, continuation: bool = False,
        origin: list[str] | None = None,
    ) -> str:  # fmt: skip
        return self._streams.start(
            request_id, message_id=message_id, continuation=continuation,
            origin_message_ids=origin or (),
        )  # fmt: skip

    async def store(self, bodies: list[str], flush_now: bool = False) -> list[int | None]:
        return [self._streams.store(body, flush_now=flush_now) for body in bodies]

    async def persist_and_cutover(self, delete_rows: bool = True) -> bool:
        """What the agent does at the end of a turn: the message write, then the cutover."""
        self.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS msgs (id TEXT)")
        self.ctx.storage.sql.exec("INSERT INTO msgs VALUES ('assistant')")
        return self._streams.cutover(None, delete_rows=delete_rows)

    async def replay(self, request_id: str, live: bool) -> list[str]:
        return replay_frames(self._streams, request_id, live=live)

    async def replay_errored(self, request_id: str) -> list[str]:
        return replay_errored_frames(self._streams, request_id)

    async def state(self) -> dict[str, Any]:
        return {
            "active": _plain(self._streams.active),
            "restored": _plain(self._restored),
            "pending_cutover": self._streams.pending_cutover,
            "last_closed": self._streams.last_closed,
        }

    async def segments(self, stream_id: str) -> list[str]:
        rows = self.ctx.storage.sql.exec(
            "SELECT body FROM cf_ai_chat_stream_chunks WHERE stream_id = ? ORDER BY chunk_index",
            stream_id,
        )
        return [row["body"] for row in rows]

    async def raw(self, query: str, *params: Any) -> list[dict[str, Any]]:
        return [dict(row) for row in self.ctx.storage.sql.exec(query, *params)]


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return value


def delta(i: int) -> str:
    return json.dumps({"type": "text-delta", "id": "t0", "delta": f"w{i} "}, separators=(",", ":"))


def deltas(n: int, first: int = 0) -> list[str]:
    return [delta(i) for i in range(first, first + n)]


async def streams(doemu_harness: HarnessFactory, name: str) -> Any:
    h = await doemu_harness({"STREAMS": Streams})
    return h, h.env.STREAMS.getByName(name)


async def count(stub: Any, table: str) -> int:
    return int((await stub.raw(f"SELECT count(*) AS n FROM {table}"))[0]["n"])


# -- sizes, packing, flush thresholds -------------------------------------------------------------


def test_stored_size_is_the_json_escaped_utf8_length() -> None:
    # JSON.stringify('{"a":"é\n"}') is "{\"a\":\"é\\n\"}": 4 escaped quotes (8 bytes), an
    # escaped newline (2), é (2), "{", "a", ":" and "}" (4), and the surrounding quotes (2).
    assert stored_chunk_bytes('{"a":"é\n"}') == 18
    assert stored_chunk_bytes("") == 2


async def test_nine_chunks_stay_buffered_and_the_tenth_writes_one_packed_segment(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await streams(doemu_harness, unique_name("ten"))
    sid = await stub.start("r1")
    assert await stub.store(deltas(9)) == list(range(9))
    assert await stub.segments(sid) == []
    assert await stub.store([delta(9)]) == [9]
    assert await stub.segments(sid) == [json.dumps(deltas(10), separators=(",", ":"))]
    await stub.store(deltas(1, 10))
    await stub.call("flush")
    # A segment of one chunk is stored as the body itself, not as an array.
    assert (await stub.segments(sid))[1] == delta(10)
    assert await stub.call("stored_bodies", sid) == deltas(11)


async def test_a_full_buffer_of_100_chunks_is_flushed_before_the_next(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await streams(doemu_harness, unique_name("hundred"))
    await stub.big_buffer()
    sid = await stub.start("r1")
    await stub.store(deltas(100))
    assert await stub.segments(sid) == []
    await stub.store([delta(100)])
    (segment,) = await stub.segments(sid)
    assert json.loads(segment) == deltas(100)


async def test_a_chunk_that_would_pass_512000_bytes_starts_its_own_segment(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await streams(doemu_harness, unique_name("bytes"))
    sid = await stub.start("r1")
    first = "a" * 300_000
    exactly = "b" * (512_000 - stored_chunk_bytes(first) - 2)
    assert stored_chunk_bytes(first) + stored_chunk_bytes(exactly) == 512_000
    await stub.store([first, exactly])  # exactly at the limit: packed together
    assert await stub.segments(sid) == []
    await stub.call("flush")
    assert json.loads((await stub.segments(sid))[0]) == [first, exactly]

    one_more = "c" * (512_000 - stored_chunk_bytes(first) - 1)
    await stub.store([first, one_more])  # one byte over: the buffer is flushed first
    assert (await stub.segments(sid))[1:] == [first]
    await stub.call("flush")
    assert (await stub.segments(sid))[2:] == [one_more]
    assert await stub.call("stored_bodies", sid) == [first, exactly, first, one_more]


async def test_an_oversized_chunk_is_not_stored_and_gets_no_seq(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await streams(doemu_harness, unique_name("oversized"))
    sid = await stub.start("r1")
    huge = "x" * 1_799_999  # 1,800,001 bytes once quoted
    fits = "y" * 1_799_998
    assert await stub.store([delta(0), huge, fits, delta(1)]) == [0, None, 1, 2]
    assert await stub.call("stored_bodies", sid) == [delta(0), fits, delta(1)]


async def test_flush_now_writes_at_once(doemu_harness: HarnessFactory, unique_name: Any) -> None:
    _, stub = await streams(doemu_harness, unique_name("flush-now"))
    sid = await stub.start("r1")
    await stub.store(deltas(2))
    tool = '{"type":"tool-output-available","toolCallId":"c1","output":{"temp":21}}'
    assert await stub.store([tool], True) == [2]
    assert json.loads((await stub.segments(sid))[0]) == [*deltas(2), tool]


# -- lifecycle ------------------------------------------------------------------------------------


async def test_start_records_the_stream_and_makes_it_active_and_live(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h, stub = await streams(doemu_harness, unique_name("start"))
    sid = await stub.start("r1", "assistant_1", True, ["u1", "q1"])
    now = int(h.clock.now())
    assert (await stub.state())["active"] == {
        "stream_id": sid,
        "request_id": "r1",
        "continuation": True,
        "live": True,
        "message_id": "assistant_1",
        "origin_message_ids": ["u1", "q1"],
    }
    assert await stub.raw("SELECT * FROM cf_ai_chat_stream_metadata") == [
        {
            "id": sid,
            "request_id": "r1",
            "status": "streaming",
            "created_at": now,
            "completed_at": None,
            "message_id": "assistant_1",
            "is_continuation": 1,
            "origin_message_ids": '["u1","q1"]',
            "seq_base": 0,
            "outcome": None,
            "error_message": None,
            "updated_at": now,
        }
    ]


async def test_finish_then_cutover_deletes_the_streams_rows(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await streams(doemu_harness, unique_name("cutover"))
    sid = await stub.start("r1", "a1", False, ["u1"])
    await stub.store(deltas(3))
    assert await stub.call("finish") == sid
    state = await stub.state()
    assert (state["active"], state["pending_cutover"], state["last_closed"]) == (None, sid, sid)
    # Finished but not cut over: still "streaming", chunks flushed (recovery's evidence).
    assert (await stub.call("stream", sid))["status"] == "streaming"
    assert await stub.call("stored_bodies", sid) == deltas(3)
    assert await stub.persist_and_cutover() is True
    assert await count(stub, "cf_ai_chat_stream_metadata") == 0
    assert await count(stub, "cf_ai_chat_stream_chunks") == 0
    assert (await stub.state())["pending_cutover"] is None
    assert await stub.call("cutover", sid) is False  # already gone


async def test_cutover_can_keep_the_settled_rows_until_the_next_start(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h, stub = await streams(doemu_harness, unique_name("keep-rows"))
    sid = await stub.start("r1")
    await stub.store(deltas(2))
    await stub.call("finish", "aborted")
    assert await stub.persist_and_cutover(False) is True
    row = await stub.call("stream", sid)
    assert (row["status"], row["outcome"], row["completed_at"]) == (
        "completed",
        "aborted",
        int(h.clock.now()),
    )
    await stub.start("r2")
    assert await stub.call("stream", sid) is None


async def test_errored_and_completed_rows_stay_until_the_next_start(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await streams(doemu_harness, unique_name("reclaim-finished"))
    errored = await stub.start("r1")
    await stub.store(deltas(3))
    await stub.call("mark_error", "custom error: model exploded")
    row = await stub.call("stream", errored)
    assert (row["status"], row["error_message"]) == ("error", "custom error: model exploded")
    recovering = await stub.start("r2")
    assert await stub.call("stream", errored) is None  # reclaimed by this start
    await stub.store(deltas(1))
    await stub.call("complete", recovering, "recovering")
    nothing = await stub.start("r3")
    await stub.call("finish")
    await stub.call("finalize_pending")
    assert (await stub.call("stream", nothing))["status"] == "completed"
    assert await stub.call("stream", recovering) is None
    await stub.start("r4")
    assert [r["request_id"] for r in await stub.call("rows")] == ["r4"]


async def test_abandoned_streaming_rows_are_reclaimed_after_an_hour_of_silence(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h, stub = await streams(doemu_harness, unique_name("abandoned"))
    quiet = await stub.start("r1")  # never finished: an abandoned stream
    await h.advance(HOUR - 60_000)
    busy = await stub.start("r2")  # opened later, and a chunk written later still
    await h.advance(59_000)
    await stub.store([delta(0)], True)
    await stub.call("finish")
    await h.advance(1_000)  # r1: exactly one hour old
    await stub.start("r3")
    assert await stub.call("stream", quiet) is not None
    await h.advance(1)  # r1: idle for over an hour
    await stub.start("r4")
    assert await stub.call("stream", quiet) is None
    # r2's row was stamped over an hour ago too, but its last chunk is recent.
    await h.advance(HOUR - 1_001)  # r2's last chunk: exactly one hour old
    await stub.call("reclaim")
    assert await stub.call("stream", busy) is not None
    await h.advance(1)
    assert await stub.call("reclaim") == 1
    assert await stub.call("stream", busy) is None
    # The active stream is never reclaimed, however old.
    await h.advance(2 * HOUR)
    active = (await stub.state())["active"]["stream_id"]
    await stub.call("reclaim")
    assert await stub.call("stream", active) is not None


async def test_a_restarted_request_continues_its_seq_numbering(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await streams(doemu_harness, unique_name("seq-base"))
    await stub.start("r1")
    await stub.store(deltas(3))
    await stub.call("mark_error", "overflow")
    second = await stub.start("r1")
    assert await stub.call("seq_base", second) == 3
    assert await stub.store(deltas(2, 3)) == [3, 4]
    third = await stub.start("r1")
    assert await stub.call("seq_base", third) == 5
    replay = await stub.replay("r1", True)
    assert replay == [
        '{"body":"","done":false,"id":"r1","type":"cf_agent_use_chat_response",'
        '"replay":true,"replayComplete":true}'
    ]


async def test_restore_makes_the_newest_streaming_row_an_orphan_after_a_restart(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    name = unique_name("restore")
    h, stub = await streams(doemu_harness, name)
    done = await stub.start("r0")
    await stub.call("complete", done)
    older = await stub.start("r1")
    await stub.store(deltas(5))
    newest = await stub.start("r2", "assistant_2", True, ["u2"])  # flushes r1's five
    await stub.store(deltas(12))  # ten flushed; two only in memory
    await h.restart()
    stub = h.env.STREAMS.getByName(name)
    state = await stub.state()
    assert state["restored"] == {
        "stream_id": newest,
        "request_id": "r2",
        "continuation": True,
        "live": False,
        "message_id": "assistant_2",
        "origin_message_ids": ["u2"],
    }
    assert state["active"] == state["restored"]
    assert await stub.call("stored_bodies", newest) == deltas(10)  # the unflushed two are lost
    assert await stub.call("stored_bodies", older) == deltas(5)
    assert await stub.store([delta(99)]) == [None]  # a restored stream's count is unknown


# -- replay frames, byte for byte -----------------------------------------------------------------

R = '"type":"cf_agent_use_chat_response"'


def r13(request_id: str, body: str, seq: int, continuation: bool = False) -> str:
    tail = ',"continuation":true' if continuation else ""
    return (
        f'{{"body":{json.dumps(body)},"done":false,"id":"{request_id}",{R},'
        f'"replay":true,"seq":{seq}{tail}}}'
    )


async def test_replay_of_a_live_stream_is_its_chunks_then_replay_complete(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await streams(doemu_harness, unique_name("replay-live"))
    start = '{"type":"start","messageId":"assistant_1"}'
    await stub.start("r1", "assistant_1", False, ["u1"])
    await stub.store([start, delta(0)])  # buffered: the replay flushes them first
    assert await stub.replay("r1", True) == [
        '{"body":"{\\"type\\":\\"start\\",\\"messageId\\":\\"assistant_1\\"}","done":false,'
        '"id":"r1","type":"cf_agent_use_chat_response","replay":true,"seq":0}',
        r13("r1", delta(0), 1),
        '{"body":"","done":false,"id":"r1","type":"cf_agent_use_chat_response",'
        '"replay":true,"replayComplete":true}',
    ]
    assert await stub.store([delta(1)]) == [2]  # live numbering goes on
    assert await stub.replay("other", True) == []  # another request: ignored
    assert await stub.replay("other", False) == []


async def test_replay_of_a_continuation_carries_the_flag_after_seq(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await streams(doemu_harness, unique_name("replay-continuation"))
    await stub.start("c1", None, True, [])
    await stub.store(['{"type":"start"}'])
    assert await stub.replay("c1", True) == [
        '{"body":"{\\"type\\":\\"start\\"}","done":false,"id":"c1",'
        '"type":"cf_agent_use_chat_response","replay":true,"seq":0,"continuation":true}',
        '{"body":"","done":false,"id":"c1","type":"cf_agent_use_chat_response",'
        '"replay":true,"replayComplete":true,"continuation":true}',
    ]


async def test_replay_of_an_orphan_ends_done_aborted_and_complete_settles_it(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    name = unique_name("replay-orphan")
    h, stub = await streams(doemu_harness, name)
    sid = await stub.start("r1", "a1", True, ["u1"])
    await stub.store(deltas(10))
    await h.restart()
    stub = h.env.STREAMS.getByName(name)
    frames = await stub.replay("r1", False)
    assert frames[:10] == [r13("r1", delta(i), i, True) for i in range(10)]
    assert frames[10] == (
        '{"body":"","done":true,"id":"r1","type":"cf_agent_use_chat_response","replay":true,'
        '"continuation":true,"messageIds":["u1"],"outcome":"aborted"}'
    )
    assert (await stub.state())["active"]["stream_id"] == sid  # untouched until the caller...
    await stub.call("complete", sid)  # ...settles it (outcome defaults to aborted)
    row = await stub.call("stream", sid)
    assert (row["status"], row["outcome"]) == ("completed", "aborted")
    assert (await stub.state())["active"] is None
    # The ACK of a completed request: its chunks, then done with its outcome (R16).
    again = await stub.replay("r1", False)
    assert again == frames


async def test_replay_after_the_stream_finished_but_before_the_cutover(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await streams(doemu_harness, unique_name("replay-held"))
    await stub.start("r1", "a1", False, ["u1"])
    await stub.store(deltas(2))
    await stub.call("finish")
    complete = (
        '{"body":"","done":false,"id":"r1","type":"cf_agent_use_chat_response",'
        '"replay":true,"replayComplete":true}'
    )
    # The agent still holds the terminal frames: chunks, then replayComplete.
    assert await stub.replay("r1", True) == [
        r13("r1", delta(0), 0),
        r13("r1", delta(1), 1),
        complete,
    ]
    await stub.persist_and_cutover()
    assert await stub.replay("r1", True) == [complete]


async def test_the_bare_done_frame_remembers_message_ids_and_outcome_of_32_deleted_streams(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await streams(doemu_harness, unique_name("replay-bare"))
    await stub.start("r1", "a1", False, ["u1"])
    await stub.call("finish")
    await stub.persist_and_cutover()
    assert await stub.replay("r1", False) == [
        '{"body":"","done":true,"id":"r1","type":"cf_agent_use_chat_response","replay":true,'
        '"messageIds":["u1"]}'
    ]
    await stub.start("r2", "a2", False, ["u2"])
    await stub.call("finish", "aborted")
    await stub.persist_and_cutover()
    assert await stub.replay("r2", False) == [
        '{"body":"","done":true,"id":"r2","type":"cf_agent_use_chat_response","replay":true,'
        '"messageIds":["u2"],"outcome":"aborted"}'
    ]
    assert await stub.replay("unknown", False) == [
        '{"body":"","done":true,"id":"unknown","type":"cf_agent_use_chat_response","replay":true}'
    ]
    for i in range(3, 34):  # 31 more deleted streams: r1 is the oldest of 33 and forgotten
        await stub.start(f"r{i}", None, False, [f"u{i}"])
        await stub.call("finish")
        await stub.persist_and_cutover()
    assert await stub.call("origin_message_ids", "r1") is None
    assert await stub.call("origin_message_ids", "r2") == ["u2"]


async def test_replay_of_an_errored_stream_for_the_terminal_record(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await streams(doemu_harness, unique_name("replay-errored"))
    await stub.start("r2", "a2", False, ["u2"])
    await stub.store(deltas(2))
    await stub.call("mark_error", "custom error: model exploded")
    assert await stub.replay_errored("r2") == [
        r13("r2", delta(0), 0),
        r13("r2", delta(1), 1),
    ]
    assert await stub.replay_errored("r1") == []
    # Not completed, so a plain ACK gets the bare frame, with the errored row's messageIds.
    assert await stub.replay("r2", False) == [
        '{"body":"","done":true,"id":"r2","type":"cf_agent_use_chat_response","replay":true,'
        '"messageIds":["u2"]}'
    ]


async def test_clear_all_deletes_every_stream_and_forgets(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await streams(doemu_harness, unique_name("clear"))
    await stub.start("r1", None, False, ["u1"])
    await stub.call("finish")
    await stub.persist_and_cutover()
    await stub.start("r2")
    await stub.store(deltas(3))
    await stub.call("clear_all")
    assert await count(stub, "cf_ai_chat_stream_metadata") == 0
    assert await count(stub, "cf_ai_chat_stream_chunks") == 0
    assert await stub.call("origin_message_ids", "r1") is None
    assert (await stub.state())["active"] is None
    assert await stub.store([delta(0)]) == [None]  # nothing active


async def test_restore_skips_finished_streams_and_finds_none_when_all_are(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    name = unique_name("restore-finished")
    h, stub = await streams(doemu_harness, name)
    abandoned = await stub.start("r1")
    newer = await stub.start("r2")
    await stub.call("complete", newer)  # newest, but completed
    await h.restart()
    stub = h.env.STREAMS.getByName(name)
    assert (await stub.state())["restored"]["stream_id"] == abandoned
    await stub.call("complete", abandoned)
    await h.restart()
    assert (await h.env.STREAMS.getByName(name).state())["restored"] is None
