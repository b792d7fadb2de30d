"""Eviction: idle windows, constructor re-runs with storage intact, the live-object cap."""

from __future__ import annotations

import asyncio
import gc
import os
import resource
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from workers import DurableObject

from doemu.objects.eviction import FD_RESERVE, FDS_PER_OBJECT, live_cap
from doemu.runtime import ClassSpec, Runtime
from doemu.testing.plugin import HarnessFactory

BUILT: dict[str, int] = {}


class Keeper(DurableObject):
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        key = str(ctx.id)
        BUILT[key] = BUILT.get(key, 0) + 1
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS notes(body TEXT)")

    async def note(self, body: str) -> int:
        self.ctx.storage.sql.exec("INSERT INTO notes(body) VALUES (?)", body)
        return int(self.ctx.storage.sql.exec("SELECT count(*) AS n FROM notes").one()["n"])

    async def whoami(self) -> dict[str, Any]:
        return {"name": self.ctx.id.name, "id": str(self.ctx.id)}

    async def touch(self) -> None:
        await self.ctx.storage.put("t", 1)


async def test_idle_object_is_evicted_and_rebuilt_with_storage_intact(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"KEEPER": Keeper}, idle_timeout=(2.0, 2.0))
    stub = h.env.KEEPER.getByName("idle")
    assert await stub.note("one") == 1
    key = str(stub.id)
    assert BUILT[key] == 1
    await h.advance(1_999)
    assert h.is_live("KEEPER", "idle")
    await h.advance(1)
    assert not h.is_live("KEEPER", "idle")
    assert await stub.note("two") == 2
    assert BUILT[key] == 2


async def test_idle_window_is_drawn_from_the_range(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"KEEPER": Keeper}, idle_timeout=(70.0, 140.0))
    stub = h.env.KEEPER.getByName("range")
    await stub.touch()
    await h.advance(69_999)
    assert h.is_live("KEEPER", "range")
    await h.advance(70_001)
    assert not h.is_live("KEEPER", "range")


async def test_activity_postpones_eviction(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"KEEPER": Keeper}, idle_timeout=(2.0, 2.0))
    stub = h.env.KEEPER.getByName("busy")
    for _ in range(5):
        await stub.touch()
        await h.advance(1_500)
        assert h.is_live("KEEPER", "busy")
    await h.advance(500)
    assert not h.is_live("KEEPER", "busy")


async def test_name_survives_eviction_even_via_id_from_string(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"KEEPER": Keeper})
    named = h.env.KEEPER.getByName("has-a-name")
    await named.touch()
    await h.evict("KEEPER", "has-a-name")
    by_id = h.env.KEEPER.get(h.env.KEEPER.idFromString(str(named.id)))
    assert (await by_id.whoami())["name"] == "has-a-name"
    await h.restart()
    by_id = h.env.KEEPER.get(h.env.KEEPER.idFromString(str(named.id)))
    assert (await by_id.whoami())["name"] == "has-a-name"


async def test_live_cap_evicts_least_recently_used(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"KEEPER": Keeper}, max_live_objects=3)
    for i in range(5):
        await h.env.KEEPER.getByName(f"lru-{i}").touch()
    assert h.runtime.eviction.live_count == 3
    assert [h.is_live("KEEPER", f"lru-{i}") for i in range(5)] == [False, False, True, True, True]


class Waiter(DurableObject):
    async def wait(self, gate: Any) -> None:
        await gate.wait()

    async def touch(self) -> None:
        await self.ctx.storage.put("t", 1)


async def test_live_cap_skips_busy_objects_and_evicts_the_next_idle_one(
    doemu_harness: HarnessFactory,
) -> None:
    """1. The least recently used object is busy (an event in flight): the next idle one goes.
    2. With every other object busy, the cap is exceeded rather than anything interrupted."""
    import asyncio

    h = await doemu_harness({"WAITER": Waiter}, max_live_objects=2)
    ns = h.env.WAITER
    gate = asyncio.Event()
    busy = h.runtime.host("WAITER", "busy-0")
    waiting = asyncio.ensure_future(busy.call("rpc", lambda inst: inst.wait(gate)))
    await asyncio.sleep(0)
    await ns.getByName("idle-1").touch()
    await ns.getByName("new-2").touch()  # over the cap: busy-0 is skipped, idle-1 goes
    assert [h.is_live("WAITER", n) for n in ("busy-0", "idle-1", "new-2")] == [True, False, True]

    blocker = asyncio.Event()
    other = h.runtime.host("WAITER", "new-2")
    held = asyncio.ensure_future(other.call("rpc", lambda inst: inst.wait(blocker)))
    await asyncio.sleep(0)
    await ns.getByName("new-3").touch()  # the only other objects are busy: nobody is evicted
    assert h.runtime.eviction.live_count == 3
    gate.set()
    blocker.set()
    await asyncio.gather(waiting, held)
    await ns.getByName("new-4").touch()  # idle again: the cap holds
    assert h.runtime.eviction.live_count == 2


#: A soft open-file limit with room for the reserve and 250 live objects (4 descriptors each).
TIGHT_CAP = 250
TIGHT_LIMIT = FD_RESERVE + TIGHT_CAP * (FDS_PER_OBJECT + 1)


@pytest.fixture
def tight_fd_limit() -> Iterator[int]:
    """The soft descriptor limit lowered (or raised) to TIGHT_LIMIT for the test."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < TIGHT_LIMIT:
        pytest.skip(f"hard descriptor limit {hard} is below {TIGHT_LIMIT}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (TIGHT_LIMIT, hard))
    try:
        yield TIGHT_LIMIT
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_the_live_cap_adapts_to_a_tight_descriptor_limit(
    doemu_harness: HarnessFactory, tight_fd_limit: int
) -> None:
    """Under a limit of 2,024 descriptors the default cap (1,000 live objects, three files
    each) would run out of descriptors at about 670 objects ("unable to open database file");
    the cap adapts to the limit instead, and 1,000 objects are created and written."""
    h = await doemu_harness({"KEEPER": Keeper})
    assert h.runtime.eviction.max_live == TIGHT_CAP
    for i in range(1_000):
        await h.env.KEEPER.getByName(f"fd-{i}").touch()
        assert h.runtime.eviction.live_count <= TIGHT_CAP
    assert len(h.object_ids("KEEPER")) == 1_000
    assert len(os.listdir("/proc/self/fd")) < tight_fd_limit


def test_a_live_cap_past_the_descriptor_limit_is_lowered_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Asked to keep more objects live than the descriptors allow, the runtime would fail
    activations with "unable to open database file"; it uses the most the limit allows."""
    monkeypatch.setattr(resource, "getrlimit", lambda _which: (5_024, 5_024))
    assert live_cap(None) == 1_000
    assert live_cap(500) == 500
    assert live_cap(1_000) == 1_000  # (5,024 - 1,024 reserved) // 4 descriptors each
    assert "max live objects" not in caplog.text
    assert live_cap(20_000) == 1_000
    assert "max live objects 20000 needs more file descriptors" in caplog.text


async def test_evicted_objects_are_not_kept_in_memory_by_their_idle_deadlines(
    tmp_path: Path,
) -> None:
    """An evicted host's idle-heap entry lives until its deadline (70-140 s): without the
    heap's compaction every host evicted by the live cap stayed in memory until then. (On the
    system clock, as served: the manual clock's timers keep their contexts until advanced.)"""
    runtime = Runtime(
        worker_name="churn",
        classes={"Keeper": ClassSpec(Keeper)},
        bindings={"KEEPER": "Keeper"},
        persist_dir=tmp_path / "state",
        max_live_objects=10,
    )
    await runtime.start()
    try:
        refs = []
        for i in range(600):
            stub = runtime.env.KEEPER.getByName(f"churn-{i}")
            await stub.touch()
            refs.append(weakref.ref(runtime.namespace("KEEPER").hosts[str(stub.id)]))
        del stub
        await asyncio.sleep(0)
        gc.collect()
        alive = sum(1 for ref in refs if ref() is not None)
        assert runtime.eviction.live_count == 10
        # the live ones, plus those evicted since the last compaction (at most half the heap)
        assert alive < 300, f"{alive} of 600 hosts still in memory with 10 live"
    finally:
        await runtime.close()
