"""``SessionStream``'s numbering: gap-free sequences across crashes, restarts and new runs, the
``/history`` pages, the ``fromSequence`` range, and the chunks the stream refuses.

Crashes are ``ctx.abort`` / ``h.reset`` (uncommitted writes dropped); ``/history`` is read
through the object's own fetch handler, in process.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from doemu.runtime import Runtime
from doemu.testing.plugin import HarnessFactory

from .polling import eventually
from .servers import serve
from .session_stream_app import CLASSES, HANGING, chunk_events, session_runtime, sse_events


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    async with session_runtime(tmp_path) as runtime:
        yield runtime


# -- sequences ------------------------------------------------------------------------------------


async def test_sequences_are_gap_free_across_crashes_and_a_restart(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness(CLASSES)
    stub = h.env.SESSION.getByName("crashy")
    assert await stub.status() == {"latest": -1, "terminal": None, "sse": 0}
    assert await stub.push_many(3) == [0, 1, 2]

    with pytest.raises(Exception, match="simulated crash"):
        await stub.crash_after_pushing(2)  # 3 and 4 were taken, then rolled back
    assert await stub.push({"type": "after-abort"}) == 3

    hanging = asyncio.ensure_future(stub.push_in_open_transaction(5))
    HANGING.clear()
    await eventually(lambda: HANGING, what="the appends inside the open transaction")
    assert HANGING == [8] and not hanging.done()
    h.reset("SESSION", "crashy", "SIGKILL")  # the open transaction's rows die with it
    with pytest.raises(Exception, match="SIGKILL"):
        await hanging
    assert await stub.push({"type": "after-reset"}) == 4

    await h.restart()
    stub = h.env.SESSION.getByName("crashy")
    assert await stub.push({"type": "after-restart"}) == 5
    response = await stub.fetch("http://session/history?fromSequence=0&limit=100")
    history = json.loads(await response.text())
    assert [c["sequence"] for c in history["chunks"]] == list(range(6))
    assert [c["chunk"]["type"] for c in history["chunks"]] == [
        "text_delta", "text_delta", "text_delta", "after-abort", "after-reset", "after-restart",
    ]  # fmt: skip
    assert history["latestSequence"] == 5 and history["hasMore"] is False


# -- history and fromSequence ---------------------------------------------------------------------


async def _get(stub: Any, query: str) -> tuple[int, Any]:
    response = await stub.fetch(f"http://session/history?{query}")
    return response.status, json.loads(await response.text())


async def test_history_pages_with_has_more_and_a_clamped_limit(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness(CLASSES)
    stub = h.env.SESSION.getByName("pages")
    assert await _get(stub, "") == (200, {"chunks": [], "hasMore": False, "latestSequence": -1})
    await stub.push_many(1005)

    status, page = await _get(stub, "fromSequence=0&limit=10")
    assert status == 200 and page["hasMore"] is True and page["latestSequence"] == 1004
    assert page["chunks"][3] == {"sequence": 3, "chunk": {"type": "text_delta", "i": 3, "pad": ""}}
    assert [c["sequence"] for c in page["chunks"]] == list(range(10))
    _, tail = await _get(stub, "fromSequence=1000&limit=10")
    assert [c["sequence"] for c in tail["chunks"]] == list(range(1000, 1005))
    assert tail["hasMore"] is False
    _, exact = await _get(stub, "fromSequence=995&limit=10")  # ends on the last chunk exactly
    assert len(exact["chunks"]) == 10 and exact["hasMore"] is False
    _, at_end = await _get(stub, "fromSequence=1005")
    assert at_end == {"chunks": [], "hasMore": False, "latestSequence": 1004}
    _, one = await _get(stub, "fromSequence=7&limit=0")  # clamped up to 1
    assert [c["sequence"] for c in one["chunks"]] == [7] and one["hasMore"] is True
    _, most = await _get(stub, "limit=5000")  # clamped down to 1000
    assert len(most["chunks"]) == 1000 and most["hasMore"] is True
    _, default = await _get(stub, "fromSequence=2")
    assert [c["sequence"] for c in default["chunks"]] == list(range(2, 102))


@pytest.mark.parametrize(
    ("value", "status", "said"),
    [
        ("-1", 416, "fromSequence '-1' is out of range: it must be a whole number from 0 to 3"),
        ("4", 416, "fromSequence '4' is out of range: it must be a whole number from 0 to 3"),
        ("9" * 40, 416, "is out of range: it must be a whole number from 0 to 3"),
        ("abc", 400, "fromSequence must be a whole number from 0 to 3 (latestSequence 2 + 1)"),
        ("1.5", 400, "got '1.5'"),
        ("", 400, "got ''"),
        ("+1", 400, "got '+1'"),
        (" 1", 400, "got ' 1'"),
    ],
)
async def test_a_bad_from_sequence_is_refused_naming_the_value_and_the_range(
    doemu_harness: HarnessFactory, value: str, status: int, said: str
) -> None:
    h = await doemu_harness(CLASSES)
    stub = h.env.SESSION.getByName("ranges")
    await stub.push_many(3)
    for path in ("history", "sse"):
        response = await stub.fetch(
            f"http://session/{path}?" + httpx.QueryParams({"fromSequence": value}).__str__()
        )
        assert response.status == status
        assert said in json.loads(await response.text())["error"]


async def test_check_from_sequence_accepts_the_whole_valid_range(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness(CLASSES)
    stub = h.env.SESSION.getByName("valid")
    assert await stub.check(None) == 0  # absent: from the start
    assert await stub.check("0") == 0  # an empty stream can be read from 0 (its future)
    await stub.push_many(3)
    assert [await stub.check(v) for v in ("0", "2", "3", 3, "002")] == [0, 2, 3, 3, 2]
    assert await stub.check(True) == "StreamRangeError 400"
    assert await stub.check(1.5) == "StreamRangeError 400"  # (1.0 crosses RPC as 1)
    assert await stub.check(-3) == "StreamRangeError 416"


# -- runs, and what the stream refuses ------------------------------------------------------------


async def test_reopen_starts_a_new_run_whose_sequences_continue(runtime: Runtime) -> None:
    stub = runtime.env.SESSION.getByName("runs")
    await stub.push_many(3)
    await stub.end_run("first")
    assert (await stub.status())["terminal"] == {"type": "end", "finalOutput": "first"}
    refusal = (
        "StreamClosedError: the session's stream holds the last run's 'end' event: call "
        "reopen() before a new run appends, finishes or fails"
    )
    assert await stub.closed_errors() == [refusal, refusal]
    await stub.new_run()
    assert await stub.status() == {"latest": 2, "terminal": None, "sse": 0}
    events: list[dict[str, Any]] = []
    async with serve(runtime) as srv:
        reader = asyncio.ensure_future(sse_events(srv, "SESSION/runs/sse?fromSequence=2", events))
        await eventually(lambda: events, what="the replay of chunk 2")
        assert await stub.push({"type": "second run"}) == 3
        await stub.end_run("second")
        await asyncio.wait_for(reader, 5)
    assert chunk_events(events) == [2, 3]  # the first run's end is not replayed: it was reopened
    assert events[-1] == {"type": "end", "finalOutput": "second"}


async def test_a_chunk_that_is_no_json_object_is_refused_and_nothing_is_stored(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness(CLASSES)
    stub = h.env.SESSION.getByName("strict")
    refused = await stub.errors()
    assert [name for name, _ in refused] == ["StreamPayloadError"] * 5
    assert "a stream chunk must be JSON-serialisable" in refused[0][1]
    assert "must be a JSON object (a mapping), got list" in refused[1][1]
    assert "a stream chunk must be JSON-serialisable" in refused[2][1]  # NaN is not JSON
    assert "over the 1800000-byte limit of one stored row" in refused[3][1]
    assert "the run's final output must be JSON-serialisable" in refused[4][1]
    assert await stub.status() == {"latest": -1, "terminal": None, "sse": 0}
    assert await stub.push({"type": "fine"}) == 0
