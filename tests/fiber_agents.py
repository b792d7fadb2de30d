"""The durable fiber tests' agent: fibers run inline or in the background on gates, over RPC.

Background fibers wait on ``GATES``, keyed by (object name, fiber name); one never opened is a
fiber "crashed" mid-flight by ``h.reset(...)``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, ClassVar

from js import Date

from agents import Agent, AgentOptions, NotInFiberError
from agents.core.portable import wait_until
from agents.fibers.types import FiberContext, FiberRecoveryContext
from doemu.clock import ManualClock

__all__ = [
    "FiberAgent",
    "HandOffAgent",
    "_run_names",
    "_runs_with_snapshots",
    "_wait_forever",
    "gate",
]


#: Gates that background fibers wait on, keyed by (object name, fiber name). Never set for a
#: fiber meant to be "crashed" mid-flight.
GATES: dict[tuple[str, str], asyncio.Event] = {}


def gate(obj: str, fiber: str) -> asyncio.Event:
    return GATES.setdefault((obj, fiber), asyncio.Event())


class FiberAgent(Agent):
    options = AgentOptions(keep_alive_interval_ms=1000, fiber_recovery_max_age_ms=1_200_000)
    #: Set by a test that wants hooks to take (manual) time: each hook moves the clock by 1 ms.
    clock: ClassVar[ManualClock | None] = None

    async def on_start(self) -> None:
        self.sql(
            "CREATE TABLE IF NOT EXISTS recovered_log "
            "(id TEXT, name TEXT, snapshot TEXT, created_at INTEGER, at INTEGER, attempt INTEGER)"
        )
        self.sql("CREATE TABLE IF NOT EXISTS errors_log (kind TEXT, message TEXT, cause TEXT)")

    async def on_fiber_recovered(self, ctx: FiberRecoveryContext) -> None:
        from js import Date

        self.sql(
            "INSERT INTO recovered_log VALUES (?, ?, ?, ?, ?, ?)",
            ctx.id,
            ctx.name,
            json.dumps(ctx.snapshot),
            ctx.created_at,
            Date.now(),
            ctx.attempt,
        )
        if self.clock is not None:
            self.clock.set(self.clock.now() + 1)
        if ctx.name.startswith("poison"):
            raise RuntimeError(f"cannot recover {ctx.name}")

    async def on_error(self, error: BaseException, context: Any = None) -> None:
        self.sql(
            "INSERT INTO errors_log VALUES (?, ?, ?)",
            type(error).__name__,
            str(error),
            repr(error.__cause__),
        )

    # -- RPC used by the tests -------------------------------------------------------------------
    async def run_inline(self, value: Any) -> dict[str, Any]:
        seen: dict[str, Any] = {}

        async def body(ctx: FiberContext) -> Any:
            seen["rows"] = self.sql("SELECT id, name, snapshot FROM cf_agents_runs")
            seen["id"] = ctx.id
            seen["snapshot"] = ctx.snapshot
            seen["keep_alive_refs"] = self.keep_alive_refs
            await asyncio.sleep(0)
            return {"echo": value}

        result = await self.run_fiber("inline", body)
        return {
            "result": result,
            **seen,
            "after": self.sql("SELECT id FROM cf_agents_runs"),
            "refs_after": self.keep_alive_refs,
        }

    async def run_failing(self) -> dict[str, Any]:
        seen: dict[str, Any] = {}

        async def body(ctx: FiberContext) -> None:
            seen["rows"] = len(self.sql("SELECT id FROM cf_agents_runs"))
            await asyncio.sleep(0)
            raise ValueError("step 3 broke")

        try:
            await self.run_fiber("failing", body)
        except ValueError as exc:
            seen["raised"] = str(exc)
        seen["after"] = len(self.sql("SELECT id FROM cf_agents_runs"))
        seen["refs_after"] = self.keep_alive_refs
        return seen

    async def stash_twice(self) -> dict[str, Any]:
        seen: dict[str, Any] = {}

        async def body(ctx: FiberContext) -> None:
            query = "SELECT snapshot FROM cf_agents_runs WHERE id = ?"
            ctx.stash({"step": 1})
            seen["first"] = self.sql(query, ctx.id)[0]["snapshot"]  # no await in between
            self.stash({"step": 2, "via": "self"})
            seen["second"] = self.sql(query, ctx.id)[0]["snapshot"]
            seen["ctx_snapshot"] = ctx.snapshot
            await asyncio.sleep(0)

        await self.run_fiber("stashing", body)
        try:
            self.stash({"outside": True})
        except NotInFiberError as exc:
            seen["outside"] = type(exc).__name__
        return seen

    async def start_bg(self, fiber: str, steps: list[Any]) -> None:
        """Fire-and-forget: stash ``steps`` then wait for the fiber's gate."""
        obj = self.name

        async def body(ctx: FiberContext) -> str:
            self.stash({"fiber": fiber, "steps": steps})
            await gate(obj, fiber).wait()
            self.stash({"fiber": fiber, "steps": [*steps, "last"]})  # contextvar still right
            return fiber

        wait_until(self.ctx, self.run_fiber(fiber, body))

    async def runs(self) -> list[dict[str, Any]]:
        return self.sql("SELECT id, name, snapshot, created_at FROM cf_agents_runs ORDER BY name")

    async def recovered(self) -> list[dict[str, Any]]:
        return self.sql("SELECT * FROM recovered_log ORDER BY at, name")

    async def errors(self) -> list[dict[str, Any]]:
        return self.sql("SELECT * FROM errors_log")

    async def retry_rows(self) -> list[dict[str, Any]]:
        return self.sql("SELECT id, attempts, next_attempt_at FROM cf_agents_run_recovery")

    async def refs(self) -> int:
        return self.keep_alive_refs


async def _runs_with_snapshots(stub: Any, n: int) -> list[dict[str, Any]] | None:
    rows: list[dict[str, Any]] = await stub.runs()
    return rows if len(rows) == n and all(r["snapshot"] for r in rows) else None


async def _run_names(stub: Any, names: list[str]) -> bool:
    return [r["name"] for r in await stub.runs()] == names


# -- regressions: fire-and-forget, stale scans, cancellation, bounded scans ----------------------


class HandOffAgent(FiberAgent):
    """Fire-and-forget fibers that never start before the test crashes the object."""

    async def on_fiber_recovered(self, ctx: FiberRecoveryContext) -> None:
        await super().on_fiber_recovered(ctx)
        if ctx.name == "hand-off":
            # The SDK's recovery hand-off: a new fiber takes over; the old row is deleted as
            # soon as this hook returns, in the same turn.
            wait_until(self.ctx, self.run_fiber("resumed", _wait_forever))
            names = sorted(r["name"] for r in self.sql("SELECT name FROM cf_agents_runs"))
            self.sql(
                "INSERT INTO recovered_log VALUES ('', 'rows-at-hand-off', ?, 0, ?, 0)",
                json.dumps(names),
                Date.now(),
            )

    async def start_and_return(self, fiber: str) -> list[str]:
        wait_until(self.ctx, self.run_fiber(fiber, _wait_forever))
        return [r["name"] for r in self.sql("SELECT name FROM cf_agents_runs")]


async def _wait_forever(ctx: FiberContext) -> None:
    await asyncio.Event().wait()
