"""examples/durable_jobs: its README walkthrough, with a real SIGKILL in the middle of the job.

An agent hands a job of 90 items to a workflow (six slices of 15, one ``step.do`` each, a 1.5 s
``step.sleep`` between them); each slice sends its items through a queue to a consumer, which
hands each item's square to the agent. The server is SIGKILLed while the workflow sleeps between
slices and while items wait in the queue; after a restart nothing is sent to the job, and it must
finish by itself: every slice run exactly once (the agent counts each run, with its attempt),
every item answered exactly once in the agent's result, nothing left in the queue.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import httpx

from tests.polling import eventually_sync

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "durable_jobs"
ITEMS, SLICE, SLICES = 90, 15, 6


def _instance(server: Any, instance: str) -> dict[str, Any]:
    """The workflow instance as the admin API shows it (read from its file; wakes nothing)."""
    answer = httpx.get(f"{server.url}/__doemu/api/workflows/JOBS/instances/{instance}", timeout=10)
    answer.raise_for_status()
    result: dict[str, Any] = answer.json()
    return result


def _queue(server: Any) -> dict[str, Any]:
    (queue,) = httpx.get(f"{server.url}/__doemu/api/queues", timeout=10).json()
    result: dict[str, Any] = queue
    return result


def _agent_sql(server: Any, name: str, query: str) -> list[list[Any]]:
    """The agent's own tables through the admin API's read-only SQL (which wakes no object)."""
    answer = httpx.post(
        f"{server.url}/__doemu/api/objects/COORDINATOR/{name}/sql",
        json={"query": query},
        timeout=10,
    )
    answer.raise_for_status()
    rows: list[list[Any]] = answer.json()["rows"]
    return rows


def _killable(server: Any, instance: str) -> bool:
    """Two slices or more done, the workflow asleep with 0.4 s or more of its pause left, and
    items waiting in the queue: a kill now lands in a sleep and before their delivery."""
    steps = _instance(server, instance)["steps"]
    done = [s for s in steps if s["kind"] == "do" and s["state"] == "done"]
    asleep = [s for s in steps if s["kind"] == "sleep" and s["state"] != "done"]
    left_ms = asleep[-1]["wakeAt"] - time.time() * 1000 if asleep else 0
    return 2 <= len(done) < SLICES and left_ms > 400 and _queue(server)["backlog"] > 0


def test_the_job_finishes_after_a_sigkill_with_no_step_rerun_and_no_item_lost(
    dev_server: Any, tmp_path: Path
) -> None:
    """1. POST /jobs/<name> starts the job; the agent answers at once.
    2. When two slices are done, the workflow sleeps and items wait in the queue: SIGKILL.
    3. Restart on the same state and send nothing to the job: the workflow's sleep (an alarm)
       and the queue's stored messages carry it on; the agent's result appears by itself.
    4. GET /jobs/<name>: every slice ran once (attempt 1), every item answered once, the sum of
       squares right, the workflow complete with its summary; the queue is empty."""
    project = tmp_path / "durable_jobs"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    server = dev_server(project)
    name = "walkthrough"
    instance = f"{name}-job"
    with httpx.Client(base_url=server.url, timeout=30) as http:
        started = http.post(f"/jobs/{name}", json={"items": ITEMS, "slice": SLICE, "pace": 1.5})
        assert started.json() == {
            "started": True,
            "instance": instance,
            "items": ITEMS,
            "slices": SLICES,
        }
        again = http.post(f"/jobs/{name}", json={"items": 5})
        assert again.json()["started"] is False  # one job per agent: the second POST follows it
        for bad, status in (("{not json", 400), ('{"items": 0}', 400), ("[1]", 400)):
            answer = http.post("/jobs/bad-input", content=bad)
            assert (answer.status_code, "error" in answer.json()) == (status, True), bad
        assert http.get("/jobs/a/b").status_code == 404
        assert http.get("/jobs/bad-input").json() == {"started": False}  # nothing was started

    eventually_sync(
        lambda: _killable(server, instance), within=30, interval=0.02, what="a moment to kill"
    )
    server.kill()
    assert "Traceback" not in server.output

    server.start()  # nothing is sent to the agent, the workflow or the queue from here on
    result = eventually_sync(
        lambda: (rows := _agent_sql(server, name, "SELECT result FROM job")) and rows[0][0],
        within=60,
        what="the agent's result, with no request after the restart",
    )
    assert result is not None

    with httpx.Client(base_url=server.url, timeout=30) as http:
        report = http.get(f"/jobs/{name}").json()
    assert report["result"] == {"items": ITEMS, "sum_of_squares": sum(i * i for i in range(ITEMS))}
    assert report["summary"] == {"slices": SLICES, "items_sent": ITEMS}
    assert report["slice_runs"] == {str(n): 1 for n in range(SLICES)}  # no slice ran twice
    assert (report["items_done"], report["workflow"]) == (ITEMS, "complete")
    assert report["deliveries"] >= ITEMS  # at least once; the agent kept one answer per item
    attempts = _agent_sql(server, name, "SELECT DISTINCT attempt FROM slice_runs")
    assert attempts == [[1]]

    final = _instance(server, instance)
    assert final["status"] == "complete"
    assert final["output"] == {"slices": SLICES, "items_sent": ITEMS}
    assert [s["attempts"] for s in final["steps"] if s["kind"] == "do"] == [1] * (SLICES + 1)
    queue = _queue(server)
    assert (queue["backlog"], queue["dead_letters"]) == (0, [])
    assert "Traceback" not in server.output
