"""Fixtures for end-to-end tests: real ``doemu dev`` processes on free ports; and the run's
summary line of the differential suite (e2e/differential): the seconds each target's tests took,
the workerd starts among them, or why the workerd side was skipped.

The summary is made here, from the test reports, because under pytest-xdist the tests run in
worker processes: this conftest is loaded by the process that prints the summary too (the one
of e2e/differential is not), and each report carries the workerd starts made in it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .harness import DevServer
from .targets import STARTS, TARGETS

ROOT = Path(__file__).resolve().parent.parent
COUNTER = ROOT / "examples" / "counter"


@pytest.fixture
def counter_project(tmp_path: Path) -> Path:
    """A private copy of the counter example (tests may edit its sources)."""
    target = tmp_path / "counter"
    shutil.copytree(COUNTER, target, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    return target


@pytest.fixture
def dev_server(tmp_path: Path) -> Iterator[Callable[..., DevServer]]:
    """Start ``doemu dev`` servers; every one still running is SIGKILLed after the test."""
    servers: list[DevServer] = []

    def start(project: Path, *args: str, persist: Path | None = None, **kw: Any) -> DevServer:
        server = DevServer(project, persist or tmp_path / "state", args=args, **kw)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        if server.proc is not None and server.proc.poll() is None:
            server.kill()


#: Seconds spent in each target's tests (setup, call and teardown), and their workerd starts.
_spent: dict[str, float] = dict.fromkeys(TARGETS, 0.0)
_starts: list[float] = []
_skipped: dict[str, str] = {}


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
    _starts.extend(s for key, value in report.user_properties if key == STARTS for s in value)
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
    parts = [f"{name} {_spent[name]:.1f} s" for name in TARGETS]
    if _starts:
        parts.append(f"{len(_starts)} workerd start(s), {sum(_starts):.1f} s of them")
    terminalreporter.write_line("differential suite: " + ", ".join(parts))
