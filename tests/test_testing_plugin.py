"""The pytest plugin's fixtures, and a harness built from a real project config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workers import DurableObject

from doemu.clock import ManualClock

COUNTER_CONFIG = Path(__file__).resolve().parent.parent / "examples" / "counter" / "wrangler.toml"


class Pinger(DurableObject):
    async def ping(self) -> str:
        await self.ctx.storage.setAlarm(1)  # in the past: clamped to "now", due at once
        return "pong"

    async def alarm(self) -> None:
        await self.ctx.storage.put("alarmed", True)

    async def alarmed(self) -> bool:
        return bool(await self.ctx.storage.get("alarmed"))


async def test_fixtures_give_a_harness_on_a_manual_clock(
    doemu_harness: Any, doemu_clock: ManualClock
) -> None:
    async with doemu_harness({"PINGER": Pinger}) as h:
        assert h.clock is doemu_clock
        stub = h.env.PINGER.getByName("p")
        assert await stub.ping() == "pong"
        await h.advance(0)
        assert await stub.alarmed() is True


async def test_harness_from_a_project_config(doemu_harness: Any, tmp_path: Path) -> None:
    async with doemu_harness(config=COUNTER_CONFIG) as h:
        assert h.env.GREETING == "hello from the counter example"
        response = await h.env.COUNTER.getByName("cfg").fetch(
            "http://local/COUNTER/cfg/incr", method="POST"
        )
        assert await response.json() == {"value": 1}
        assert h.runtime.namespace("COUNTER").unique_key == "counter-example-Counter"
