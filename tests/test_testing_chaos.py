"""Chaos mode: every event on a fresh instance, seeded resets at awaits, and the pytest options.

Without chaos the harness must be exactly what it was (a plain ``Runtime``, no hook set, the
loop's task factory untouched); with it, state kept in memory between events is lost, work under
``waitUntil`` still finishes, a reset drops the turn's writes, and a seed replays the same resets.
The last test runs ``examples/chaos`` in a pytest subprocess, with and without chaos.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyodide.ffi import create_proxy
from workers import DurableObject

from doemu.errors import ObjectResetError
from doemu.runtime import Runtime
from doemu.testing import WorkerHarness
from doemu.testing.chaos import ChaosRuntime, ChaosSettings
from doemu.testing.plugin import HarnessFactory

#: What ``Tally.later``'s background work waits for (RPC arguments are cloned: no Event there);
#: made by the test, on its own loop.
GATES: dict[str, asyncio.Event] = {}
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "chaos"


class Tally(DurableObject):
    """Counts in storage, and (wrongly) in memory too: chaos tells the two apart."""

    constructed = 0

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        type(self).constructed += 1
        self.in_memory = 0

    async def add(self) -> dict[str, int]:
        self.in_memory += 1
        stored = (await self.ctx.storage.get("n") or 0) + 1
        await self.ctx.storage.put("n", stored)
        return {"stored": stored, "in_memory": self.in_memory}

    async def add_slowly(self) -> None:
        await self.ctx.storage.put("slow", "written")
        await asyncio.sleep(0)  # chaos at p=1 resets here: the put above is dropped
        await self.ctx.storage.put("slow", "finished")

    async def read(self, key: str) -> Any:
        return await self.ctx.storage.get(key)

    async def later(self) -> None:
        async def work() -> None:
            await GATES["later"].wait()
            await self.ctx.storage.put("later", "done")

        self.ctx.waitUntil(create_proxy(work()))


def _harness(tmp_path: Path, chaos: ChaosSettings | None) -> WorkerHarness:
    return WorkerHarness({"TALLY": Tally}, persist_dir=tmp_path / "state", chaos=chaos)


async def test_without_chaos_the_harness_is_unchanged(tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()
    factory = loop.get_task_factory()
    async with _harness(tmp_path, None) as h:
        assert type(h.runtime) is Runtime  # not a subclass: nothing of chaos runs
        stub = h.env.TALLY.getByName("a")
        assert await stub.add() == {"stored": 1, "in_memory": 1}
        assert await stub.add() == {"stored": 2, "in_memory": 2}  # the same instance
        assert h.is_live("TALLY", "a")
        assert h.runtime.host("TALLY", "a").interpose is None
        assert loop.get_task_factory() is factory
        assert h.chaos_stats.evictions == h.chaos_stats.resets == 0


async def test_chaos_evicts_after_every_event_so_only_storage_survives(tmp_path: Path) -> None:
    before = Tally.constructed
    async with _harness(tmp_path, ChaosSettings()) as h:
        assert isinstance(h.runtime, ChaosRuntime)
        stub = h.env.TALLY.getByName("a")
        assert await stub.add() == {"stored": 1, "in_memory": 1}
        assert not h.is_live("TALLY", "a")  # evicted as soon as the event ended
        assert await stub.add() == {"stored": 2, "in_memory": 1}  # memory is gone, storage not
        assert Tally.constructed - before == 2
        assert h.chaos_stats.evictions == 2
        await h.restart()  # the chaos runtime is rebuilt by a restart too
        assert isinstance(h.runtime, ChaosRuntime)
        assert (await h.env.TALLY.getByName("a").add())["stored"] == 3


async def test_chaos_eviction_waits_for_wait_until_work(tmp_path: Path) -> None:
    GATES["later"] = asyncio.Event()
    async with _harness(tmp_path, ChaosSettings()) as h:
        stub = h.env.TALLY.getByName("w")
        await stub.later()
        assert h.is_live("TALLY", "w")  # graceful: waitUntil work keeps it in memory
        GATES["later"].set()
        for _ in range(100):  # a few loop turns, bounded: no sleeping "long enough"
            if not h.is_live("TALLY", "w"):
                break
            await asyncio.sleep(0)
        assert not h.is_live("TALLY", "w")
        assert await stub.read("later") == "done"


async def test_a_reset_at_an_await_drops_the_turns_writes(tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()
    factory = loop.get_task_factory()
    async with _harness(tmp_path, ChaosSettings(reset_probability=1.0, seed=5)) as h:
        stub = h.env.TALLY.getByName("r")
        with pytest.raises(ObjectResetError, match=r"doemu chaos: reset at an await \(seed 5\)"):
            await stub.add_slowly()
        assert h.chaos_stats.resets == 1
        assert h.chaos_stats.log == ["TALLY/r: reset at await #1"]
        assert await stub.read("slow") is None  # the put before the await never committed
        assert loop.get_task_factory() is not factory  # wraps tasks started inside objects
    assert loop.get_task_factory() is factory  # ... and is gone with the runtime


async def test_a_seed_replays_the_same_resets(tmp_path: Path) -> None:
    async def run(seed: int, where: str) -> list[str]:
        chaos = ChaosSettings(reset_probability=0.3, seed=seed)
        h = WorkerHarness({"TALLY": Tally}, persist_dir=tmp_path / where, chaos=chaos)
        async with h:
            stub = h.env.TALLY.getByName("s")
            for _ in range(30):
                try:
                    await stub.add_slowly()
                except ObjectResetError:
                    pass
            return h.chaos_stats.log

    first = await run(11, "one")
    assert first and first == await run(11, "two")
    assert first != await run(12, "three")


def test_settings_refuse_a_probability_outside_0_1() -> None:
    with pytest.raises(ValueError, match="within \\[0, 1\\]"):
        ChaosSettings(reset_probability=1.5)
    assert ChaosSettings(0.25, 9).replay_options() == (
        "--doemu-chaos --doemu-chaos-reset=0.25 --doemu-chaos-seed=9"
    )


# -- the pytest options, in inner sessions ------------------------------------------------------

INNER = ("-W", "ignore::pytest.PytestAssertRewriteWarning", "-p", "no:asyncio")

INNER_TESTS = """
from workers import DurableObject
from doemu.testing.chaos import ChaosRuntime


class Box(DurableObject):
    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        self.seen = 0

    async def touch(self):
        self.seen += 1
        return self.seen


async def test_memory_survives_between_events(doemu_harness):
    h = await doemu_harness({"BOX": Box})
    box = h.env.BOX.getByName("b")
    await box.touch()
    assert await box.touch() == 2
"""


def test_the_option_turns_chaos_on_and_a_failure_names_the_seed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(INNER_TESTS)
    plain = pytester.runpytest(*INNER)
    plain.assert_outcomes(passed=1)
    assert "doemu chaos" not in plain.stdout.str()

    chaos = pytester.runpytest(*INNER, "--doemu-chaos", "--doemu-chaos-seed=42")
    chaos.assert_outcomes(failed=1)
    chaos.stdout.fnmatch_lines(
        [
            "*- doemu chaos -*",
            "evict after every event, seed 42: 2 evictions, 0 resets",
            "replay: pytest '*test_memory_survives_between_events' --doemu-chaos "
            "--doemu-chaos-seed=42",
            "doemu chaos: evict after every event, seed 42 (replay: *)",
        ]
    )


def test_the_environment_and_ini_turn_chaos_on(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(INNER_TESTS)
    monkeypatch.setenv("DOEMU_CHAOS_RESET", "0.5")
    result = pytester.runpytest(*INNER, "-o", "doemu_chaos_seed=7")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["doemu chaos: * p=0.5, seed 7 (replay: *)"])
    monkeypatch.delenv("DOEMU_CHAOS_RESET")
    result = pytester.runpytest(*INNER, "-o", "doemu_chaos=true")
    result.assert_outcomes(failed=1)
    seed = re.search(r"doemu chaos: evict after every event, seed (\d+)", result.stdout.str())
    assert seed is not None  # no seed given: a random one, printed to replay the failure


def test_a_bad_probability_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(INNER_TESTS)
    result = pytester.runpytest(*INNER, "--doemu-chaos-reset=often")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*doemu chaos: could not convert string to float: 'often'*"])


# -- the example: recovery code that chaos proves (or disproves) ----------------------------------


def _run_example(*options: str) -> dict[str, str]:
    """Run examples/chaos's tests in a pytest subprocess; outcome per test id."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOEMU_CHAOS")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:asyncio", *options],
        cwd=EXAMPLE,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    outcomes = dict(
        (m["id"], m["outcome"])
        for m in re.finditer(r"^(?P<outcome>PASSED|FAILED) \S+\[(?P<id>\w+)\]", done.stdout, re.M)
    )
    assert len(outcomes) == 3, done.stdout + done.stderr
    return outcomes


def test_the_example_fails_without_proper_recovery_and_passes_with_it() -> None:
    assert _run_example() == {"recovering": "PASSED", "naive": "PASSED", "forgetful": "PASSED"}
    chaos = ("--doemu-chaos-reset=0.2", "--doemu-chaos-seed=1")
    assert _run_example(*chaos) == {
        "recovering": "PASSED",
        "naive": "FAILED",  # resumed from a missing checkpoint: pages imported twice
        "forgetful": "FAILED",  # no on_fiber_recovered: the import never finishes
    }


def test_factory_passes_chaos_to_each_harness_with_its_own_generator(tmp_path: Path) -> None:
    from doemu.clock import ManualClock

    chaos = ChaosSettings(0.5, 3)
    factory = HarnessFactory(tmp_path, ManualClock(), chaos=chaos, test_id="t::x")
    first, second = factory({"TALLY": Tally}), factory({"TALLY": Tally})
    assert first.chaos is second.chaos is chaos
    draws = [h._chaos_rng.random() for h in (first, second) if h._chaos_rng is not None]
    assert draws == [chaos.rng_for("t::x", 0).random(), chaos.rng_for("t::x", 1).random()]
