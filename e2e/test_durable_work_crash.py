"""Workflows (and Queues) across real SIGKILLs of ``doemu dev`` (e2e/apps/durable_app).

Side effects are counted outside the killed process (:mod:`e2e.counter`): each step POSTs there
when it runs, so a step that ran twice shows twice, whatever the persisted state claims.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.polling import eventually_sync

from .counter import Counter, counter

APP = Path(__file__).resolve().parent / "apps" / "durable_app"
LEVELS = pytest.mark.parametrize("level", ["process", "power"])


@pytest.fixture
def effects() -> Iterator[Counter]:
    with counter() as running:
        yield running


def _project(tmp_path: Path, effects: Counter) -> Path:
    project = tmp_path / "app"
    shutil.copytree(APP, project, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    (project / ".dev.vars").write_text(f"COUNTER_URL={effects.url}\n")
    return project


def _steps(effects: Counter, instance_id: str) -> list[str]:
    return [c["step"] for c in effects.snapshot() if c.get("id") == instance_id]


def _status(server: Any, instance_id: str) -> dict[str, Any]:
    with httpx.Client(base_url=server.url, timeout=10) as http:
        response = http.get("/status", params={"id": instance_id})
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result


@LEVELS
def test_a_workflow_survives_kills_in_a_step_in_a_sleep_and_in_a_wait(
    dev_server: Any, tmp_path: Path, effects: Counter, level: str
) -> None:
    """1. Start an instance; its step ``slow`` begins (the counter sees it) and holds.
    2. SIGKILL inside ``slow``; restart: ``slow`` runs again (attempt 2), ``first`` does not.
    3. The instance reaches its 3 s ``nap``; SIGKILL; stay down until the nap is over.
    4. Restart and send no request: the instance wakes by itself (``woke`` is counted).
    5. It waits for "approve"; SIGKILL; restart; the event is sent; it completes.
    6. Every step ran once, except ``slow``, which ran twice (once per attempt)."""
    project = _project(tmp_path, effects)
    server = dev_server(project, "--durability", level)
    with httpx.Client(base_url=server.url, timeout=10) as http:
        assert http.get("/start", params={"id": "job-1", "hold": 60, "nap": 3}).text == "job-1"
    eventually_sync(lambda: "slow" in _steps(effects, "job-1"), within=30, what="slow started")
    server.kill()

    server.start()
    eventually_sync(
        lambda: _status(server, "job-1")["status"] == "waiting",
        within=30,
        what="the instance sleeping in its nap",
    )
    assert _steps(effects, "job-1") == ["first", "slow", "slow"]
    slow_attempts = [c["attempt"] for c in effects.snapshot() if c["step"] == "slow"]
    assert slow_attempts == [1, 2]
    server.kill()
    down_since = time.monotonic()
    eventually_sync(lambda: time.monotonic() - down_since > 3.5, within=10, what="nap over")

    server.start()  # no request: the alarm restored at start-up wakes the instance
    eventually_sync(lambda: "woke" in _steps(effects, "job-1"), within=30, what="woke")
    eventually_sync(
        lambda: _status(server, "job-1")["status"] == "waiting", within=30, what="the wait"
    )
    server.kill()

    server.start()
    with httpx.Client(base_url=server.url, timeout=10) as http:
        assert http.get("/event", params={"id": "job-1", "bonus": 40}).text == "sent"
    final = eventually_sync(
        lambda: (s := _status(server, "job-1"))["status"] == "complete" and s,
        within=30,
        what="the instance complete",
    )
    assert final["output"] == {"result": 42}
    assert _steps(effects, "job-1") == ["first", "slow", "slow", "woke", "last"]
    assert "Traceback" not in server.output


@LEVELS
def test_a_queue_batch_killed_before_its_ack_is_delivered_again(
    dev_server: Any, tmp_path: Path, effects: Counter, level: str
) -> None:
    """1. 10 messages are sent (stored before the answer); the consumer reports each and holds.
    2. SIGKILL while the batch is held, before its ack.
    3. After a restart (no request), the batch comes again with attempts 2 and is acked.
    4. Every message was consumed at least once; counted by message number (what an idempotent
       consumer keys on), each was acknowledged exactly once, and nothing is left."""
    project = _project(tmp_path, effects)
    server = dev_server(project, "--durability", level)
    with httpx.Client(base_url=server.url, timeout=10) as http:
        assert http.get("/enqueue", params={"count": 10, "hold": 60}).text == "queued"

    def seen(attempt: int) -> set[int]:
        return {
            c["step"] for c in effects.snapshot() if c["id"] == "queue" and c["attempt"] == attempt
        }

    eventually_sync(lambda: seen(1) == set(range(10)), within=30, what="first delivery")
    server.kill()
    server.start()
    eventually_sync(lambda: seen(2) == set(range(10)), within=30, what="redelivery, attempts 2")

    def drained() -> bool:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            (queue,) = http.get("/__doemu/api/queues").json()
            return bool(queue["backlog"] == 0)

    eventually_sync(drained, within=30, what="the backlog drained")
    assert not seen(3)  # acked on the second delivery: never a third
    assert "Traceback" not in server.output
