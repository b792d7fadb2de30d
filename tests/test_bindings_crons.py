"""Cron triggers: Cloudflare's cron dialect, ``scheduled()`` at the crons' times on the manual
clock, no replay after downtime, run-now from the harness, ``/__scheduled`` and the admin API."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from workers import WorkerEntrypoint

from doemu.bindings import NoScheduledHandler, ScheduledController
from doemu.clock import ManualClock
from doemu.config.bindings import KvNamespaceBinding, WorkerResources
from doemu.config.crons import CronExpression
from doemu.runtime import Runtime
from doemu.server.app import DoemuApp
from doemu.testing.plugin import HarnessFactory

from .admin_helpers import API, client

#: 2026-01-01 00:00:30 UTC, a Thursday: the first run of "*/5 * * * *" is at 00:05:00.
T0 = dt.datetime(2026, 1, 1, 0, 0, 30, tzinfo=dt.UTC).timestamp() * 1000
MINUTE = 60_000
RUNS: list[dict[str, Any]] = []


class Default(WorkerEntrypoint):
    async def scheduled(self, controller: Any, env: Any, ctx: Any) -> None:
        RUNS.append(
            {
                "cron": controller.cron,
                "scheduledTime": controller.scheduledTime,
                "env": env,
                "ctx": ctx,
                "controller": controller,
            }
        )
        if controller.cron == "0 0 * * *":
            raise RuntimeError("the nightly job failed")
        # self.env is where a class entrypoint finds its bindings (env arrives as None).
        self.ctx.waitUntil(self.env.CACHE.put(f"ran-{controller.scheduledTime}", controller.cron))


class NoHandler(WorkerEntrypoint):
    async def fetch(self, request: Any) -> Any:
        return None


@pytest.fixture(autouse=True)
def _fresh() -> None:
    RUNS.clear()


def utc(ms: float) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%a %Y-%m-%d %H:%M")


@pytest.mark.parametrize(
    ("cron", "first", "second"),
    [
        ("*/5 * * * *", "Thu 2026-01-01 00:05", "Thu 2026-01-01 00:10"),
        ("0 17 * * 1", "Sun 2026-01-04 17:00", "Sun 2026-01-11 17:00"),  # 1 is Sunday
        ("0 17 * * sun", "Sun 2026-01-04 17:00", "Sun 2026-01-11 17:00"),
        ("10 7 * * 2-6", "Thu 2026-01-01 07:10", "Fri 2026-01-02 07:10"),  # Monday to Friday
        ("0 18 * * 6L", "Fri 2026-01-30 18:00", "Fri 2026-02-27 18:00"),  # the last Friday
        ("0 18 * * friL", "Fri 2026-01-30 18:00", "Fri 2026-02-27 18:00"),
        ("0 0 * * 6#2", "Fri 2026-01-09 00:00", "Fri 2026-02-13 00:00"),  # the second Friday
        ("59 23 LW * *", "Fri 2026-01-30 23:59", "Fri 2026-02-27 23:59"),  # the last weekday
        ("0 15 1 * *", "Thu 2026-01-01 15:00", "Sun 2026-02-01 15:00"),
    ],
)
def test_cloudflares_cron_dialect(cron: str, first: str, second: str) -> None:
    expression = CronExpression(cron)
    at = expression.next_after(T0)
    assert (utc(at), utc(expression.next_after(at))) == (first, second)


@pytest.mark.parametrize(
    ("cron", "problem"),
    [("* * * *", "has 4 fields"), ("0 0 * * 8", "not a valid cron"), ("x * * * *", "not a valid")],
)
def test_invalid_crons_are_refused(cron: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        CronExpression(cron)


async def _harness(doemu_harness: HarnessFactory, crons: list[str], **options: Any) -> Any:
    options.setdefault("entry", Default)
    return await doemu_harness(
        {}, crons=crons, kv_namespaces=["CACHE"], clock=ManualClock(T0), **options
    )


async def test_scheduled_runs_at_each_trigger_time(doemu_harness: HarnessFactory) -> None:
    h = await _harness(doemu_harness, ["*/5 * * * *", "0 * * * *"])
    await h.advance(4 * MINUTE)
    assert RUNS == []
    await h.advance(MINUTE)  # 00:05:30
    assert [(r["cron"], utc(r["scheduledTime"])) for r in RUNS] == [
        ("*/5 * * * *", "Thu 2026-01-01 00:05")
    ]
    run = RUNS[0]
    assert isinstance(run["controller"], ScheduledController)
    assert isinstance(run["scheduledTime"], int)
    assert run["env"] is None and run["ctx"] is None  # as workerd-Python hands them over
    assert await h.env.CACHE.get(f"ran-{run['scheduledTime']}") == "*/5 * * * *"  # waitUntil
    await h.advance(55 * MINUTE)  # to 01:00:30: every five minutes, and the hourly one
    times = [(r["cron"], utc(r["scheduledTime"])[-5:]) for r in RUNS]
    assert times[-2:] == [("*/5 * * * *", "01:00"), ("0 * * * *", "01:00")]
    assert len([t for t in times if t[0] == "*/5 * * * *"]) == 12
    assert [r["outcome"] for r in h.scheduled_runs] == ["ok"] * 13


async def test_a_failing_run_is_recorded_not_retried(
    doemu_harness: HarnessFactory, caplog: pytest.LogCaptureFixture
) -> None:
    h = await _harness(doemu_harness, ["0 0 * * *"])
    with caplog.at_level(logging.ERROR, logger="doemu.crons"):
        await h.advance(24 * 60 * MINUTE)
    assert [utc(r["scheduledTime"]) for r in RUNS] == ["Fri 2026-01-02 00:00"]
    assert h.scheduled_runs[-1]["outcome"] == "exception"
    assert h.scheduled_runs[-1]["error"] == "RuntimeError: the nightly job failed"
    assert "the nightly job failed" in caplog.text
    await h.advance(60 * MINUTE)
    assert len(RUNS) == 1  # no retry; the next run is tomorrow's


async def test_missed_runs_after_downtime_are_not_replayed(doemu_harness: HarnessFactory) -> None:
    h = await _harness(doemu_harness, ["* * * * *"])
    await h.advance(2 * MINUTE)
    assert len(RUNS) == 2
    await h.runtime.close()  # the server is down for ten minutes
    h.clock.advance(10 * MINUTE)
    await h.restart()
    assert len(RUNS) == 2  # nothing replayed at start-up
    await h.advance(MINUTE)
    assert len(RUNS) == 3
    assert RUNS[-1]["scheduledTime"] == T0 - 30_000 + 13 * MINUTE


async def test_run_now_from_the_harness(doemu_harness: HarnessFactory) -> None:
    h = await _harness(doemu_harness, ["*/5 * * * *"])
    outcome = await h.run_scheduled()
    assert outcome == {
        "cron": "*/5 * * * *",
        "scheduledTime": int(T0),
        "outcome": "ok",
        "noRetry": False,
    }
    assert await h.env.CACHE.get(f"ran-{int(T0)}") == "*/5 * * * *"  # its waitUntil finished
    assert (await h.run_scheduled("custom", scheduled_time=5))["cron"] == "custom"


async def test_lenient_mode_passes_env_and_ctx(doemu_harness: HarnessFactory) -> None:
    h = await _harness(doemu_harness, ["*/5 * * * *"], lenient=True)
    await h.run_scheduled()
    env = RUNS[-1]["env"]  # the entry worker's own view of the Worker's env: the same bindings
    assert env.CACHE is h.env.CACHE and RUNS[-1]["ctx"] is not None


async def test_without_a_handler_nothing_is_scheduled(
    doemu_harness: HarnessFactory, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="doemu.crons"):
        h = await _harness(doemu_harness, ["* * * * *"], entry=NoHandler)
    assert "no Default.scheduled() handler" in caplog.text
    await h.advance(5 * MINUTE)
    with pytest.raises(NoScheduledHandler, match="define `async def scheduled"):
        await h.run_scheduled()


@pytest.fixture
async def app(tmp_path: Path) -> Any:
    runtime = Runtime(
        worker_name="crons-app",
        classes={},
        persist_dir=tmp_path / "state",
        clock=ManualClock(T0),
        resources=WorkerResources(
            kv=(KvNamespaceBinding("CACHE"),), crons=("0 0 * * *", "*/5 * * * *")
        ),
        entrypoints={"Default": Default},
    )
    await runtime.start()
    async with client(DoemuApp(runtime, entry=Default)) as http:
        yield runtime, http
    await runtime.close()


async def test_the_test_scheduled_route(app: tuple[Runtime, httpx.AsyncClient]) -> None:
    _, http = app
    ran = await http.get("/__scheduled", params={"cron": "*/5 * * * *"})
    assert (ran.status_code, ran.text) == (200, "Ran scheduled event")
    assert RUNS[-1]["cron"] == "*/5 * * * *" and RUNS[-1]["scheduledTime"] == int(T0)
    timed = await http.get("/cdn-cgi/handler/scheduled?cron=x&time=1700000000000")
    assert timed.status_code == 200 and RUNS[-1]["scheduledTime"] == 1_700_000_000_000
    failed = await http.get("/__scheduled", params={"cron": "0 0 * * *"})
    assert failed.status_code == 500
    assert failed.json() == {"error": "RuntimeError: the nightly job failed"}
    bad = await http.get("/__scheduled?time=soon")
    assert bad.status_code == 400 and "epoch milliseconds" in bad.json()["error"]


async def test_crons_in_the_admin_api(app: tuple[Runtime, httpx.AsyncClient]) -> None:
    _, http = app
    listed = (await http.get(f"{API}/crons")).json()
    assert listed["handler"] is True and listed["now"] == T0  # the clock "next" is on
    assert [(c["cron"], utc(c["next"])) for c in listed["crons"]] == [
        ("0 0 * * *", "Fri 2026-01-02 00:00"),
        ("*/5 * * * *", "Thu 2026-01-01 00:05"),
    ]
    ran = await http.post(f"{API}/crons/run", json={"cron": "*/5 * * * *"})
    assert ran.json()["outcome"] == "ok" and ran.json()["cron"] == "*/5 * * * *"
    default = await http.post(f"{API}/crons/run")
    assert default.json()["cron"] == "0 0 * * *"  # the first trigger
    assert default.json()["outcome"] == "exception"
    history = (await http.get(f"{API}/crons")).json()["history"]
    assert [h["cron"] for h in history] == ["*/5 * * * *", "0 0 * * *"]
    refused = await http.post(f"{API}/crons/run", json={"cron": 5})
    assert refused.status_code == 400
