"""Durable fibers survive SIGKILL: a real ``doemu dev`` process running examples/forever_fibers.

The research agent runs an eight-step fiber (one step a second, stashing after each) with
``keep_alive_interval_ms = 2000``. The whole process group is SIGKILLed mid-job and restarted on
the same persist dir; nothing is sent to the agent afterwards — every observation goes through
the admin API's read-only SQL, which never wakes an object — so only the persisted heartbeat
alarm can bring the agent back and resume the work.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.polling import eventually_sync

from .harness import DevServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "forever_fibers"


@pytest.fixture
def research_project(tmp_path: Path) -> Path:
    target = tmp_path / "forever_fibers"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    return target


def _env() -> dict[str, str]:
    # The `agents` package lives at the repository top; make it importable from the copy.
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}


def sql(server: DevServer, name: str, query: str) -> list[list[Any]]:
    """Read-only SQL on RESEARCHER/<name> through the admin API (never wakes the object)."""
    response = httpx.post(
        f"{server.url}/__doemu/api/objects/RESEARCHER/{name}/sql", json={"query": query}, timeout=5
    )
    response.raise_for_status()
    return list(response.json()["rows"])


def completed_steps(server: DevServer, name: str) -> list[int]:
    return [row[0] for row in sql(server, name, "SELECT step FROM research_steps ORDER BY step")]


def kill_mid_job(server: DevServer, name: str) -> float:
    """SIGKILL the process group mid-job (two steps done, the heartbeat alarm that must resume
    the job persisted); returns the kill time (epoch ms).

    Steps whose ``completed_at`` is earlier were committed by the process that was killed.
    """
    eventually_sync(
        lambda: len(completed_steps(server, name)) >= 2,
        within=10,
        what="two steps",
        ignoring=(Exception,),
    )
    # The crash lands mid-job, once the heartbeat alarm that must resume it is persisted.
    eventually_sync(
        lambda: httpx.get(
            f"{server.url}/__doemu/api/objects/RESEARCHER/{name}/alarm", timeout=5
        ).json()["scheduled_time"],
        within=10,
        what="the heartbeat alarm to be pending",
        ignoring=(Exception,),
    )
    killed_at = time.time() * 1000
    server.kill()
    return killed_at


def steps_before(server: DevServer, name: str, killed_at: float) -> list[int]:
    rows = sql(server, name, "SELECT step, completed_at FROM research_steps ORDER BY step")
    return [step for step, at in rows if at < killed_at]


def test_run_fiber_resumes_after_sigkill_without_any_request(
    dev_server: Any, research_project: Path
) -> None:
    """1. POST /research/<name> starts the eight-step fiber through DO RPC (fire-and-forget).
    2. Once two steps are done and the heartbeat alarm is pending, the process group is SIGKILLed.
    3. The server restarts on the same persist dir; no request is sent to the agent.
    4. Within 30 s `on_fiber_recovered` has run with name "research" and a snapshot holding
       exactly the steps committed before the kill.
    5. The resumed fiber finishes all eight steps, each written once, and `cf_agents_runs` ends
       empty (the heartbeat alarm, the only wake-up, did it all)."""
    server = dev_server(research_project, env=_env())
    name = "sigkill-run"
    answer = httpx.post(f"{server.url}/research/{name}", json={"topic": "tides"}, timeout=10)
    assert answer.json() == {"started": True, "topic": "tides"}
    killed_at = kill_mid_job(server, name)

    server.start()
    committed = steps_before(server, name, killed_at)
    assert 2 <= len(committed) < 8, committed

    recoveries = eventually_sync(
        lambda: sql(server, name, "SELECT name, snapshot, managed FROM research_recoveries"),
        within=30,
        what="on_fiber_recovered to run after the restart",
        ignoring=(Exception,),
    )
    ((hook_name, snapshot_text, managed),) = recoveries
    snapshot = json.loads(snapshot_text)
    assert hook_name == "research"
    assert managed == 0
    assert snapshot["topic"] == "tides"
    assert snapshot["completed"] == committed

    eventually_sync(
        lambda: completed_steps(server, name) == list(range(1, 9)),
        within=30,
        what="the resumed fiber to finish all eight steps",
        ignoring=(Exception,),
    )
    eventually_sync(
        lambda: sql(server, name, "SELECT count(*) FROM cf_agents_runs") == [[0]],
        within=10,
        what="cf_agents_runs to be empty",
        ignoring=(Exception,),
    )
    assert sql(server, name, "SELECT value FROM research_meta WHERE key = 'done'") == [["1"]]
    assert len(sql(server, name, "SELECT * FROM research_recoveries")) == 1
    status = httpx.get(f"{server.url}/research/{name}", timeout=10).json()
    assert (status["done"], status["recovered"]) == (True, 1)


def test_managed_fiber_is_interrupted_then_resolved_after_sigkill(
    dev_server: Any, research_project: Path
) -> None:
    """1. POST /research/<name>?managed=1 starts the job as a managed fiber (ledger: running).
    2. Mid-job (two steps done, heartbeat pending) the process group is SIGKILLed; the server
       restarts, no request sent.
    3. Within 30 s recovery marks the ledger row `interrupted` and `on_fiber_recovered` runs with
       the managed fiber's name and a snapshot of the committed steps.
    4. The hook's resumed work finishes all eight steps and resolves the record `completed`;
       `cf_agents_runs` ends empty."""
    server = dev_server(research_project, env=_env())
    name = "sigkill-managed"
    answer = httpx.post(
        f"{server.url}/research/{name}?managed=1", json={"topic": "glaciers"}, timeout=10
    ).json()
    assert answer["started"] is True
    assert answer["fiber"]["status"] == "running"
    fiber_id = answer["fiber"]["fiber_id"]
    killed_at = kill_mid_job(server, name)

    server.start()
    committed = steps_before(server, name, killed_at)
    assert 2 <= len(committed) < 8, committed
    ledger = "SELECT status FROM cf_agents_fibers WHERE fiber_id = '" + fiber_id + "'"

    recoveries = eventually_sync(
        lambda: sql(
            server, name, "SELECT fiber_id, name, snapshot, managed FROM research_recoveries"
        ),
        within=30,
        what="on_fiber_recovered to run for the managed fiber",
        ignoring=(Exception,),
    )
    ((hook_id, hook_name, snapshot_text, managed),) = recoveries
    assert (hook_id, hook_name, managed) == (fiber_id, "managed-research", 1)
    assert json.loads(snapshot_text)["completed"] == committed
    # Recovery marked it interrupted; it stays so while the resumed work runs (~5 s).
    assert sql(server, name, ledger) in ([["interrupted"]], [["completed"]])

    eventually_sync(
        lambda: sql(server, name, ledger) == [["completed"]],
        within=30,
        what="the resumed work to resolve the managed fiber as completed",
        ignoring=(Exception,),
    )
    assert completed_steps(server, name) == list(range(1, 9))
    assert sql(server, name, "SELECT count(*) FROM cf_agents_runs") == [[0]]
