"""The WebSocket delivery tests' fixtures: fresh handler state, both protocols, the runtime.

Every server test runs twice: with uvicorn's default WebSocket protocol and with doemu's
(``uvicorn_ws_protocol``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doemu.runtime import ClassSpec, Runtime
from doemu.sockets.protocol import uvicorn_ws_protocol

from .app import GATES, LOG, PROBE, Chat


@pytest.fixture(autouse=True)
def _fresh_state() -> Iterator[None]:
    LOG.clear()
    GATES.clear()
    PROBE.clear()
    yield
    GATES.clear()


@pytest.fixture(params=["uvicorn", "doemu"])
def ws_protocol(request: pytest.FixtureRequest) -> Any:
    return "auto" if request.param == "uvicorn" else uvicorn_ws_protocol()


@pytest.fixture
def runtime(tmp_path: Path) -> Runtime:
    return Runtime(
        worker_name="ws-delivery",
        classes={"Chat": ClassSpec(Chat)},
        bindings={"CHAT": "Chat"},
        persist_dir=tmp_path / "state",
    )
