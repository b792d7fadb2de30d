"""What the agent-server e2e modules share: a copy of an app under a real ``doemu dev``, the
fixtures that serve ``e2e/apps/agent_server``, and a session client over its HTTP routes.

The model is the fake OpenAI Responses server (:class:`FakeLLM`) and the side-effect counter a
:class:`Counter`, both in the test process, so that they outlive a SIGKILLed server and count
from outside it. A test module uses the fixtures with
``from .agent_server_fixtures import effects as effects, llm as llm, server as server`` (all
three: ``server`` asks for the other two).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from doemu.testing.devserver import DevServer, DevServerFactory
from doemu.testing.fake_providers import FakeLLM
from tests.polling import eventually_sync

from .counter import Counter, counter

__all__ = [
    "APP",
    "ROOT",
    "Session",
    "copy_app",
    "effects",
    "llm",
    "openai_vars",
    "serve",
    "server",
    "words",
]

APP = Path(__file__).resolve().parent / "apps" / "agent_server"
ROOT = Path(__file__).resolve().parent.parent


def copy_app(app: Path, project: Path, dev_vars: str) -> Path:
    """``app`` copied to ``project`` (without its state and caches), with ``dev_vars`` as its
    ``.dev.vars``, so that a test never writes into the repository's app."""
    shutil.copytree(app, project, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    (project / ".dev.vars").write_text(dev_vars)
    return project


def openai_vars(llm: FakeLLM) -> str:
    """The ``.dev.vars`` lines that point an app's OpenAI provider at ``llm``."""
    return f"OPENAI_API_KEY=test-key\nOPENAI_BASE_URL={llm.url}/v1\n"


def serve(doemu_dev: DevServerFactory, app: Path, tmp_path: Path, dev_vars: str) -> DevServer:
    """A copy of ``app`` under ``doemu dev``, importing this repository's packages."""
    project = copy_app(app, tmp_path / "app", dev_vars)
    return doemu_dev(project, env={"PYTHONPATH": str(ROOT)})


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(api_key="test-key") as server:
        yield server


@pytest.fixture
def effects() -> Iterator[Counter]:
    with counter() as running:
        yield running


@pytest.fixture
def server(
    tmp_path: Path, doemu_dev: DevServerFactory, llm: FakeLLM, effects: Counter
) -> DevServer:
    """``e2e/apps/agent_server`` under ``doemu dev``: its model is ``llm``, its side effects
    (``notify``, ``deploy``) POST to ``effects``."""
    return serve(doemu_dev, APP, tmp_path, f"{openai_vars(llm)}COUNTER_URL={effects.url}\n")


def words(start: int, stop: int) -> list[str]:
    """The deltas of a scripted answer: ``w<start> `` … ``w<stop - 1> ``."""
    return [f"w{i} " for i in range(start, stop)]


class Session:
    """One session of an agent server, over HTTP: the routes under ``/<prefix>/<id>``."""

    def __init__(self, server: DevServer, session_id: str, prefix: str = "sessions") -> None:
        self.server, self.id, self.prefix = server, session_id, prefix

    def url(self, path: str) -> str:
        return f"{self.server.url}/{self.prefix}/{self.id}{path}"

    def call(self, path: str, body: Any = None) -> tuple[int, Any]:
        """GET without ``body``, else POST it (a string as it is, anything else as JSON):
        the status and the answer's JSON (its text when it is not JSON)."""
        content = body if isinstance(body, str) or body is None else json.dumps(body)
        response = httpx.request("GET" if body is None else "POST", self.url(path),
                                 content=content, timeout=20)  # fmt: skip
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, response.text

    def get(self, path: str) -> Any:
        status, body = self.call(path)
        assert status == 200, (path, body)
        return body

    def start(self, message: str, agent_type: str = "researcher") -> Any:
        status, body = self.call("/start", {"agentType": agent_type, "sessionId": self.id,
                                            "input": {"message": message}})  # fmt: skip
        assert status == 200, body
        return body

    def wait(self, *statuses: str, within: float = 30) -> dict[str, Any]:
        """The session's ``/status`` once it is one of ``statuses`` and no longer executing."""

        def reached() -> Any:
            current = self.get("/status")
            return current if current["status"] in statuses and not current["isExecuting"] else None

        found: dict[str, Any] = eventually_sync(
            reached, within=within, what=f"session {self.id} {statuses}"
        )
        return found

    def history(self) -> list[dict[str, Any]]:
        """The stored stream from the start: ``{"sequence", "chunk"}`` entries."""
        entries: list[dict[str, Any]] = self.get("/history?fromSequence=0&limit=1000")["chunks"]
        return entries

    def chunks(self) -> list[dict[str, Any]]:
        """The stored stream's chunks, without their sequence numbers."""
        return [entry["chunk"] for entry in self.history()]

    def deltas(self) -> str:
        """The text this session's own agent streamed (not its sub-agents')."""
        return "".join(c.get("delta", "") for c in self.chunks() if c["agentId"] == self.id)

    def sse_events(self) -> list[dict[str, Any]]:
        """The run's SSE stream from the start, to its terminal event (it closes there)."""
        with httpx.stream("GET", self.url("/sse?fromSequence=0"), timeout=20) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            return [json.loads(line[5:]) for line in response.iter_lines()
                    if line.startswith("data:")]  # fmt: skip
