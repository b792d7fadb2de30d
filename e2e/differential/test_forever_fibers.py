"""examples/forever_fibers on doemu and on workerd: the same walkthrough, the same answers.

The example's README, as a client script: an eight-step research job (one step a second) runs
as a durable fiber with a two-second heartbeat alarm; a SIGKILL mid-job and a restart on the same
state, with no request sent afterwards, must end with every step done once and the recovery hook
called with the steps committed before the kill. Observations after the kill read the objects'
SQLite files (``server.sql``, :func:`stored_alarm`), which never wakes an object: only the stored
heartbeat alarm can bring the agent back, on either runtime.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from tests.polling import eventually_sync

from ..targets import AGENTS_VENDOR, ROOT, TargetServer, stored_alarm
from .conftest import running

EXAMPLE = ROOT / "examples" / "forever_fibers"
STEPS = list(range(1, 9))


@pytest.fixture(scope="module")
def fibers(serve: Any) -> TargetServer:
    server: TargetServer = serve(EXAMPLE, vendor=AGENTS_VENDOR)
    return server


def steps(server: TargetServer, name: str) -> list[int]:
    rows = server.sql("RESEARCHER", name, "SELECT step FROM research_steps ORDER BY step")
    return [row["step"] for row in rows]


def status(server: TargetServer, name: str) -> dict[str, Any]:
    answer = httpx.get(f"{server.url}/research/{name}", timeout=30)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def test_a_job_runs_all_eight_steps(fibers: TargetServer, target: str) -> None:
    """1. POST /research/<name> answers at once: the job runs under waitUntil.
    2. GET /research/<name> reports progress until all eight steps are done, each once.
    3. A second POST does not start the job again."""
    server = running(fibers)
    name = f"complete-{target}"
    answer = httpx.post(f"{server.url}/research/{name}", json={"topic": "tides"}, timeout=30)
    assert answer.json() == {"started": True, "topic": "tides"}

    done = eventually_sync(
        lambda: (s := status(server, name))["done"] and s,
        within=40,
        what="the job to finish",
    )
    assert done["completed_steps"] == STEPS
    assert done["findings"] == [f"finding {step} about tides" for step in STEPS]
    assert (done["recovered"], done["running_fibers"], done["managed"]) == (0, 0, [])
    again = httpx.post(f"{server.url}/research/{name}", json={"topic": "other"}, timeout=30)
    assert again.json()["started"] is False
    assert again.json()["topic"] == "tides"
    assert server.sql("RESEARCHER", name, "SELECT count(*) AS n FROM cf_agents_runs") == [{"n": 0}]


def committed_before(server: TargetServer, name: str, killed_at: float) -> list[int]:
    rows = server.sql(
        "RESEARCHER", name, "SELECT step, completed_at FROM research_steps ORDER BY step"
    )
    return [row["step"] for row in rows if row["completed_at"] < killed_at]


def test_jobs_resume_after_sigkill_without_any_request(fibers: TargetServer, target: str) -> None:
    """1. A plain job (run_fiber) and a managed one (start_fiber) start on two agents.
    2. Once both have two steps and a stored heartbeat alarm, the server is SIGKILLed.
    3. It restarts on the same state; nothing is sent to either agent.
    4. Each agent's recovery hook runs once, with the steps committed before the kill; the
       managed fiber's record is `interrupted`, then `completed` by the resumed work.
    5. All eight steps end done, each once; no fiber row is left; GET reports recovered 1."""
    server = running(fibers)
    plain, managed = f"plain-{target}", f"managed-{target}"
    answer = httpx.post(f"{server.url}/research/{plain}", json={"topic": "tides"}, timeout=30)
    assert answer.json() == {"started": True, "topic": "tides"}
    answer = httpx.post(
        f"{server.url}/research/{managed}?managed=1", json={"topic": "glaciers"}, timeout=30
    )
    record = answer.json()["fiber"]
    assert (answer.json()["started"], record["status"]) == (True, "running")

    for name in (plain, managed):
        eventually_sync(lambda n=name: len(steps(server, n)) >= 2, within=20, what="two steps")
        eventually_sync(
            lambda n=name: stored_alarm(server, "RESEARCHER", n),
            within=10,
            what=f"{name}'s heartbeat alarm to be stored",
        )
    killed_at = time.time() * 1000
    server.kill()
    server.restart()

    committed = {name: committed_before(server, name, killed_at) for name in (plain, managed)}
    for name, done in committed.items():
        assert 2 <= len(done) < 8, (name, done)
    recovered = {
        name: eventually_sync(
            lambda n=name: server.sql(
                "RESEARCHER", n, "SELECT fiber_id, name, snapshot, managed FROM research_recoveries"
            ),
            within=30,
            what=f"on_fiber_recovered to run for {name} with no request",
        )
        for name in (plain, managed)
    }
    (hook,) = recovered[plain]
    assert (hook["name"], hook["managed"]) == ("research", 0)
    snapshot = json.loads(hook["snapshot"])
    assert (snapshot["topic"], snapshot["completed"]) == ("tides", committed[plain])
    (hook,) = recovered[managed]
    assert (hook["fiber_id"], hook["name"], hook["managed"]) == (
        record["fiber_id"],
        "managed-research",
        1,
    )
    snapshot = json.loads(hook["snapshot"])
    assert (snapshot["topic"], snapshot["completed"]) == ("glaciers", committed[managed])

    ledger = "SELECT status FROM cf_agents_fibers WHERE fiber_id = ?"
    # Recovery marked the record interrupted; it stays so while the resumed work runs.
    assert server.sql("RESEARCHER", managed, ledger, record["fiber_id"]) in (
        [{"status": "interrupted"}],
        [{"status": "completed"}],
    )
    for name in (plain, managed):
        eventually_sync(
            lambda n=name: steps(server, n) == STEPS,
            within=30,
            what=f"{name}'s resumed fiber to finish all eight steps",
        )
    eventually_sync(
        lambda: (
            server.sql("RESEARCHER", managed, ledger, record["fiber_id"])
            == [{"status": "completed"}]
        ),
        within=10,
        what="the managed fiber's record to be completed",
    )
    for name in (plain, managed):
        eventually_sync(
            lambda n=name: (
                server.sql("RESEARCHER", n, "SELECT count(*) AS n FROM cf_agents_runs")
                == [{"n": 0}]
            ),
            within=10,
            what=f"{name}'s cf_agents_runs to be empty",
        )
        final = status(server, name)
        assert (final["done"], final["recovered"], final["completed_steps"]) == (True, 1, STEPS)
