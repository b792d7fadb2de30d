"""Fixtures for end-to-end tests: real ``doemu dev`` processes on free ports."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .harness import DevServer

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
