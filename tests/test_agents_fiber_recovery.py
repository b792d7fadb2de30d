"""Durable fibers recovered after a simulated crash: the hook called once per orphan, from a
request or the alarm, poison rows backed off then dropped, bounded scans, corrupt snapshots, and
never a fiber still running in this process.

A crash is ``h.reset(...)``: in-flight work is cancelled and uncommitted writes dropped, so a
fiber's ``cf_agents_runs`` row (committed when its turn yielded) is left behind exactly as after a
SIGKILL. Time is a manual clock; background progress is awaited by polling with a deadline.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from agents import AgentOptions
from agents.fibers.recovery import MAX_BACKOFF_MS, backoff_ms
from agents.fibers.types import FiberRecoveryContext
from doemu.testing.plugin import HarnessFactory

from .fiber_agents import FiberAgent, HandOffAgent, _run_names, _runs_with_snapshots, gate
from .polling import eventually


class TinyDeadlineAgent(FiberAgent):
    options = AgentOptions(keep_alive_interval_ms=1000, fiber_recovery_scan_deadline_ms=2)


async def test_recovery_after_crash_calls_hook_once_with_name_snapshot_created_at(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"FIBERS": FiberAgent})
    name = unique_name("crash")
    stub = h.env.FIBERS.getByName(name)
    await stub.start_bg("research", ["a", "b"])
    (before,) = await eventually(lambda: _runs_with_snapshots(stub, 1))
    assert await h.get_alarm("FIBERS", name) == h.clock.now() + 1000  # keep-alive heartbeat
    h.reset("FIBERS", name, "simulated crash")
    assert not h.is_live("FIBERS", name)

    # The next activation scans before anything else is delivered.
    (log,) = await stub.recovered()
    assert log["id"] == before["id"]
    assert log["name"] == "research"
    assert json.loads(log["snapshot"]) == {"fiber": "research", "steps": ["a", "b"]}
    assert log["created_at"] == before["created_at"]
    assert await stub.runs() == []
    # The heartbeat alarm left by the dead process finds nothing more to do.
    await h.advance(5_000)
    assert len(await stub.recovered()) == 1
    assert await h.get_alarm("FIBERS", name) is None


async def test_recovery_runs_from_the_alarm_without_any_request(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"FIBERS": FiberAgent})
    name = unique_name("alarm-recovery")
    stub = h.env.FIBERS.getByName(name)
    await stub.start_bg("background", [1])
    await eventually(lambda: _runs_with_snapshots(stub, 1))
    h.reset("FIBERS", name, "simulated crash")
    await h.advance(1_000)  # only the persisted heartbeat alarm wakes the object
    assert h.is_live("FIBERS", name)
    assert [r["name"] for r in await stub.recovered()] == ["background"]


async def test_poison_recovery_row_is_kept_with_doubling_gaps_then_dropped_at_max_age(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"FIBERS": FiberAgent})
    name = unique_name("poison")
    stub = h.env.FIBERS.getByName(name)
    await stub.start_bg("poison-pill", [])
    (row,) = await eventually(lambda: _runs_with_snapshots(stub, 1))
    h.reset("FIBERS", name, "simulated crash")
    t0 = h.clock.now()
    assert row["created_at"] == t0

    assert len(await stub.recovered()) == 1  # first attempt at activation: failed
    assert [r["name"] for r in await stub.runs()] == ["poison-pill"]  # kept
    assert await stub.retry_rows() == [
        {"id": row["id"], "attempts": 1, "next_attempt_at": t0 + 1000}
    ]
    assert await h.get_alarm("FIBERS", name) == t0 + 1000
    await h.advance(1_000)
    assert len(await stub.recovered()) == 2
    # The back-off is durable: an eviction does not make the next activation retry early.
    await h.evict("FIBERS", name)
    assert len(await stub.recovered()) == 2
    assert await h.get_alarm("FIBERS", name) == t0 + 3000

    await h.advance(1_300_000)
    times = [r["at"] - t0 for r in await stub.recovered()]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    doubling = [1000 * 2**i for i in range(9)]  # 1 s .. 256 s
    assert gaps[:9] == doubling
    assert gaps[9:11] == [MAX_BACKOFF_MS, MAX_BACKOFF_MS]
    assert times[-1] == 1_200_000  # the last attempt is due exactly at max age
    assert gaps == [backoff_ms(1000, i + 1) for i in range(11)] + [1_200_000 - 1_111_000]
    assert await stub.runs() == []
    assert await stub.retry_rows() == []
    (error,) = await stub.errors()
    assert error["kind"] == "FiberRecoveryExpiredError"
    assert "poison-pill" in error["message"]
    assert "cannot recover poison-pill" in error["cause"]
    assert await h.get_alarm("FIBERS", name) is None


async def test_twenty_orphans_with_tiny_scan_deadline_are_each_recovered_exactly_once(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"FIBERS": TinyDeadlineAgent})
    TinyDeadlineAgent.clock = h.clock
    try:
        name = unique_name("orphans")
        stub = h.env.FIBERS.getByName(name)
        for i in range(20):
            await stub.start_bg(f"orphan-{i:02d}", [i])
        rows = await eventually(lambda: _runs_with_snapshots(stub, 20))
        h.reset("FIBERS", name, "simulated crash")

        first_scan = await stub.recovered()  # activation: the scan stops at its deadline
        assert 0 < len(first_scan) < 20
        # Rows left: one heartbeat later (never "now", which could spin without progress).
        assert await h.get_alarm("FIBERS", name) == h.clock.now() + 1000
        await h.advance(20_000)
        log = await stub.recovered()
        assert sorted(r["id"] for r in log) == sorted(r["id"] for r in rows)  # once each
        assert len({r["at"] for r in log}) == 20
        assert {json.loads(r["snapshot"])["fiber"] for r in log} == {r["name"] for r in rows}
        assert await stub.runs() == []
        assert await h.get_alarm("FIBERS", name) is None
    finally:
        TinyDeadlineAgent.clock = None


async def test_corrupt_snapshot_recovers_as_none(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"FIBERS": FiberAgent})
    name = unique_name("corrupt")
    stub = h.env.FIBERS.getByName(name)
    await stub.start_bg("corrupted", [1])
    (row,) = await eventually(lambda: _runs_with_snapshots(stub, 1))
    corrupt = "UPDATE cf_agents_runs SET snapshot = '{not json' WHERE id = ?"
    await h.runtime.host("FIBERS", name).call("test", lambda inst: inst.sql(corrupt, row["id"]))
    h.reset("FIBERS", name, "simulated crash")
    (log,) = await stub.recovered()
    assert log["name"] == "corrupted"
    assert json.loads(log["snapshot"]) is None


async def test_recovery_hand_off_keeps_the_new_fiber_through_a_second_crash(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"FIBERS": HandOffAgent})
    name = unique_name("hand-off")
    stub = h.env.FIBERS.getByName(name)
    await stub.start_and_return("hand-off")
    h.reset("FIBERS", name, "first crash")
    log = await stub.recovered()  # activation: the hook hands off to "resumed"
    assert [r["name"] for r in log] == ["hand-off", "rows-at-hand-off"]
    assert json.loads(log[1]["snapshot"]) == ["hand-off", "resumed"]  # same turn: both rows
    assert [r["name"] for r in await stub.runs()] == ["resumed"]
    h.reset("FIBERS", name, "second crash")
    names = sorted(r["name"] for r in await stub.recovered())
    assert names == ["hand-off", "resumed", "rows-at-hand-off"]  # each once


class RaceAgent(FiberAgent):
    """The orphan's hook (its retry, from the alarm) lets the live fiber finish meanwhile."""

    async def on_fiber_recovered(self, ctx: FiberRecoveryContext) -> None:
        await super().on_fiber_recovered(ctx)
        if ctx.name == "orphan" and ctx.attempt == 1:
            raise RuntimeError("transient")  # retried by the heartbeat alarm, 1 s later
        if ctx.name == "orphan":
            gate(self.name, "finishes").set()  # e.g. the hook does I/O; the live fiber ends
            for _ in range(50):
                if len(self.running_fiber_ids) == 1:
                    break
                await asyncio.sleep(0)


async def test_fiber_finishing_while_the_scan_awaits_a_hook_is_not_recovered(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"FIBERS": RaceAgent})
    name = unique_name("stale-scan")
    stub = h.env.FIBERS.getByName(name)
    await stub.start_bg("orphan", [])
    await eventually(lambda: _runs_with_snapshots(stub, 1))
    h.reset("FIBERS", name, "crash")
    assert [r["attempt"] for r in await stub.recovered()] == [1]  # failed: backing off
    await h.advance(10)  # the live fibers sort after the orphan
    await stub.start_bg("finishes", [])
    await stub.start_bg("keeps-running", [])
    await eventually(lambda: _runs_with_snapshots(stub, 3))

    await h.advance(1_000)  # the alarm-time scan: orphan retried; "finishes" ends meanwhile
    await eventually(lambda: _run_names(stub, ["keeps-running"]))
    await h.advance(3_000)  # more heartbeat scans while "keeps-running" runs
    assert [(r["name"], r["attempt"]) for r in await stub.recovered()] == [
        ("orphan", 1),
        ("orphan", 2),
    ]
    gate(name, "keeps-running").set()
    await eventually(lambda: _run_names(stub, []))
    assert len(await stub.recovered()) == 2


async def test_alarm_time_scan_never_recovers_a_fiber_running_in_this_process(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"FIBERS": FiberAgent})
    name = unique_name("live-scan")
    stub = h.env.FIBERS.getByName(name)
    await stub.start_bg("live", [1])
    await eventually(lambda: _runs_with_snapshots(stub, 1))
    for _ in range(5):
        assert await h.run_alarm("FIBERS", name)  # heartbeat alarm: a scan each time
    assert await stub.recovered() == []
    assert [r["name"] for r in await stub.runs()] == ["live"]
    gate(name, "live").set()
    await eventually(lambda: _run_names(stub, []))
    assert await stub.recovered() == []


class SlowListingAgent(FiberAgent):
    """Listing the run rows takes longer than the whole scan deadline."""

    options = AgentOptions(keep_alive_interval_ms=1000, fiber_recovery_scan_deadline_ms=2)

    def sql(self, query: str, *params: Any) -> list[dict[str, Any]]:
        if self.clock is not None and "FROM cf_agents_runs" in query and "ORDER BY" in query:
            self.clock.set(self.clock.now() + 10)
        return super().sql(query, *params)


async def test_every_scan_recovers_at_least_one_row_even_past_its_deadline(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"FIBERS": SlowListingAgent})
    name = unique_name("slow-listing")
    stub = h.env.FIBERS.getByName(name)
    for i in range(3):
        await stub.start_bg(f"orphan-{i}", [i])
    await eventually(lambda: _runs_with_snapshots(stub, 3))
    h.reset("FIBERS", name, "crash")
    SlowListingAgent.clock = h.clock
    try:
        assert len(await stub.recovered()) == 1  # activation: one row, then the deadline
        assert await h.get_alarm("FIBERS", name) == h.clock.now() + 1000  # a heartbeat later
        # (The agent moves the clock 10 ms per scan: advance a little past each alarm.)
        await h.advance(1_050)
        assert len(await stub.recovered()) == 2
        await h.advance(1_000)
        assert len(await stub.recovered()) == 3
        assert await stub.runs() == []
    finally:
        SlowListingAgent.clock = None
