"""Durable fibers in process: ``run_fiber``, ``stash``, and recovery after a simulated crash.

A crash is ``h.reset(...)``: in-flight work is cancelled and uncommitted writes dropped, so a
fiber's ``cf_agents_runs`` row (committed when its turn yielded) is left behind exactly as after a
SIGKILL. Time is a manual clock; background progress is awaited by polling with a deadline.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any, ClassVar

import pytest
from js import Date

from agents import Agent, AgentOptions, NotInFiberError
from agents.core.portable import wait_until
from agents.fibers.recovery import MAX_BACKOFF_MS, backoff_ms
from agents.fibers.types import FiberContext, FiberRecoveryContext
from doemu.clock import ManualClock
from doemu.testing.plugin import HarnessFactory

from .polling import eventually

#: Gates that background fibers wait on, keyed by (object name, fiber name). Never set for a
#: fiber meant to be "crashed" mid-flight.
GATES: dict[tuple[str, str], asyncio.Event] = {}


def gate(obj: str, fiber: str) -> asyncio.Event:
    return GATES.setdefault((obj, fiber), asyncio.Event())


class FiberAgent(Agent):
    options = AgentOptions(keep_alive_interval_ms=1000, fiber_recovery_max_age_ms=1_200_000)
    #: Set by a test that wants hooks to take (manual) time: each hook moves the clock by 1 ms.
    clock: ClassVar[ManualClock | None] = None

    async def on_start(self) -> None:
        self.sql(
            "CREATE TABLE IF NOT EXISTS recovered_log "
            "(id TEXT, name TEXT, snapshot TEXT, created_at INTEGER, at INTEGER, attempt INTEGER)"
        )
        self.sql("CREATE TABLE IF NOT EXISTS errors_log (kind TEXT, message TEXT, cause TEXT)")

    async def on_fiber_recovered(self, ctx: FiberRecoveryContext) -> None:
        from js import Date

        self.sql(
            "INSERT INTO recovered_log VALUES (?, ?, ?, ?, ?, ?)",
            ctx.id,
            ctx.name,
            json.dumps(ctx.snapshot),
            ctx.created_at,
            Date.now(),
            ctx.attempt,
        )
        if self.clock is not None:
            self.clock.set(self.clock.now() + 1)
        if ctx.name.startswith("poison"):
            raise RuntimeError(f"cannot recover {ctx.name}")

    async def on_error(self, error: BaseException, context: Any = None) -> None:
        self.sql(
            "INSERT INTO errors_log VALUES (?, ?, ?)",
            type(error).__name__,
            str(error),
            repr(error.__cause__),
        )

    # -- RPC used by the tests -------------------------------------------------------------------
    async def run_inline(self, value: Any) -> dict[str, Any]:
        seen: dict[str, Any] = {}

        async def body(ctx: FiberContext) -> Any:
            seen["rows"] = self.sql("SELECT id, name, snapshot FROM cf_agents_runs")
            seen["id"] = ctx.id
            seen["snapshot"] = ctx.snapshot
            seen["keep_alive_refs"] = self.keep_alive_refs
            await asyncio.sleep(0)
            return {"echo": value}

        result = await self.run_fiber("inline", body)
        return {
            "result": result,
            **seen,
            "after": self.sql("SELECT id FROM cf_agents_runs"),
            "refs_after": self.keep_alive_refs,
        }

    async def run_failing(self) -> dict[str, Any]:
        seen: dict[str, Any] = {}

        async def body(ctx: FiberContext) -> None:
            seen["rows"] = len(self.sql("SELECT id FROM cf_agents_runs"))
            await asyncio.sleep(0)
            raise ValueError("step 3 broke")

        try:
            await self.run_fiber("failing", body)
        except ValueError as exc:
            seen["raised"] = str(exc)
        seen["after"] = len(self.sql("SELECT id FROM cf_agents_runs"))
        seen["refs_after"] = self.keep_alive_refs
        return seen

    async def stash_twice(self) -> dict[str, Any]:
        seen: dict[str, Any] = {}

        async def body(ctx: FiberContext) -> None:
            query = "SELECT snapshot FROM cf_agents_runs WHERE id = ?"
            ctx.stash({"step": 1})
            seen["first"] = self.sql(query, ctx.id)[0]["snapshot"]  # no await in between
            self.stash({"step": 2, "via": "self"})
            seen["second"] = self.sql(query, ctx.id)[0]["snapshot"]
            seen["ctx_snapshot"] = ctx.snapshot
            await asyncio.sleep(0)

        await self.run_fiber("stashing", body)
        try:
            self.stash({"outside": True})
        except NotInFiberError as exc:
            seen["outside"] = type(exc).__name__
        return seen

    async def start_bg(self, fiber: str, steps: list[Any]) -> None:
        """Fire-and-forget: stash ``steps`` then wait for the fiber's gate."""
        obj = self.name

        async def body(ctx: FiberContext) -> str:
            self.stash({"fiber": fiber, "steps": steps})
            await gate(obj, fiber).wait()
            self.stash({"fiber": fiber, "steps": [*steps, "last"]})  # contextvar still right
            return fiber

        wait_until(self.ctx, self.run_fiber(fiber, body))

    async def runs(self) -> list[dict[str, Any]]:
        return self.sql("SELECT id, name, snapshot, created_at FROM cf_agents_runs ORDER BY name")

    async def recovered(self) -> list[dict[str, Any]]:
        return self.sql("SELECT * FROM recovered_log ORDER BY at, name")

    async def errors(self) -> list[dict[str, Any]]:
        return self.sql("SELECT * FROM errors_log")

    async def retry_rows(self) -> list[dict[str, Any]]:
        return self.sql("SELECT id, attempts, next_attempt_at FROM cf_agents_run_recovery")

    async def refs(self) -> int:
        return self.keep_alive_refs


class TinyDeadlineAgent(FiberAgent):
    options = AgentOptions(keep_alive_interval_ms=1000, fiber_recovery_scan_deadline_ms=2)


async def test_run_fiber_inserts_row_before_fn_and_deletes_it_on_return(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"FIBERS": FiberAgent})
    out = await h.env.FIBERS.getByName(unique_name("inline")).run_inline(42)
    assert out["result"] == {"echo": 42}
    assert out["rows"] == [{"id": out["id"], "name": "inline", "snapshot": None}]
    assert out["snapshot"] is None
    assert out["keep_alive_refs"] == 1
    assert out["after"] == []
    assert out["refs_after"] == 0


async def test_run_fiber_deletes_row_and_reraises_when_fn_raises(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"FIBERS": FiberAgent})
    out = await h.env.FIBERS.getByName(unique_name("failing")).run_failing()
    assert out == {"rows": 1, "raised": "step 3 broke", "after": 0, "refs_after": 0}


async def test_stash_replaces_snapshot_synchronously_and_self_stash_needs_a_fiber(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"FIBERS": FiberAgent})
    out = await h.env.FIBERS.getByName(unique_name("stash")).stash_twice()
    assert json.loads(out["first"]) == {"step": 1}
    assert json.loads(out["second"]) == {"step": 2, "via": "self"}
    assert out["ctx_snapshot"] is None
    assert out["outside"] == "NotInFiberError"


async def test_concurrent_fibers_keep_their_own_rows_and_snapshots(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"FIBERS": FiberAgent})
    name = unique_name("concurrent")
    stub = h.env.FIBERS.getByName(name)
    await stub.start_bg("alpha", [1])
    await stub.start_bg("beta", [1, 2])
    rows = await eventually(lambda: _runs_with_snapshots(stub, 2))
    assert [(r["name"], json.loads(r["snapshot"])) for r in rows] == [
        ("alpha", {"fiber": "alpha", "steps": [1]}),
        ("beta", {"fiber": "beta", "steps": [1, 2]}),
    ]
    assert await stub.refs() == 2
    gate(name, "beta").set()
    await eventually(lambda: _run_names(stub, ["alpha"]))
    snapshot = json.loads((await stub.runs())[0]["snapshot"])
    assert snapshot == {"fiber": "alpha", "steps": [1]}  # beta's stash never touched alpha
    gate(name, "alpha").set()
    await eventually(lambda: _run_names(stub, []))
    assert await stub.refs() == 0
    assert await h.get_alarm("FIBERS", name) is None  # nothing pending: the alarm is cleared


async def _runs_with_snapshots(stub: Any, n: int) -> list[dict[str, Any]] | None:
    rows: list[dict[str, Any]] = await stub.runs()
    return rows if len(rows) == n and all(r["snapshot"] for r in rows) else None


async def _run_names(stub: Any, names: list[str]) -> bool:
    return [r["name"] for r in await stub.runs()] == names


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


# -- regressions: fire-and-forget, stale scans, cancellation, bounded scans ----------------------


class HandOffAgent(FiberAgent):
    """Fire-and-forget fibers that never start before the test crashes the object."""

    async def on_fiber_recovered(self, ctx: FiberRecoveryContext) -> None:
        await super().on_fiber_recovered(ctx)
        if ctx.name == "hand-off":
            # The SDK's recovery hand-off: a new fiber takes over; the old row is deleted as
            # soon as this hook returns, in the same turn.
            wait_until(self.ctx, self.run_fiber("resumed", _wait_forever))
            names = sorted(r["name"] for r in self.sql("SELECT name FROM cf_agents_runs"))
            self.sql(
                "INSERT INTO recovered_log VALUES ('', 'rows-at-hand-off', ?, 0, ?, 0)",
                json.dumps(names),
                Date.now(),
            )

    async def start_and_return(self, fiber: str) -> list[str]:
        wait_until(self.ctx, self.run_fiber(fiber, _wait_forever))
        return [r["name"] for r in self.sql("SELECT name FROM cf_agents_runs")]


async def _wait_forever(ctx: FiberContext) -> None:
    await asyncio.Event().wait()


async def test_fire_and_forget_row_is_written_before_the_rpc_returns(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"FIBERS": HandOffAgent})
    name = unique_name("fire-forget")
    stub = h.env.FIBERS.getByName(name)
    assert await stub.start_and_return("job") == ["job"]  # inserted by the call itself
    h.reset("FIBERS", name, "crash right after the RPC answered")  # the task never ran
    await h.restart()
    stub = h.env.FIBERS.getByName(name)
    assert [r["name"] for r in await stub.recovered()] == ["job"]
    assert await stub.runs() == []


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


class CancelAgent(FiberAgent):
    async def cancelled_by_user(self, how: str) -> dict[str, Any]:
        try:
            if how == "wait_for":
                await asyncio.wait_for(self.run_fiber("slow", _wait_forever), 0.01)
            elif how == "timeout":
                async with asyncio.timeout(0.01):
                    await self.run_fiber("slow", _wait_forever)
            elif how == "task_group":

                async def job() -> None:  # run_fiber gives a Task; create_task wants a coroutine
                    await self.run_fiber("slow", _wait_forever)

                async with asyncio.TaskGroup() as group:
                    group.create_task(job())
                    group.create_task(_fail_soon())
            elif how == "before_first_step":
                task = self.run_fiber("slow", _wait_forever)
                task.cancel()
                await task
        except (TimeoutError, ExceptionGroup, asyncio.CancelledError):
            pass
        return {
            "runs": self.sql("SELECT name FROM cf_agents_runs"),
            "running": len(self.running_fiber_ids),
            "refs": self.keep_alive_refs,
        }

    async def inline_gated(self) -> None:
        obj = self.name

        async def body(ctx: FiberContext) -> None:
            self.stash({"inline": True})
            await gate(obj, "inline").wait()

        await self.run_fiber("inline-crashed", body)


async def _fail_soon() -> None:
    await asyncio.sleep(0)
    raise ValueError("sibling failed")


async def test_cancellation_by_user_code_deletes_the_row(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"FIBERS": CancelAgent})
    name = unique_name("user-cancel")
    stub = h.env.FIBERS.getByName(name)
    for how in ("wait_for", "timeout", "task_group", "before_first_step"):
        out = await stub.cancelled_by_user(how)
        assert out == {"runs": [], "running": 0, "refs": 0}, how
    await h.advance(5_000)
    assert await stub.recovered() == []  # nothing "recovered" in the process that cancelled it
    assert await h.get_alarm("FIBERS", name) is None


async def test_reset_cancels_an_awaited_fiber_but_keeps_its_row(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"FIBERS": CancelAgent})
    name = unique_name("reset-cancel")
    stub = h.env.FIBERS.getByName(name)
    call = asyncio.ensure_future(stub.inline_gated())
    await eventually(lambda: _runs_with_snapshots(stub, 1))
    h.reset("FIBERS", name, "crash while an RPC awaits its fiber")
    with pytest.raises(Exception, match="crash while"):
        await call
    (log,) = await stub.recovered()  # the row survived the cancellation the reset caused
    assert (log["name"], json.loads(log["snapshot"])) == ("inline-crashed", {"inline": True})


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
