"""keep_alive(): reference counting, the heartbeat on the shared alarm, and schedules restored.

The keep-alive heartbeat and schedules share the object's single alarm: while a reference is held
the alarm is ``now + keep_alive_interval_ms`` (or an earlier schedule), and after the last release
it goes back to the earliest schedule, or is deleted when nothing is pending.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from js import Date

from agents import Agent, AgentOptions, KeepAlive
from doemu.clock import ManualClock
from doemu.testing.plugin import HarnessFactory

START_MS = 1_700_000_000_000
INTERVAL = 2_000


class Holder(Agent):
    options = AgentOptions(keep_alive_interval_ms=INTERVAL)

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.held: list[KeepAlive] = []

    async def noop(self, payload: Any = None) -> None:
        pass

    async def take(self) -> int:
        self.held.append(self.keep_alive())
        return self.keep_alive_refs

    async def release(self, index: int) -> int:
        self.held[index]()
        return self.keep_alive_refs

    async def refs(self) -> int:
        return self.keep_alive_refs

    async def alarm_at(self) -> Any:
        return await self.ctx.storage.getAlarm()

    async def add(self, seconds: float) -> str:
        return (await self.schedule(seconds, "noop")).id

    async def schedule_count(self) -> int:
        return len(self.get_schedules())

    async def with_block(self) -> dict[str, Any]:
        async with self.keep_alive() as handle:
            inside = {"refs": self.keep_alive_refs, "alarm": await self.ctx.storage.getAlarm()}
        return {
            **inside,
            "released": handle.released,
            "refs_after": self.keep_alive_refs,
            "alarm_after": await self.ctx.storage.getAlarm(),
        }

    async def while_ok(self) -> dict[str, Any]:
        seen: dict[str, Any] = {}

        async def work() -> str:
            seen["refs"] = self.keep_alive_refs
            seen["alarm"] = await self.ctx.storage.getAlarm()
            return "done"

        result = await self.keep_alive_while(work)
        return {**seen, "result": result, "refs_after": self.keep_alive_refs}

    async def while_raises(self) -> dict[str, Any]:
        async def work() -> None:
            raise ValueError("inside")

        try:
            await self.keep_alive_while(work)
        except ValueError as exc:
            error = str(exc)
        return {
            "error": error,
            "refs_after": self.keep_alive_refs,
            "alarm_after": await self.ctx.storage.getAlarm(),
        }

    async def now(self) -> int:
        return Date.now()


@pytest.fixture
async def held(doemu_harness: HarnessFactory, unique_name: Callable[[str], str]) -> Any:
    h = await doemu_harness({"HOLD": Holder}, clock=ManualClock(START_MS))
    name = unique_name("hold")
    return h, h.env.HOLD.getByName(name), name


async def test_refs_never_go_negative_and_the_alarm_clears_after_the_last_release(
    held: Any,
) -> None:
    _h, stub, _name = held
    assert await stub.take() == 1
    assert await stub.take() == 2
    assert await stub.alarm_at() == START_MS + INTERVAL
    assert await stub.release(0) == 1
    assert await stub.release(0) == 1  # the same disposer twice: no effect
    assert await stub.alarm_at() == START_MS + INTERVAL  # one reference still held
    assert await stub.release(1) == 0
    assert await stub.alarm_at() is None
    assert await stub.release(1) == 0  # dispose after dispose
    assert await stub.release(0) == 0
    assert await stub.refs() == 0
    assert await stub.take() == 1  # a fresh reference works as the first one did
    assert await stub.alarm_at() == START_MS + INTERVAL


async def test_heartbeats_keep_rearming_while_held(held: Any) -> None:
    h, stub, name = held
    await stub.take()
    for beat in range(1, 6):
        await h.advance(INTERVAL)
        assert await stub.alarm_at() == START_MS + INTERVAL * (beat + 1)
    assert await stub.schedule_count() == 0  # the heartbeat writes no schedule rows
    await stub.release(0)
    assert await stub.alarm_at() is None
    assert h.is_live("HOLD", name)


async def test_held_reference_prevents_idle_eviction(held: Any) -> None:
    h, stub, name = held
    await stub.take()
    await h.advance(300_000)  # far beyond the 70-140 s idle window
    assert h.is_live("HOLD", name)
    assert await stub.refs() == 1  # the same instance: the in-memory count survived


async def test_a_real_schedule_is_restored_after_a_keep_alive_ends(held: Any) -> None:
    h, stub, _name = held
    await stub.add(600)
    schedule_at = START_MS + 600_000
    assert await stub.alarm_at() == schedule_at
    await stub.take()
    assert await stub.alarm_at() == START_MS + INTERVAL  # the heartbeat is earlier
    await h.advance(INTERVAL)
    assert await stub.alarm_at() == START_MS + 2 * INTERVAL  # heartbeat moved on
    await stub.release(0)
    assert await stub.alarm_at() == schedule_at  # back to the schedule, not lost
    assert await stub.schedule_count() == 1


async def test_an_earlier_schedule_wins_over_the_heartbeat(held: Any) -> None:
    _h, stub, _name = held
    await stub.take()
    await stub.add(1)
    assert await stub.alarm_at() == START_MS + 1_000


async def test_async_with_keep_alive_releases_on_exit(held: Any) -> None:
    _h, stub, _name = held
    seen = await stub.with_block()
    assert seen == {
        "refs": 1,
        "alarm": START_MS + INTERVAL,
        "released": True,
        "refs_after": 0,
        "alarm_after": None,
    }


async def test_keep_alive_while_holds_during_fn_and_releases_after(held: Any) -> None:
    _h, stub, _name = held
    assert await stub.while_ok() == {
        "refs": 1,
        "alarm": START_MS + INTERVAL,
        "result": "done",
        "refs_after": 0,
    }
    assert await stub.while_raises() == {"error": "inside", "refs_after": 0, "alarm_after": None}
