"""The pytest plugin's fixtures: a harness on a manual clock, one built from a real project config,
and harnesses a test left open being closed after it (inner pytest sessions run by pytester)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from workers import DurableObject

from doemu.clock import ManualClock
from doemu.testing.plugin import HarnessFactory

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
    doemu_harness: HarnessFactory, doemu_clock: ManualClock
) -> None:
    async with doemu_harness({"PINGER": Pinger}) as h:
        assert h.clock is doemu_clock
        stub = h.env.PINGER.getByName("p")
        assert await stub.ping() == "pong"
        await h.advance(0)
        assert await stub.alarmed() is True


async def test_harness_from_a_project_config(doemu_harness: HarnessFactory) -> None:
    async with doemu_harness(config=COUNTER_CONFIG) as h:
        assert h.env.GREETING == "hello from the counter example"
        response = await h.env.COUNTER.getByName("cfg").fetch(
            "http://local/COUNTER/cfg/incr", method="POST"
        )
        assert await response.json() == {"value": 1}
        assert h.runtime.namespace("COUNTER").unique_key == "counter-example-Counter"


# -- harnesses left open are closed: inner pytest sessions, in this process -----------------------

# doemu is imported already, so the inner session cannot rewrite its asserts: not a problem here.
INNER = ("-W", "ignore::pytest.PytestAssertRewriteWarning")

KEEPER = """
import asyncio

import pytest
from workers import DurableObject

LEFT = []


class Keeper(DurableObject):
    async def put(self, value):
        await self.ctx.storage.put("v", value)
"""

ASYNC_TESTS = """
async def test_fails_with_its_harness_open(doemu_harness):
    h = await doemu_harness({"KEEPER": Keeper})
    LEFT.append(h)
    await h.env.KEEPER.getByName("k").put(1)
    assert h.is_open and h.live_ids("KEEPER")
    raise AssertionError("failed before closing the harness")


async def test_the_next_test_finds_it_closed():
    (h,) = LEFT
    assert not h.is_open and h.runtime.closed
    assert h.live_ids("KEEPER") == []  # every object was evicted, its storage closed
"""


@pytest.mark.parametrize("loop_scope", ["function", "module"])
def test_a_harness_left_open_by_a_failing_async_test_is_closed(
    pytester: pytest.Pytester, loop_scope: str
) -> None:
    """With pytest-asyncio, a harness the test started with ``await doemu_harness(...)`` and
    never closed is closed before the next test runs, although the test failed: when its loop
    shuts down (function scope) or at the fixture's teardown (a loop that outlives the test)."""
    mark = f'pytestmark = pytest.mark.asyncio(loop_scope="{loop_scope}")\n'
    pytester.makepyfile(KEEPER + mark + ASYNC_TESTS)
    result = pytester.runpytest(*INNER, "-o", "asyncio_default_fixture_loop_scope=function")
    result.assert_outcomes(passed=1, failed=1, warnings=0)  # no "could not close" either
    result.stdout.fnmatch_lines(["*AssertionError: failed before closing the harness*"])


def test_a_harness_left_open_in_asyncio_run_is_closed_without_pytest_asyncio(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fixtures are synchronous: without pytest-asyncio (plugin autoloading off, the doemu
    plugin enabled by ``-p``), a plain test drives harnesses with ``asyncio.run``; ``async with``
    closes one, and one left open closes with the loop although the test failed."""
    pytester.makepyfile(
        KEEPER
        + """
def test_fails_with_its_harness_open(doemu_harness):
    async def main():
        async with doemu_harness({"KEEPER": Keeper}) as scoped:
            await scoped.env.KEEPER.getByName("s").put(1)
        assert not scoped.is_open
        h = await doemu_harness({"KEEPER": Keeper})
        LEFT.append(h)
        await h.env.KEEPER.getByName("k").put(2)
        raise AssertionError("failed before closing the harness")

    asyncio.run(main())


def test_the_next_test_finds_it_closed(pytestconfig):
    (h,) = LEFT
    assert not h.is_open and h.live_ids("KEEPER") == []
    assert not pytestconfig.pluginmanager.has_plugin("asyncio")
"""
    )
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest(*INNER, "-p", "doemu.testing.plugin")
    result.assert_outcomes(passed=1, failed=1, warnings=0)
    result.stdout.fnmatch_lines(["*AssertionError: failed before closing the harness*"])


async def test_doemu_harness_wants_classes_or_a_config(doemu_harness: HarnessFactory) -> None:
    expected = "doemu_harness() expected either classes ({binding: class}) or config=PATH, got "
    with pytest.raises(TypeError, match=re.escape(expected + "neither")):
        doemu_harness()
    with pytest.raises(TypeError, match=re.escape(expected + "both")):
        doemu_harness({"PINGER": Pinger}, config=COUNTER_CONFIG)
    assert doemu_harness.made == []
