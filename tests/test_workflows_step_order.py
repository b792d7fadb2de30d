"""An instance's steps are listed in the order the run first reached them, however often each
row is written again (a retry's attempts, a result after its start), and a persist dir written
before steps had a position opens, carries on and lists its steps in order.

The order is read where users see it, the admin API's instance view (which the inspector shows).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from workers import WorkflowEntrypoint

from doemu.config.bindings import WorkerResources, WorkflowBinding
from doemu.persist import object_file
from doemu.testing.plugin import HarnessFactory

from .admin_helpers import API, client

#: One retry, after one second: a step that fails its first attempt finishes on the second.
RETRY_ONCE = {"retries": {"limit": 1, "delay": 1000, "backoff": "constant"}}

#: ``workflow_steps`` as doemu created it before steps had a position (listed by rowid).
OLD_STEPS_DDL = (
    "CREATE TABLE workflow_steps (key TEXT PRIMARY KEY, kind TEXT NOT NULL, "
    "name TEXT NOT NULL, seq INTEGER NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL "
    "DEFAULT 0, value BLOB, error TEXT, wake_at REAL, event_type TEXT, updated REAL)"
)
OLD_COLUMNS = "key, kind, name, seq, state, attempts, value, error, wake_at, event_type, updated"


class Sequential(WorkflowEntrypoint):
    """flaky (fails once) → sleep → after."""

    async def run(self, event: Any, step: Any) -> Any:
        @step.do(config=RETRY_ONCE)
        async def flaky(ctx: Any) -> str:
            if ctx["attempt"] == 1:
                raise RuntimeError("the first attempt fails")
            return "flaky"

        first = await flaky()
        await step.sleep("breather", "1 minute")

        @step.do()
        async def after() -> str:
            return "after"

        return [first, await after()]


class FannedIn(WorkflowEntrypoint):
    """flaky (fails once) and steady run together for combine; then last.

    steady finishes while flaky waits for its retry, so flaky's row is written again after
    steady's: the case where the order of writes and the order of execution part."""

    async def run(self, event: Any, step: Any) -> Any:
        @step.do(config=RETRY_ONCE)
        async def flaky(ctx: Any) -> int:
            if ctx["attempt"] == 1:
                raise RuntimeError("the first attempt fails")
            return 1

        @step.do()
        async def steady() -> int:
            return 2

        @step.do(concurrent=True)
        async def combine(flaky: int, steady: int) -> int:
            return flaky + steady

        @step.do()
        async def last(combine: int) -> int:
            return combine * 10

        return await last()


def _resources() -> WorkerResources:
    return WorkerResources(
        workflows=(
            WorkflowBinding("SEQ", "sequential", "Sequential", True),
            WorkflowBinding("FAN", "fanned-in", "FannedIn", True),
        )
    )


async def _harness(doemu_harness: HarnessFactory, persist_dir: Path) -> Any:
    return await doemu_harness(
        {},
        resources=_resources(),
        entrypoints={"Sequential": Sequential, "FannedIn": FannedIn},
        persist_dir=persist_dir,
    )


async def _view(h: Any, binding: str, instance_id: str) -> dict[str, Any]:
    async with client(h.app()) as http:
        got = await http.get(f"{API}/workflows/{binding}/instances/{instance_id}")
    assert got.status_code == 200, got.text
    view: dict[str, Any] = got.json()
    return view


def _steps(view: dict[str, Any]) -> list[tuple[str, str, str, int]]:
    return [(s["kind"], s["name"], s["state"], s["attempts"]) for s in view["steps"]]


async def test_a_retried_step_keeps_its_place_before_later_steps(
    doemu_harness: HarnessFactory, tmp_path: Path
) -> None:
    h = await _harness(doemu_harness, tmp_path / "state")
    await h.env.SEQ.create(id="seq-order-1")
    await h.advance(0)  # flaky's first attempt fails: a retry in one second
    assert _steps(await _view(h, "SEQ", "seq-order-1")) == [("do", "flaky", "retrying", 1)]
    await h.advance(1000)  # flaky succeeds; the sleep begins
    await h.advance(60_000)  # the sleep ends; after runs
    view = await _view(h, "SEQ", "seq-order-1")
    assert view["status"] == "complete" and view["output"] == ["flaky", "after"]
    assert _steps(view) == [
        ("do", "flaky", "done", 2),
        ("sleep", "breather", "done", 0),
        ("do", "after", "done", 1),
    ]


async def test_a_step_written_after_a_later_one_keeps_its_place(
    doemu_harness: HarnessFactory, tmp_path: Path
) -> None:
    h = await _harness(doemu_harness, tmp_path / "state")
    await h.env.FAN.create(id="fan-order-1")
    await h.advance(0)
    # flaky began first; its failure was written after steady's result.
    assert _steps(await _view(h, "FAN", "fan-order-1")) == [
        ("do", "flaky", "retrying", 1),
        ("do", "steady", "done", 1),
    ]
    await h.advance(1000)
    view = await _view(h, "FAN", "fan-order-1")
    assert view["status"] == "complete" and view["output"] == 30
    assert _steps(view) == [
        ("do", "flaky", "done", 2),
        ("do", "steady", "done", 1),
        ("do", "combine", "done", 1),
        ("do", "last", "done", 1),
    ]


def _downgrade(path: Path) -> list[tuple[str, str]]:
    """Rewrite the instance file's step table as the previous schema had it (the rows in the
    order they were reached, so by rowid as that schema listed them); its rows' keys and
    states."""
    db = sqlite3.connect(path)
    try:
        with db:
            db.execute("ALTER TABLE workflow_steps RENAME TO steps_now")
            db.execute("DROP INDEX workflow_steps_position")
            db.execute(OLD_STEPS_DDL)
            db.execute(
                f"INSERT INTO workflow_steps ({OLD_COLUMNS}) "
                f"SELECT {OLD_COLUMNS} FROM steps_now ORDER BY position"
            )
            db.execute("DROP TABLE steps_now")
        columns = [r[1] for r in db.execute("PRAGMA table_info(workflow_steps)")]
        assert "position" not in columns
        return [(str(k), str(s)) for k, s in db.execute("SELECT key, state FROM workflow_steps")]
    finally:
        db.close()


def _columns(path: Path) -> list[str]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [str(r[1]) for r in db.execute("PRAGMA table_info(workflow_steps)")]
    finally:
        db.close()


async def test_a_persist_dir_from_before_step_positions_opens_and_carries_on(
    doemu_harness: HarnessFactory, tmp_path: Path
) -> None:
    """An instance asleep mid-run in a file whose step table has no position column: the
    runtime opens it, the column is added (seeded from the old order), the instance wakes
    from its sleep, finishes, and its steps list in order, the new one last."""
    persist = tmp_path / "state"
    h = await _harness(doemu_harness, persist)
    await h.env.SEQ.create(id="seq-old-1")
    await h.advance(0)
    await h.advance(1000)  # flaky done (second attempt); asleep for a minute
    service = h.runtime.extra.workflows["SEQ"]
    path = object_file(service.directory, str(service.namespace.ids.from_name("seq-old-1")))
    await h.close()

    assert _downgrade(path) == [("do:flaky:1", "done"), ("sleep:breather:60000:1", "sleeping")]

    h = await _harness(doemu_harness, persist)
    assert (await (await h.env.SEQ.get("seq-old-1")).status())["status"] == "waiting"
    assert "position" in _columns(path)
    await h.advance(60_000)  # the sleep spanned the restart; the alarm wakes the instance
    view = await _view(h, "SEQ", "seq-old-1")
    assert view["status"] == "complete" and view["output"] == ["flaky", "after"]
    assert _steps(view) == [
        ("do", "flaky", "done", 2),
        ("sleep", "breather", "done", 0),
        ("do", "after", "done", 1),
    ]
