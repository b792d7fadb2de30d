"""The agent's hooks as users write them: plain ``def`` or ``async def``, and failures that say why.

The TypeScript SDK types ``onStart`` as ``void | Promise<void>``; a Python port that awaits the
result of a plain ``def on_start`` fails every activation with "object NoneType can't be used in
'await' expression" — so every request to the object errors. ``on_start`` may be either here, as
``on_request``/``on_connect``/``on_message``/``on_close``/``on_error`` already were; one that
raises is logged with its traceback, and ``on_error``'s default log line names its context only
when there is one (it used to end with a stray `` (None)``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from agents import Agent
from doemu.testing.plugin import HarnessFactory

STARTED: list[str] = []


class SyncStart(Agent):
    def on_start(self) -> None:  # type: ignore[override]  # a plain def, as users write it
        STARTED.append(self.name)

    async def ping(self) -> str:
        return "pong"

    def on_request(self, request: Any) -> Any:
        from workers import Response

        return Response("sync request hook")


class FailingStart(Agent):
    async def on_start(self) -> None:
        raise RuntimeError("the config bucket is missing")

    async def ping(self) -> str:
        return "pong"


class Reporting(Agent):
    async def report(self, with_context: bool) -> None:
        error = ValueError("bad payload")
        await self.on_error(error, {"schedule": "tick"} if with_context else None)


async def test_a_plain_def_on_start_runs_and_the_object_serves(
    doemu_harness: HarnessFactory, unique_name: Callable[[str], str]
) -> None:
    h = await doemu_harness({"SYNC": SyncStart})
    name = unique_name("sync-start")
    stub = h.env.SYNC.getByName(name)
    assert await stub.ping() == "pong"
    response = await stub.fetch(f"http://doemu/agents/sync/{name}")
    assert (response.status, await response.text()) == (200, "sync request hook")
    assert STARTED.count(name) == 1


async def test_a_failing_on_start_is_logged_with_its_traceback(
    doemu_harness: HarnessFactory,
    unique_name: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = await doemu_harness({"FAILING": FailingStart})
    name = unique_name("failing-start")
    with caplog.at_level(logging.ERROR, logger="agents"), pytest.raises(Exception, match="bucket"):
        await h.env.FAILING.getByName(name).ping()
    (record,) = [r for r in caplog.records if "on_start failed" in r.getMessage()]
    assert name in record.getMessage()
    assert record.exc_info is not None and "config bucket" in str(record.exc_info[1])


async def test_on_error_names_a_context_only_when_there_is_one(
    doemu_harness: HarnessFactory,
    unique_name: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = await doemu_harness({"REPORTING": Reporting})
    stub = h.env.REPORTING.getByName(unique_name("reporting"))
    with caplog.at_level(logging.ERROR, logger="agents"):
        await stub.report(False)
        await stub.report(True)
    lines = [r.getMessage() for r in caplog.records if "bad payload" in r.getMessage()]
    assert len(lines) == 2
    assert lines[0].endswith("bad payload") and "None" not in lines[0]
    assert lines[1].endswith("bad payload ({'schedule': 'tick'})")
