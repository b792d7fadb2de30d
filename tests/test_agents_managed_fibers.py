"""Managed fibers in process: lifecycle, idempotency, cooperative cancel, resolve, crash recovery.

The ledger (``cf_agents_fibers``) is observed through RPC methods that return records as dicts;
a crash is ``h.reset(...)``, after which a fiber left ``running`` must become ``interrupted``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agents import Agent, AgentOptions
from agents.core.portable import wait_until
from agents.fibers.types import FiberContext, FiberRecoveryContext, FiberResolution, FiberStatus
from doemu.testing.plugin import HarnessFactory

from .polling import eventually

GATES: dict[tuple[str, str], asyncio.Event] = {}


def gate(obj: str, key: str) -> asyncio.Event:
    return GATES.setdefault((obj, key), asyncio.Event())


class JobAgent(Agent):
    options = AgentOptions(keep_alive_interval_ms=1000)

    async def on_start(self) -> None:
        self.sql("CREATE TABLE IF NOT EXISTS effects (fiber TEXT, step TEXT)")
        self.sql("CREATE TABLE IF NOT EXISTS hook_log (ctx TEXT)")

    async def on_fiber_recovered(self, ctx: FiberRecoveryContext) -> Any:
        self.sql(
            "INSERT INTO hook_log VALUES (?)",
            json.dumps(
                {
                    "id": ctx.id,
                    "name": ctx.name,
                    "snapshot": ctx.snapshot,
                    "status": ctx.status,
                    "managed": ctx.managed,
                    "key": ctx.idempotency_key,
                    "metadata": ctx.metadata,
                }
            ),
        )
        if ctx.name == "resolve-in-hook":
            return FiberResolution(FiberStatus.COMPLETED, snapshot={"resumed": True})
        if ctx.name == "hook-fails":
            raise RuntimeError("hook broke")
        return None

    def _body(self, key: str, mode: str) -> Callable[[FiberContext], Awaitable[Any]]:
        obj = self.name

        async def body(ctx: FiberContext) -> None:
            self.sql("INSERT INTO effects VALUES (?, 'start')", key)
            ctx.stash({"step": 1, "key": key})
            if mode == "fail":
                raise ValueError("job failed")
            if mode == "cooperative":
                await ctx.signal.wait()
                ctx.signal.throw_if_aborted()
            if mode == "gated":
                await gate(obj, key).wait()
            self.sql("INSERT INTO effects VALUES (?, 'end')", key)

        return body

    async def start(
        self, name: str, key: str | None, mode: str, wait: bool = False, fiber_id: Any = None
    ) -> dict[str, Any]:
        record = await self.start_fiber(
            name,
            self._body(key or name, mode),
            fiber_id=fiber_id,
            idempotency_key=key,
            metadata={"topic": name},
            wait_for_completion=wait,
        )
        return record.to_dict()

    async def inspect(self, fiber_id: str) -> dict[str, Any] | None:
        record = await self.inspect_fiber(fiber_id)
        return None if record is None else record.to_dict()

    async def listing(self, status: Any = None, name: Any = None, limit: Any = None) -> list[str]:
        return [r.name for r in await self.list_fibers(status=status, name=name, limit=limit)]

    async def cancel(self, fiber_id: str, reason: str) -> bool:
        return await self.cancel_fiber(fiber_id, reason)

    async def resolve(self, fiber_id: str, result: dict[str, Any]) -> bool:
        return await self.resolve_fiber(fiber_id, result)

    async def delete(self, status: Any = None) -> int:
        return await self.delete_fibers(status)

    async def effects(self) -> list[list[str]]:
        return [[r["fiber"], r["step"]] for r in self.sql("SELECT * FROM effects")]

    async def hook_log(self) -> list[dict[str, Any]]:
        return [json.loads(r["ctx"]) for r in self.sql("SELECT ctx FROM hook_log")]

    async def run_rows(self) -> int:
        return int(self.sql("SELECT count(*) AS n FROM cf_agents_runs")[0]["n"])


async def status_of(stub: Any, fiber_id: str, status: str) -> dict[str, Any] | None:
    record: dict[str, Any] | None = await stub.inspect(fiber_id)
    return record if record is not None and record["status"] == status else None


async def test_lifecycle_running_then_completed(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"JOBS": JobAgent})
    name = unique_name("life")
    stub = h.env.JOBS.getByName(name)
    started = await stub.start("report", None, "gated")
    assert started["accepted"] is True
    assert started["status"] == "running"
    assert started["metadata"] == {"topic": "report"}
    assert started["started_at"] == started["created_at"] == h.clock.now()
    fid = started["fiber_id"]
    running = await eventually(lambda: _with_snapshot(stub, fid))
    assert running["snapshot"] == {"step": 1, "key": "report"}
    assert await stub.run_rows() == 1
    gate(name, "report").set()
    done = await eventually(lambda: status_of(stub, fid, "completed"))
    assert done["settled_at"] == h.clock.now()
    assert done["error"] is None
    assert await stub.run_rows() == 0
    assert await stub.effects() == [["report", "start"], ["report", "end"]]


async def _with_snapshot(stub: Any, fiber_id: str) -> dict[str, Any] | None:
    record: dict[str, Any] | None = await stub.inspect(fiber_id)
    return record if record is not None and record["snapshot"] else None


async def test_wait_for_completion_and_failure_status(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"JOBS": JobAgent})
    stub = h.env.JOBS.getByName(unique_name("wait"))
    done = await stub.start("quick", None, "plain", True)
    assert (done["status"], done["accepted"]) == ("completed", True)
    await h.advance(10)  # newest first: give the second fiber a later created_at
    failed = await stub.start("broken", None, "fail", True)
    assert (failed["status"], failed["error"]) == ("error", "job failed")
    assert await stub.run_rows() == 0
    assert await stub.listing() == ["broken", "quick"]
    assert await stub.listing("error") == ["broken"]
    assert await stub.listing(["completed", "error"], "quick") == ["quick"]
    assert await stub.listing(None, None, 1) == ["broken"]


async def test_duplicate_idempotency_key_returns_existing_and_never_reruns(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"JOBS": JobAgent})
    name = unique_name("idem")
    stub = h.env.JOBS.getByName(name)
    first = await stub.start("charge", "order-7", "gated")
    again = await stub.start("charge", "order-7", "gated")
    assert again["accepted"] is False
    assert again["fiber_id"] == first["fiber_id"]
    gate(name, "order-7").set()
    await eventually(lambda: status_of(stub, first["fiber_id"], "completed"))
    after = await stub.start("charge", "order-7", "plain", True)
    assert (after["accepted"], after["status"]) == (False, "completed")
    assert await stub.effects() == [["order-7", "start"], ["order-7", "end"]]  # ran once
    by_id = await stub.start("charge", None, "plain", False, first["fiber_id"])
    assert by_id["accepted"] is False
    with pytest.raises(Exception, match="refer to different fibers"):
        await stub.start("charge", "order-7", "plain", False, "some-other-id")


async def test_cancel_is_cooperative_and_final(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"JOBS": JobAgent})
    stub = h.env.JOBS.getByName(unique_name("cancel"))
    fid = (await stub.start("long", None, "cooperative"))["fiber_id"]
    await eventually(lambda: _with_snapshot(stub, fid))
    assert await stub.cancel(fid, "user changed their mind") is True
    record = await stub.inspect(fid)
    assert (record["status"], record["error"]) == ("aborted", "user changed their mind")
    await eventually(lambda: _no_runs(stub))  # the code saw the signal and stopped
    assert await stub.effects() == [["long", "start"]]  # never reached its end
    assert (await stub.inspect(fid))["status"] == "aborted"
    assert await stub.cancel(fid, "again") is False
    assert await stub.resolve(fid, {"status": "completed"}) is False  # only interrupted ones


async def _no_runs(stub: Any) -> bool:
    return bool(await stub.run_rows() == 0)


async def test_crash_leaves_running_fiber_interrupted_and_hook_sees_it(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"JOBS": JobAgent})
    name = unique_name("crash")
    stub = h.env.JOBS.getByName(name)
    fid = (await stub.start("crawl", "crawl-key", "gated"))["fiber_id"]
    await eventually(lambda: _with_snapshot(stub, fid))
    h.reset("JOBS", name, "simulated crash")

    record = await stub.inspect(fid)  # activation runs recovery first
    assert record["status"] == "interrupted"
    assert record["snapshot"] == {"step": 1, "key": "crawl-key"}
    (seen,) = await stub.hook_log()
    assert seen == {
        "id": fid,
        "name": "crawl",
        "snapshot": {"step": 1, "key": "crawl-key"},
        "status": "interrupted",
        "managed": True,
        "key": "crawl-key",
        "metadata": {"topic": "crawl"},
    }
    assert await stub.run_rows() == 0
    # The same key still answers with the interrupted record, without re-running the work.
    again = await stub.start("crawl", "crawl-key", "plain")
    assert (again["accepted"], again["status"]) == (False, "interrupted")
    assert await stub.effects() == [["crawl-key", "start"]]
    # Settle it by hand afterwards.
    assert await stub.resolve(fid, {"status": "completed", "snapshot": {"done": True}}) is True
    resolved = await stub.inspect(fid)
    assert (resolved["status"], resolved["snapshot"]) == ("completed", {"done": True})
    await h.advance(5_000)
    assert len(await stub.hook_log()) == 1


async def test_hook_can_resolve_interrupted_fiber_or_fail_it(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"JOBS": JobAgent})
    name = unique_name("hook-resolve")
    stub = h.env.JOBS.getByName(name)
    ok = (await stub.start("resolve-in-hook", None, "gated"))["fiber_id"]
    bad = (await stub.start("hook-fails", None, "gated"))["fiber_id"]
    await eventually(lambda: _with_snapshot(stub, bad))
    h.reset("JOBS", name, "simulated crash")
    resolved = await stub.inspect(ok)
    assert (resolved["status"], resolved["snapshot"]) == ("completed", {"resumed": True})
    failed = await stub.inspect(bad)
    assert (failed["status"], failed["error"]) == ("error", "hook broke")
    assert await stub.run_rows() == 0
    assert await h.get_alarm("JOBS", name) is None


async def test_delete_fibers_removes_terminal_records(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"JOBS": JobAgent})
    name = unique_name("delete")
    stub = h.env.JOBS.getByName(name)
    await stub.start("a", None, "plain", True)
    await h.advance(10)
    await stub.start("b", None, "fail", True)
    running = (await stub.start("c", None, "gated"))["fiber_id"]
    assert await stub.delete() == 2
    assert await stub.listing() == ["c"]
    assert await stub.delete("running") == 0  # never deletes live work
    gate(name, "c").set()
    await eventually(lambda: status_of(stub, running, "completed"))
    assert await stub.delete("completed") == 1


# -- regressions: fire-and-forget start, user cancellation, ledger-only races --------------------


class RaceJobAgent(JobAgent):
    async def on_fiber_recovered(self, ctx: FiberRecoveryContext) -> Any:
        result = await super().on_fiber_recovered(ctx)
        if ctx.name == "cancels-sibling":
            assert ctx.metadata is not None
            await self.cancel_fiber(ctx.metadata["sibling"], "cancelled by a sibling's recovery")
        return result

    async def start_detached(self, name: str) -> dict[str, Any]:
        """Fire-and-forget ``start_fiber``: what is stored when the RPC answers?"""
        wait_until(self.ctx, self.start_fiber(name, self._body(name, "gated")))
        ledger = self.sql("SELECT status FROM cf_agents_fibers WHERE name = ?", name)
        return {"ledger": [r["status"] for r in ledger], "runs": await self.run_rows()}

    async def start_self_cancelling(self, name: str) -> dict[str, Any]:
        async def body(ctx: FiberContext) -> None:
            inner = asyncio.ensure_future(asyncio.Event().wait())
            inner.cancel()  # e.g. a helper task the fiber awaits is cancelled elsewhere
            await inner  # CancelledError propagates out of the fiber's code

        record = await self.start_fiber(name, body)
        task = self._fibers.task(record.fiber_id)
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)
        return {"fiber_id": record.fiber_id, "runs": await self.run_rows()}

    async def add_ledger_only(self, fiber_id: str, name: str, sibling: str | None) -> None:
        """A ledger row whose process died before its run row was written."""
        from js import Date

        self.sql(
            "INSERT INTO cf_agents_fibers (fiber_id, idempotency_key, name, status, snapshot, "
            "metadata_json, error_message, created_at, started_at, completed_at) "
            "VALUES (?, NULL, ?, 'pending', NULL, ?, NULL, ?, NULL, NULL)",
            fiber_id,
            name,
            json.dumps({"sibling": sibling}),
            Date.now(),
        )


async def test_fire_and_forget_start_fiber_writes_both_rows_before_returning(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"JOBS": RaceJobAgent})
    name = unique_name("detached")
    stub = h.env.JOBS.getByName(name)
    assert await stub.start_detached("detached") == {"ledger": ["running"], "runs": 1}
    h.reset("JOBS", name, "crash right after the RPC answered")  # the task never ran
    (seen,) = await stub.hook_log()
    assert (seen["name"], seen["status"]) == ("detached", "interrupted")
    assert await stub.listing("interrupted") == ["detached"]
    assert await stub.effects() == []


async def test_cancellation_inside_a_managed_fiber_settles_it_aborted(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"JOBS": RaceJobAgent})
    name = unique_name("self-cancel")
    stub = h.env.JOBS.getByName(name)
    out = await stub.start_self_cancelling("self-cancel")
    assert out["runs"] == 0  # the run row is gone: nothing for recovery to find
    record = await stub.inspect(out["fiber_id"])
    assert (record["status"], record["error"]) == ("aborted", "fiber was cancelled")
    await h.advance(5_000)
    assert await stub.hook_log() == []
    assert (await stub.inspect(out["fiber_id"]))["status"] == "aborted"


async def test_ledger_only_recovery_skips_a_row_settled_by_an_earlier_hook(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"JOBS": RaceJobAgent})
    name = unique_name("ledger-race")
    stub = h.env.JOBS.getByName(name)
    await stub.add_ledger_only("fiber-a", "cancels-sibling", "fiber-b")
    await h.advance(10)
    await stub.add_ledger_only("fiber-b", "victim", None)
    h.reset("JOBS", name, "crash")
    # Activation: A is recovered first and its hook cancels B; B must not reach the hook.
    assert [seen["id"] for seen in await stub.hook_log()] == ["fiber-a"]
    victim = await stub.inspect("fiber-b")
    assert (victim["status"], victim["error"]) == ("aborted", "cancelled by a sibling's recovery")
    assert (await stub.inspect("fiber-a"))["status"] == "interrupted"
    await h.advance(5_000)
    assert len(await stub.hook_log()) == 1
