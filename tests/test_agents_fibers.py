"""Durable fibers in process: ``run_fiber`` and ``stash`` keep a row and a snapshot per fiber,
written before the RPC returns and deleted when the fiber ends, returns, raises or is cancelled.

A crash is ``h.reset(...)``: in-flight work is cancelled and uncommitted writes dropped, so a
fiber's ``cf_agents_runs`` row (committed when its turn yielded) is left behind exactly as after a
SIGKILL. Time is a manual clock; background progress is awaited by polling with a deadline.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agents.fibers.types import FiberContext
from doemu.testing.plugin import HarnessFactory

from .fiber_agents import (
    FiberAgent,
    HandOffAgent,
    _run_names,
    _runs_with_snapshots,
    _wait_forever,
    gate,
)
from .polling import eventually


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
