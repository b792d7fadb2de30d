"""Alarms: scheduling, delivery, the retry ladder under a manual clock, restart recovery."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

import pytest
from workers import DurableObject

from doemu.alarms import MAX_ALARM_RETRIES
from doemu.clock import SystemClock
from doemu.control import RuntimeControl
from doemu.jsboundary import JsException
from doemu.testing.plugin import HarnessFactory

CALLS: dict[str, list[dict[str, Any]]] = {}


class Alarmed(DurableObject):
    """Records each alarm delivery; fails while its ``fail`` flag is set."""

    async def arm(self, at_ms: float) -> None:
        await self.ctx.storage.setAlarm(at_ms)

    async def arm_datetime(self, iso: str) -> None:
        await self.ctx.storage.setAlarm(datetime.fromisoformat(iso))

    async def get_alarm(self) -> float | None:
        return await self.ctx.storage.getAlarm()

    async def set_fail(self, fail: bool, rearm_in_handler: float | None = None) -> None:
        await self.ctx.storage.put("fail", fail)
        await self.ctx.storage.put("rearm", rearm_in_handler)

    async def fired(self) -> int:
        return await self.ctx.storage.get("fired") or 0

    async def alarm(self, alarm_info: Any) -> None:
        storage = self.ctx.storage
        CALLS.setdefault(str(self.ctx.id.name), []).append(
            {
                "retryCount": alarm_info.retryCount,
                "isRetry": alarm_info.isRetry,
                "inside": await storage.getAlarm(),
                "scheduledTime": alarm_info.scheduledTime,
            }
        )
        await storage.put("fired", (await storage.get("fired") or 0) + 1)
        rearm = await storage.get("rearm")
        if rearm is not None:
            await storage.setAlarm(rearm)
        if await storage.get("fail"):
            raise RuntimeError("handler failed")


class ShortAlarm(DurableObject):
    async def alarm(self) -> None:  # takes no alarm_info: called "relaxed"
        await self.ctx.storage.put("ran", True)

    async def arm(self, at_ms: float) -> None:
        await self.ctx.storage.setAlarm(at_ms)

    async def ran(self) -> bool:
        return bool(await self.ctx.storage.get("ran"))


class NoAlarmHandler(DurableObject):
    async def arm(self) -> None:
        await self.ctx.storage.setAlarm(1_000)


async def test_alarm_fires_at_its_time_and_not_before(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"ALARMED": Alarmed})
    stub = h.env.ALARMED.getByName("on-time")
    at = h.clock.now() + 5_000
    await stub.arm(at)
    assert await stub.get_alarm() == at
    await h.advance(4_999)
    assert await stub.fired() == 0
    await h.advance(1)
    assert await stub.fired() == 1
    call = CALLS["on-time"][-1]
    assert call == {"retryCount": 0, "isRetry": False, "inside": None, "scheduledTime": at}
    assert await stub.get_alarm() is None


async def test_alarm_accepts_datetime_and_clamps_past_times(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"ALARMED": Alarmed})
    stub = h.env.ALARMED.getByName("clamp")
    await stub.arm(1)  # far in the past
    assert await stub.get_alarm() == h.clock.now()
    when = datetime.fromtimestamp((h.clock.now() + 60_000) / 1000, tz=UTC)
    await stub.arm_datetime(when.isoformat())
    assert await stub.get_alarm() == pytest.approx(h.clock.now() + 60_000, abs=1)


async def test_relaxed_alarm_handler_without_alarm_info(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"SHORT": ShortAlarm})
    stub = h.env.SHORT.getByName("relaxed")
    await stub.arm(h.clock.now() + 10)
    await h.advance(10)
    assert await stub.ran() is True


async def test_set_alarm_errors(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"ALARMED": Alarmed})
    with pytest.raises(JsException, match=r"setAlarm\(\) cannot be called with an alarm time <= 0"):
        await h.env.ALARMED.getByName("zero").arm(0)


async def test_an_alarm_without_a_handler_fails_when_it_fires(
    doemu_harness: HarnessFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """As on Cloudflare's Python Workers (observed on workerd): the SDK's JavaScript wrapper of
    every class defines alarm(), so setAlarm works on a class without one; the delivery fails
    with "TypeError: Method alarm does not exist" and is retried like any failed alarm."""
    h = await doemu_harness({"NOALARM": NoAlarmHandler})
    await h.env.NOALARM.getByName("none").arm()
    await h.advance(0)
    failures = [
        r.getMessage() for r in caplog.records if "Method alarm does not exist" in r.getMessage()
    ]
    assert failures and "retry 1" in failures[0], failures


async def test_failing_alarm_retries_on_the_ladder_then_drops(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"ALARMED": Alarmed})
    stub = h.env.ALARMED.getByName("ladder")
    await stub.set_fail(True)
    start = h.clock.now() + 1_000
    await stub.arm(start)
    fire_times: list[float] = []
    await h.advance(1_000)
    fire_times.append(h.clock.now())
    # While waiting for a retry, getAlarm() shows the original time (as workerd does); the
    # retry itself is what the runtime reports pending.
    assert await stub.get_alarm() == start
    pending = await h.get_alarm("ALARMED", "ladder")
    assert pending is not None and 2_000 <= pending - h.clock.now() <= 2_500
    for _ in range(MAX_ALARM_RETRIES):
        before = len(CALLS["ladder"])
        assert await stub.get_alarm() == start
        due = await h.get_alarm("ALARMED", "ladder")
        assert due is not None
        await h.advance(due - h.clock.now())
        assert len(CALLS["ladder"]) == before + 1
        fire_times.append(h.clock.now())
    calls = CALLS["ladder"]
    assert [c["retryCount"] for c in calls] == list(range(MAX_ALARM_RETRIES + 1))
    assert [c["isRetry"] for c in calls] == [False] + [True] * MAX_ALARM_RETRIES
    assert all(c["inside"] is None for c in calls)
    gaps = [b - a for a, b in itertools.pairwise(fire_times)]
    for n, gap in enumerate(gaps):
        base = 2_000 * 2**n
        assert base <= gap <= base * 1.25, (n, gap)
    # After the sixth retry fails, the alarm is dropped for good.
    assert await stub.get_alarm() is None
    await h.advance(3_600_000)
    assert len(CALLS["ladder"]) == MAX_ALARM_RETRIES + 1


async def test_set_alarm_inside_a_failing_handler_cancels_the_retry(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"ALARMED": Alarmed})
    stub = h.env.ALARMED.getByName("rearm")
    rearm_at = h.clock.now() + 600_000
    await stub.set_fail(True, rearm_at)
    await stub.arm(h.clock.now() + 100)
    await h.advance(100)
    assert await stub.get_alarm() == rearm_at
    await h.advance(100_000)
    assert len(CALLS["rearm"]) == 1


async def test_overdue_alarm_fires_after_restart_without_any_call(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"ALARMED": Alarmed})
    stub = h.env.ALARMED.getByName("restart")
    await stub.arm(h.clock.now() + 5_000)
    await h.runtime.close()
    h.clock.set(h.clock.now() + 60_000)  # the alarm became overdue while nothing ran
    CALLS.pop("restart", None)
    await h.restart()
    await h.advance(0)
    assert [c["retryCount"] for c in CALLS["restart"]] == [0]
    assert await h.env.ALARMED.getByName("restart").fired() == 1


async def test_alarm_survives_restart_and_fires_at_its_time(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"ALARMED": Alarmed})
    await h.env.ALARMED.getByName("restart-later").arm(h.clock.now() + 5_000)
    await h.restart()
    await h.advance(4_000)
    assert "restart-later" not in CALLS
    await h.advance(1_000)
    assert len(CALLS["restart-later"]) == 1


async def test_an_alarm_deleted_between_restore_and_release_stays_deleted(
    doemu_harness: HarnessFactory,
) -> None:
    """``doemu dev`` loads persisted alarms, answers requests, then arms them: an alarm an object
    deletes (or moves) in between is not armed from the stale copy start-up loaded."""
    h = await doemu_harness({"ALARMED": Alarmed})
    await h.env.ALARMED.getByName("gone").arm(h.clock.now() + 5_000)
    await h.env.ALARMED.getByName("moved").arm(h.clock.now() + 5_000)
    await h.runtime.close()
    h.runtime = h._new_runtime()
    h.control = RuntimeControl(h.runtime)
    await h.runtime.start(hold_alarms=True)  # as doemu dev starts: loaded, not armed yet
    gone = h.env.ALARMED.getByName("gone")
    await h.runtime.host("ALARMED", "gone").call(
        "fetch", lambda inst: inst.ctx.storage.deleteAlarm()
    )
    moved_to = h.clock.now() + 60_000
    await h.env.ALARMED.getByName("moved").arm(moved_to)
    h.runtime.release_alarms()
    assert await h.get_alarm("ALARMED", "gone") is None  # not the stale copy start-up loaded
    assert await h.get_alarm("ALARMED", "moved") == moved_to
    await h.advance(10_000)
    assert "gone" not in CALLS and "moved" not in CALLS
    assert await gone.get_alarm() is None


async def test_run_alarm_now_delivers_a_future_alarm(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"ALARMED": Alarmed})
    stub = h.env.ALARMED.getByName("run-now")
    await stub.arm(h.clock.now() + 3_600_000)
    assert await h.run_alarm("ALARMED", "run-now") is True
    assert await stub.fired() == 1
    assert await stub.get_alarm() is None
    assert await h.run_alarm("ALARMED", "run-now") is False


async def test_run_now_at_power_durability_delivers_once(doemu_harness: HarnessFactory) -> None:
    """At power durability the commit that brings the alarm forward is mirrored after its fsync:
    its timer comes due at once and must not start a second delivery beside run-now's."""
    h = await doemu_harness({"ALARMED": Alarmed}, clock=SystemClock(), durability="power")
    stub = h.env.ALARMED.getByName("run-now-power")
    await stub.arm(h.clock.now() + 3_600_000)
    assert await h.run_alarm("ALARMED", "run-now-power") is True
    await h.runtime.alarms.idle()
    assert await stub.fired() == 1
    assert len(CALLS["run-now-power"]) == 1


class Aborting(DurableObject):
    """First alarm delivery: ctx.abort(), or a reset error from a callee (then retried)."""

    async def arm(self, at_ms: float, mode: str) -> None:
        await self.ctx.storage.put("mode", mode)
        await self.ctx.storage.setAlarm(at_ms)

    async def runs(self) -> int:
        return await self.ctx.storage.get("runs") or 0

    async def alarm(self) -> None:
        runs = (await self.ctx.storage.get("runs") or 0) + 1
        self.ctx.storage.kv.put("runs", runs)
        await self.ctx.storage.sync()
        if runs == 1:
            if await self.ctx.storage.get("mode") == "abort":
                self.ctx.abort("abort inside the alarm")
            await self.env.ABORTING.getByName("callee").boom()

    async def boom(self) -> None:
        self.ctx.abort("the callee resets")


@pytest.mark.parametrize("mode", ["abort", "callee"])
async def test_a_reset_during_the_alarm_is_retried_not_lost(
    doemu_harness: HarnessFactory, mode: str
) -> None:
    h = await doemu_harness({"ABORTING": Aborting})
    stub = h.env.ABORTING.getByName(f"reset-{mode}")
    await stub.arm(h.clock.now() + 100, mode)
    await h.advance(100)
    assert await stub.runs() == 1
    await h.advance(3_000)  # the first retry comes 2-2.5 s later
    assert await stub.runs() == 2
    assert await h.get_alarm("ABORTING", f"reset-{mode}") is None


async def test_a_pending_retry_fires_after_a_restart(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"ALARMED": Alarmed})
    stub = h.env.ALARMED.getByName("retry-restart")
    await stub.set_fail(True)
    await stub.arm(h.clock.now() + 10)
    await h.advance(10)
    retry_at = await stub.get_alarm()
    assert retry_at is not None and retry_at == int(retry_at)  # whole milliseconds
    await stub.set_fail(False)
    await h.restart()
    await h.advance(retry_at - h.clock.now())
    assert await h.env.ALARMED.getByName("retry-restart").fired() == 2
    assert await h.env.ALARMED.getByName("retry-restart").get_alarm() is None


class Counting(DurableObject):
    """A handler that never suspends: each delivery finishes in the step that starts it."""

    async def arm(self, at_ms: float) -> None:
        await self.ctx.storage.setAlarm(at_ms)

    async def alarm(self) -> None:
        FIRED.append(str(self.ctx.id.name))


FIRED: list[str] = []


async def test_a_storm_of_overdue_alarms_leaves_the_loop_to_other_work(
    doemu_harness: HarnessFactory,
) -> None:
    """Overdue alarms start in bounded batches, so other work runs long before the last one."""
    import asyncio

    from doemu.alarms import MAX_CONCURRENT_DELIVERIES

    h = await doemu_harness({"COUNTING": Counting})
    n = 6 * MAX_CONCURRENT_DELIVERIES
    for i in range(n):
        await h.env.COUNTING.getByName(f"storm-{i}").arm(h.clock.now() + 1_000)
    await h.runtime.close()
    FIRED.clear()
    h.clock.set(h.clock.now() + 60_000)
    await h.restart()

    seen_by_other_work: list[int] = []

    async def other_work() -> None:  # what a socket read would be: one step per loop pass
        for _ in range(10 * n):
            seen_by_other_work.append(len(FIRED))
            if len(FIRED) == n:
                return
            await asyncio.sleep(0)

    other = asyncio.ensure_future(other_work())
    await h.advance(0)
    await other
    assert len(FIRED) == n  # every alarm fired in the end
    steps = [b - a for a, b in itertools.pairwise(seen_by_other_work)]
    assert max(steps) <= MAX_CONCURRENT_DELIVERIES, steps  # other work ran between batches


ORDER: list[str] = []


class Ordered(DurableObject):
    """Notes when its alarm handler and its fetch handler run."""

    async def arm(self, at_ms: float) -> None:
        await self.ctx.storage.setAlarm(at_ms)

    async def alarm(self) -> None:
        ORDER.append(f"alarm {self.ctx.id.name}")

    async def touch(self) -> None:
        ORDER.append(f"call {self.ctx.id.name}")


async def test_a_due_alarm_goes_before_an_event_that_starts_after_its_time(
    doemu_harness: HarnessFactory,
) -> None:
    """1. An alarm comes due and its delivery is started, but has not run yet.
    2. A call to another object starts in the same loop pass: the delivery runs first."""
    h = await doemu_harness({"ORDERED": Ordered})
    ns = h.env.ORDERED
    await ns.getByName("a").arm(h.clock.now() + 1_000)
    await ns.getByName("other").touch()
    ORDER.clear()
    h.clock.set(h.clock.now() + 1_000)  # the timer runs now; the delivery is a task, not started
    await ns.getByName("other").touch()
    assert ORDER == ["alarm a", "call other"]


async def test_a_busy_loop_starts_an_alarm_whose_timer_has_not_run_yet() -> None:
    """On the real clock, an alarm past its time whose timer callback has not run yet (the loop
    is busy) is started by the next event's check and delivered before that event goes on."""
    import asyncio

    from doemu.alarms import AlarmScheduler
    from doemu.clock import SystemClock

    delivered: list[str] = []

    async def deliver(key: Any, when: float) -> None:
        delivered.append(key[1])

    clock = SystemClock()
    scheduler = AlarmScheduler(clock, deliver)
    try:
        assert not scheduler.preempting()  # nothing scheduled: nothing to yield to
        scheduler.set(("ns", "late"), clock.now() - 1)  # its timer cannot run before we yield
        assert scheduler.preempting()  # started here, not by the timer
        assert delivered == []
        await asyncio.sleep(0)  # what ObjectHost.call does
        assert delivered == ["late"]
        assert not scheduler.preempting()
    finally:
        scheduler.close()


async def test_an_event_yields_to_due_alarms_at_most_once(doemu_harness: HarnessFactory) -> None:
    """A flood of overdue alarms delays a call by one pass of the loop, not until the last."""
    from doemu.alarms import MAX_CONCURRENT_DELIVERIES

    h = await doemu_harness({"ORDERED": Ordered})
    ns = h.env.ORDERED
    n = 4 * MAX_CONCURRENT_DELIVERIES
    for i in range(n):
        await ns.getByName(f"flood-{i}").arm(h.clock.now() + 1_000)
    await ns.getByName("caller").touch()
    ORDER.clear()
    h.clock.set(h.clock.now() + 1_000)
    await ns.getByName("caller").touch()
    assert "call caller" in ORDER
    assert ORDER.index("call caller") <= MAX_CONCURRENT_DELIVERIES, ORDER
    await h.advance(0)
    assert sum(1 for entry in ORDER if entry.startswith("alarm")) == n


@pytest.mark.parametrize("loop_name", ["asyncio", "uvloop"])
def test_real_clock_timers_fire_once_per_alarm_without_spinning(loop_name: str) -> None:
    """With the system clock, each alarm fires on time from about one timer callback.

    uvloop's millisecond timers fire early by the time cached at the last poll; without the
    round-up in SystemClock.call_at, the scheduler re-armed a sub-millisecond timer over and
    over until the alarm's time came (about thirty loop passes per alarm).
    """
    import asyncio
    import time

    from doemu.alarms import AlarmScheduler
    from doemu.clock import SystemClock

    late: list[float] = []
    fires = 0
    done: asyncio.Event

    async def deliver(key: Any, when: float) -> None:
        late.append(time.time() * 1000 - when)
        if len(late) == 20:
            done.set()

    async def main() -> None:
        nonlocal fires, done
        done = asyncio.Event()
        scheduler = AlarmScheduler(SystemClock(), deliver)
        fire = scheduler._fire

        def counted() -> None:
            nonlocal fires
            fires += 1
            fire()

        scheduler._fire = counted  # type: ignore[method-assign]
        start = int(time.time() * 1000)
        for i in range(20):
            scheduler.set(("ns", f"{i:064x}"), start + 20 + 5 * i)
        try:
            await asyncio.wait_for(done.wait(), 10)
        finally:
            scheduler.close()

    loop_factory = None
    if loop_name == "uvloop":  # an optional dependency: not on Windows or PyPy
        uvloop = pytest.importorskip("uvloop", reason="uvloop is not installed")
        loop_factory = uvloop.new_event_loop
    runner = asyncio.Runner(loop_factory=loop_factory)
    with runner:
        runner.run(main())
    assert len(late) == 20
    assert min(late) >= 0  # never early
    assert fires <= 3 * 20, fires
