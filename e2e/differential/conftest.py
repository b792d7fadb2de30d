"""Fixtures of the differential suite: every test runs on ``doemu`` and on ``workerd``.

* ``target`` — module-scoped, parametrized with ids ``doemu`` and ``workerd``; the workerd
  side skips with the reason when pyworkerd cannot be prepared (and fails instead with
  ``DOEMU_E2E_REQUIRE_WORKERD=1``);
* ``serve`` — module-scoped: ``serve(example_dir, vendor=..., vars=...)`` copies the project and
  starts it on the module's target. Starting workerd costs 5-15 s (Pyodide loads), so a module
  starts each project once per target and its tests share it, with unique object names; every
  server is SIGKILLed when the module's tests are done.
* :func:`running` — for tests that kill and restart the shared server: revives one a failed
  test left dead, so one failure does not cascade.

The run ends with a line saying how long the workerd side took, or why it was skipped (printed
by e2e/conftest.py, from the reports: each carries the workerd starts made in it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ..targets import (
    STARTS,
    TARGETS,
    TargetServer,
    copy_project,
    pyworkerd_or_skip,
    start_server,
    timings,
)

#: How many of ``timings["workerd"]`` a report carried already.
_reported = [0]


@pytest.fixture(scope="module", params=TARGETS)
def target(request: pytest.FixtureRequest) -> str:
    """``doemu`` or ``workerd``: the runtime this module's tests run on."""
    name: str = request.param
    if name == "workerd":
        pyworkerd_or_skip()
    return name


@pytest.fixture(scope="module")
def serve(
    target: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., TargetServer]]:
    """Start a copy of a project on the module's target; all are killed after the module."""
    started: list[TargetServer] = []

    def start(
        source: Path, *, vendor: Sequence[str] = (), vars: dict[str, str] | None = None
    ) -> TargetServer:
        base = tmp_path_factory.mktemp(f"{target}-{source.name}")
        project = copy_project(source, base / source.name)
        server = start_server(target, project, base / "state", vendor=vendor, vars=vars)
        started.append(server)
        return server

    yield start
    for server in started:
        if server.running:
            server.kill()


def running(server: TargetServer) -> TargetServer:
    """``server``, started again (same state, same port) if an earlier test left it dead."""
    if not server.running:
        server.restart()
    return server


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Each report carries the workerd starts made in its phase (``STARTS``), for the run's
    summary line in e2e/conftest.py: under pytest-xdist the servers start in the workers, and
    only the reports reach the process that prints it."""
    report = yield
    starts = timings["workerd"]
    if len(starts) > _reported[0]:
        report.user_properties.append((STARTS, starts[_reported[0] :]))
        _reported[0] = len(starts)
    return report
