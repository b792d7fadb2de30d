"""Agent schedules: every kind, idempotency, overdue re-arming, hung intervals, retries, restart.

Time is a :class:`ManualClock` started on a whole second, so ``time`` (Unix seconds, the SDK's
unit) and alarm times (ms) can be asserted exactly. Retry back-off sleeps are replaced by a
recorder (``agents.retry.sleep``), so failing callbacks retry instantly and the delays are checked.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from js import Date

from agents import Agent, AgentOptions, RetryOptions
from agents.schedules.types import Schedule
from doemu.clock import ManualClock
from doemu.testing.plugin import HarnessFactory

retry_module = importlib.import_module("agents.retry")

START_S = 1_700_000_000  # 2023-11-14 22:13:20 UTC
START_MS = START_S * 1000

CALLS: dict[str, list[dict[str, Any]]] = {}
ERRORS: dict[str, list[dict[str, Any]]] = {}
ATTEMPTS: dict[str, int] = {}


class Scheduler(Agent):
    options = AgentOptions(
        retry=RetryOptions(max_attempts=3, base_delay_ms=100, max_delay_ms=3000),
        hung_schedule_timeout_seconds=30,
    )

    # -- callbacks ----------------------------------------------------------------------------
    async def record(self, payload: Any, schedule: Schedule) -> None:
        CALLS.setdefault(self.name, []).append(
            {"payload": payload, "type": schedule.type, "id": schedule.id, "at": Date.now()}
        )

    def record_sync(self, payload: Any) -> None:
        CALLS.setdefault(self.name, []).append({"payload": payload, "sync": True})

    async def fail(self, payload: Any) -> None:
        ATTEMPTS[self.name] = ATTEMPTS.get(self.name, 0) + 1
        raise RuntimeError(f"boom {payload}")

    async def on_error(self, error: BaseException, context: Any = None) -> None:
        ERRORS.setdefault(self.name, []).append(
            {"error": str(error), "id": getattr(context, "id", None)}
        )

    # -- RPC for the tests ----------------------------------------------------------------------
    async def add(self, when: Any, callback: str, payload: Any = None, opts: Any = None) -> Any:
        kwargs = dict(opts or {})
        if isinstance(when, str) and when.startswith("iso:"):
            when = datetime.fromisoformat(when[4:])
        return (await self.schedule(when, callback, payload, **kwargs)).to_dict()

    async def add_every(self, seconds: float, callback: str, payload: Any = None) -> Any:
        return (await self.schedule_every(seconds, callback, payload)).to_dict()

    async def add_bound(self) -> Any:
        return (await self.schedule(5, self.record, "bound")).to_dict()

    async def try_add(self, when: Any, callback: str) -> str:
        try:
            await self.schedule(when, callback)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return "ok"

    async def try_every(self, seconds: Any) -> str:
        try:
            await self.schedule_every(seconds, "record")
        except Exception as exc:
            return type(exc).__name__
        return "ok"

    async def cancel(self, schedule_id: str) -> bool:
        return await self.cancel_schedule(schedule_id)

    async def get_one(self, schedule_id: str) -> Any:
        found = self.get_schedule(schedule_id)
        return found.to_dict() if found is not None else None

    async def query(self, criteria: dict[str, Any] | None = None) -> list[str]:
        crit = dict(criteria or {})
        if "timeRange" in crit:
            crit["timeRange"] = {
                k: datetime.fromtimestamp(v, tz=UTC) if v is not None else None
                for k, v in crit["timeRange"].items()
            }
        return sorted(s.id for s in self.get_schedules(crit))

    async def query_kw(self, kind: str) -> list[str]:
        return sorted(s.id for s in self.get_schedules(type=kind))

    async def rows(self) -> list[dict[str, Any]]:
        return self.sql("SELECT * FROM cf_agents_schedules ORDER BY time")

    async def alarm_at(self) -> Any:
        return await self.ctx.storage.getAlarm()

    async def make_overdue_and_drop_alarm(self, schedule_id: str, seconds_ago: int) -> Any:
        now_s = Date.now() // 1000
        self.sql(
            "UPDATE cf_agents_schedules SET time = ? WHERE id = ?", now_s - seconds_ago, schedule_id
        )
        await self.ctx.storage.deleteAlarm()
        return await self.ctx.storage.getAlarm()

    async def mark_running(self, schedule_id: str, started_ago: int) -> None:
        now_s = Date.now() // 1000
        self.sql(
            "UPDATE cf_agents_schedules SET running = 1, execution_started_at = ?, time = ? "
            "WHERE id = ?",
            now_s - started_ago,
            now_s - 1,
            schedule_id,
        )
        self._core.schedule_next_alarm()


@pytest.fixture(autouse=True)
def fake_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Back-off sleeps return at once and are recorded (seconds); jitter is at its maximum."""
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(retry_module, "sleep", sleep)
    monkeypatch.setattr(retry_module, "random", lambda: 0.999999)
    return slept


@pytest.fixture
async def sched(doemu_harness: HarnessFactory, unique_name: Callable[[str], str]) -> Any:
    h = await doemu_harness({"SCHED": Scheduler}, clock=ManualClock(START_MS))
    name = unique_name("sched")
    return h, h.env.SCHED.getByName(name), name


async def test_delayed_one_shot_fires_once_then_is_deleted(sched: Any) -> None:
    h, stub, name = sched
    made = await stub.add(10, "record", {"n": 1})
    assert made["type"] == "delayed"
    assert made["delayInSeconds"] == 10
    assert made["time"] == START_S + 10
    assert made["payload"] == {"n": 1}
    assert await stub.alarm_at() == (START_S + 10) * 1000

    await h.advance(9_999)
    assert CALLS.get(name) is None
    await h.advance(1)
    assert CALLS[name] == [
        {"payload": {"n": 1}, "type": "delayed", "id": made["id"], "at": START_MS + 10_000}
    ]
    assert await stub.rows() == []
    assert await stub.alarm_at() is None


async def test_row_uses_the_sdk_columns_and_units(sched: Any) -> None:
    _h, stub, _name = sched
    await stub.add(10, "record", {"n": 1}, {"retry": {"max_attempts": 5}})
    [row] = await stub.rows()
    assert set(row) == {
        "id", "callback", "payload", "type", "time", "delayInSeconds", "cron", "intervalSeconds",
        "running", "created_at", "execution_started_at", "retry_options", "owner_path",
        "owner_path_key",
    }  # fmt: skip
    assert row["time"] == START_S + 10  # seconds, not ms
    assert row["created_at"] == START_S
    assert row["callback"] == "record"
    assert json.loads(row["payload"]) == {"n": 1}
    assert json.loads(row["retry_options"]) == {"maxAttempts": 5}
    assert row["running"] == 0


async def test_datetime_schedule_fires_at_that_moment(sched: Any) -> None:
    h, stub, name = sched
    at = datetime.fromtimestamp(START_S + 3600, tz=UTC).replace(tzinfo=None)  # naive = UTC
    made = await stub.add("iso:" + at.isoformat(), "record", "dated")
    assert made["type"] == "scheduled"
    assert made["time"] == START_S + 3600
    assert "delayInSeconds" not in made
    await h.advance(3_599_000)
    assert CALLS.get(name) is None
    await h.advance(1_000)
    assert [c["payload"] for c in CALLS[name]] == ["dated"]
    assert CALLS[name][0]["type"] == "scheduled"


async def test_cron_fires_on_each_match_and_moves_to_the_next(sched: Any) -> None:
    h, stub, name = sched
    made = await stub.add("*/5 * * * *", "record", "tick")
    first = START_S - START_S % 300 + 300  # next multiple of five minutes
    assert made["type"] == "cron"
    assert made["cron"] == "*/5 * * * *"
    assert made["time"] == first
    await h.advance((first - START_S) * 1000)
    assert len(CALLS[name]) == 1
    [row] = await stub.rows()
    assert row["time"] == first + 300
    await h.advance(300_000)
    assert len(CALLS[name]) == 2
    assert CALLS[name][1]["at"] == (first + 300) * 1000


async def test_cron_is_idempotent_by_default(sched: Any) -> None:
    _h, stub, _name = sched
    a = await stub.add("0 8 * * *", "record", {"k": 1})
    b = await stub.add("0 8 * * *", "record", {"k": 1})
    assert a["id"] == b["id"]
    assert len(await stub.rows()) == 1
    other_payload = await stub.add("0 8 * * *", "record", {"k": 2})
    forced = await stub.add("0 8 * * *", "record", {"k": 1}, {"idempotent": False})
    assert len({a["id"], other_payload["id"], forced["id"]}) == 3
    assert len(await stub.rows()) == 3


async def test_one_shots_deduplicate_only_when_asked(sched: Any) -> None:
    _h, stub, _name = sched
    a = await stub.add(10, "record", "x")
    b = await stub.add(10, "record", "x")
    assert a["id"] != b["id"]
    c = await stub.add(10, "record", "y", {"idempotent": True})
    d = await stub.add(20, "record", "y", {"idempotent": True})
    assert c["id"] == d["id"]
    assert len(await stub.rows()) == 3


async def test_bad_cron_and_unknown_callbacks_are_schedule_errors(sched: Any) -> None:
    _h, stub, _name = sched
    assert (await stub.try_add("not a cron", "record")).startswith("ScheduleError: invalid cron")
    assert (await stub.try_add("* * * * * *", "record")).startswith("ScheduleError")  # 6 fields
    assert (await stub.try_add("61 * * * *", "record")).startswith("ScheduleError")
    assert (await stub.try_add(10, "no_such_method")).startswith("ScheduleError")
    assert (await stub.try_add([1], "record")).startswith("ScheduleError: invalid schedule")
    assert await stub.try_every(0) == "ScheduleError"
    assert await stub.try_every(1.5) == "ScheduleError"
    assert await stub.rows() == []


async def test_a_bound_method_is_stored_by_name(sched: Any) -> None:
    h, stub, name = sched
    made = await stub.add_bound()
    assert made["callback"] == "record"
    await h.advance(5_000)
    assert [c["payload"] for c in CALLS[name]] == ["bound"]


async def test_sync_callbacks_taking_only_the_payload_work(sched: Any) -> None:
    h, stub, name = sched
    await stub.add(1, "record_sync", [1, 2])
    await h.advance(1_000)
    assert CALLS[name] == [{"payload": [1, 2], "sync": True}]


async def test_interval_runs_every_interval_and_is_idempotent(sched: Any) -> None:
    h, stub, name = sched
    a = await stub.add_every(60, "record", "beat")
    b = await stub.add_every(60, "record", "beat")
    assert a["id"] == b["id"]
    assert a["type"] == "interval"
    assert a["intervalSeconds"] == 60
    assert a["time"] == START_S + 60
    await h.advance(60_000)
    await h.advance(60_000)
    await h.advance(60_000)
    assert [c["at"] for c in CALLS[name]] == [START_MS + 60_000 * i for i in (1, 2, 3)]
    [row] = await stub.rows()
    assert row["running"] == 0
    assert row["time"] == START_S + 240


async def test_overdue_idempotent_schedule_every_rearms_a_lost_alarm(sched: Any) -> None:
    h, stub, name = sched
    made = await stub.add_every(60, "record", "beat")
    # The row is overdue and its alarm is gone (e.g. lost by an older runtime).
    assert await stub.make_overdue_and_drop_alarm(made["id"], 100) is None
    await h.advance(1_000)
    assert CALLS.get(name) is None  # nothing wakes the agent on its own

    again = await stub.add_every(60, "record", "beat")
    assert again["id"] == made["id"]
    alarm = await stub.alarm_at()
    assert alarm is not None
    assert alarm <= START_MS + 1_000  # overdue: fires at once
    await h.advance(1)
    assert [c["payload"] for c in CALLS[name]] == ["beat"]
    [row] = await stub.rows()
    assert row["time"] == START_S + 1 + 60


async def test_hung_interval_is_reset_and_run_again(sched: Any) -> None:
    h, stub, name = sched
    made = await stub.add_every(60, "record", "beat")
    # A run started 10 s ago and its process died: still marked running.
    await stub.mark_running(made["id"], 10)
    # Not hung yet (10 s < 30 s): the alarm waits for the moment it counts as hung.
    assert await stub.alarm_at() == START_MS + 20_000
    await h.advance(19_999)
    assert CALLS.get(name) is None
    await h.advance(1)
    assert [c["payload"] for c in CALLS[name]] == ["beat"]
    [row] = await stub.rows()
    assert row["running"] == 0
    assert row["time"] == START_S + 20 + 60


async def test_a_running_interval_is_skipped_until_it_counts_as_hung(sched: Any) -> None:
    h, stub, name = sched
    made = await stub.add_every(60, "record", "beat")
    await stub.mark_running(made["id"], 10)
    await stub.add(5, "record", "one-shot")  # wakes the alarm while the interval still runs
    await h.advance(5_000)
    assert [c["payload"] for c in CALLS[name]] == ["one-shot"]
    [row] = await stub.rows()
    assert row["running"] == 1  # untouched: its run may still be in progress
    assert await stub.alarm_at() == START_MS + 20_000


async def test_failing_one_shot_is_retried_then_deleted_and_reported(
    sched: Any, fake_sleep: list[float]
) -> None:
    h, stub, name = sched
    made = await stub.add(5, "fail", "p")
    await h.advance(5_000)
    assert ATTEMPTS[name] == 3  # options.retry.max_attempts
    # Full jitter at its maximum: floor(0.999999 * min(3000, 100 * 2**n)) for n = 1, 2.
    assert fake_sleep == [0.199, 0.399]
    assert ERRORS[name] == [{"error": "boom p", "id": made["id"]}]
    assert await stub.rows() == []
    assert await stub.alarm_at() is None


async def test_per_schedule_retry_options_override_the_defaults(sched: Any) -> None:
    h, stub, name = sched
    await stub.add(5, "fail", "p", {"retry": {"maxAttempts": 5, "baseDelayMs": 10}})
    await h.advance(5_000)
    assert ATTEMPTS[name] == 5
    assert len(ERRORS[name]) == 1


async def test_failing_cron_is_reported_and_stays_scheduled(sched: Any) -> None:
    h, stub, name = sched
    made = await stub.add("* * * * *", "fail", "c", {"retry": {"max_attempts": 1}})
    await h.advance((made["time"] - START_S) * 1000)
    assert ATTEMPTS[name] == 1
    assert ERRORS[name] == [{"error": "boom c", "id": made["id"]}]
    [row] = await stub.rows()
    assert row["time"] == made["time"] + 60
    assert await stub.alarm_at() == (made["time"] + 60) * 1000


async def test_cancel_schedule(sched: Any) -> None:
    h, stub, name = sched
    made = await stub.add(10, "record", "never")
    assert await stub.cancel(made["id"]) is True
    assert await stub.cancel(made["id"]) is False
    assert await stub.alarm_at() is None
    await h.advance(20_000)
    assert CALLS.get(name) is None


async def test_get_schedule_and_get_schedules_filters(sched: Any) -> None:
    _h, stub, _name = sched
    soon = await stub.add(10, "record", "soon")
    later = await stub.add(1000, "record", "later")
    cron = await stub.add("0 0 1 1 *", "record", "new year")
    every = await stub.add_every(60, "record", "beat")

    assert (await stub.get_one(soon["id"]))["payload"] == "soon"
    assert await stub.get_one("missing") is None
    assert await stub.query() == sorted(s["id"] for s in (soon, later, cron, every))
    assert await stub.query({"type": "delayed"}) == sorted([soon["id"], later["id"]])
    assert await stub.query_kw("cron") == [cron["id"]]
    assert await stub.query({"id": every["id"]}) == [every["id"]]
    window = {"start": START_S + 10, "end": START_S + 60}
    assert await stub.query({"timeRange": window}) == sorted([soon["id"], every["id"]])
    assert await stub.query({"timeRange": {"start": START_S + 61, "end": None}}) == sorted(
        [later["id"], cron["id"]]
    )
    assert await stub.query({"type": "delayed", "timeRange": window}) == [soon["id"]]


async def test_schedules_survive_a_restart(sched: Any) -> None:
    h, stub, name = sched
    await stub.add(600, "record", "after restart")
    await h.restart()
    assert await h.get_alarm("SCHED", name) == (START_S + 600) * 1000
    await h.advance(600_000)
    assert [c["payload"] for c in CALLS[name]] == ["after restart"]
    assert await h.env.SCHED.getByName(name).rows() == []


async def test_alarm_is_the_earliest_schedule_and_deleted_when_none_remain(sched: Any) -> None:
    _h, stub, _name = sched
    late = await stub.add(100, "record")
    assert await stub.alarm_at() == (START_S + 100) * 1000
    early = await stub.add(timedelta_seconds(50), "record")
    assert await stub.alarm_at() == (START_S + 50) * 1000
    await stub.cancel(early["id"])
    assert await stub.alarm_at() == (START_S + 100) * 1000
    await stub.cancel(late["id"])
    assert await stub.alarm_at() is None


def timedelta_seconds(seconds: int) -> float:
    """A float delay (the RPC boundary cannot carry a timedelta)."""
    return timedelta(seconds=seconds).total_seconds()
