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

The run ends with a line saying how long the workerd side took, or why it was skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ..targets import (
    TARGETS,
    TargetServer,
    copy_project,
    pyworkerd_or_skip,
    start_server,
    timings,
)

#: Seconds spent in each target's tests (setup, call and teardown).
_spent: dict[str, float] = dict.fromkeys(TARGETS, 0.0)
_skipped: dict[str, str] = {}


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


def _target_of(nodeid: str) -> str | None:
    if "differential/" not in nodeid:
        return None
    for name in TARGETS:
        if f"[{name}" in nodeid or f"-{name}]" in nodeid or f"-{name}-" in nodeid:
            return name
    return None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    name = _target_of(report.nodeid)
    if name is None:
        return
    _spent[name] += report.duration
    if report.skipped and name == "workerd" and isinstance(report.longrepr, tuple):
        _skipped.setdefault(name, str(report.longrepr[2]))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not any(_spent.values()) and not _skipped:
        return
    if "workerd" in _skipped:
        reason = _skipped["workerd"].removeprefix("Skipped: ")
        terminalreporter.write_line(f"differential suite: workerd SKIPPED: {reason}")
        terminalreporter.write_line(f"differential suite: doemu {_spent['doemu']:.1f} s")
        return
    starts = timings["workerd"]
    parts = [f"{name} {_spent[name]:.1f} s" for name in TARGETS]
    if starts:
        parts.append(f"{len(starts)} workerd start(s), {sum(starts):.1f} s of them")
    terminalreporter.write_line("differential suite: " + ", ".join(parts))
