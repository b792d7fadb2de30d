"""Structured output (issue 32, item 4) on doemu and on workerd: ``e2e/apps/structured_output``
unchanged (its validator, ``fastjsonschema``, vendored as pywrangler would), its model the fake
OpenAI Responses API in this process. A corrected answer is the run's output; a model that never
complies fails naming the violation — the same answers on both targets."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from doemu.testing.fake_providers import FakeLLM, Reply, Text
from tests.polling import eventually_sync

from ..targets import AGENTS_VENDOR, ROOT, TargetServer
from .conftest import running

APP = ROOT / "e2e" / "apps" / "structured_output"
VALID = {"sentiment": "positive", "topics": ["otters"]}
INVALID = '{"sentiment": "meh", "topics": ["otters"]}'
VIOLATION = "$.sentiment must be one of ['positive', 'negative', 'neutral']"


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(api_key="test-key") as server:
        yield server


@pytest.fixture(scope="module")
def analysts(serve: Any, llm: FakeLLM) -> TargetServer:
    keys = {"OPENAI_BASE_URL": f"{llm.url}/v1", "OPENAI_API_KEY": "test-key"}
    server: TargetServer = serve(APP, vendor=AGENTS_VENDOR, vars=keys)
    return server


def _run(server: TargetServer, session_id: str, agent_type: str) -> dict[str, Any]:
    base = f"{running(server).url}/sessions/{session_id}"
    body = {"agentType": agent_type, "sessionId": session_id, "input": {"message": "otters?"}}
    answer = httpx.post(f"{base}/start", json=body, timeout=30)
    assert answer.status_code == 200, answer.text

    def ended() -> dict[str, Any] | None:
        status: dict[str, Any] = httpx.get(f"{base}/status", timeout=30).json()
        done = status["status"] in ("completed", "failed") and not status["isExecuting"]
        return status if done else None

    return eventually_sync(ended, within=60, what=f"{session_id} to end")


def test_a_corrected_answer_is_the_output(
    analysts: TargetServer, llm: FakeLLM, target: str
) -> None:
    llm.script(Reply(Text(INVALID)), Reply(Text(json.dumps(VALID))))
    status = _run(analysts, f"so-fixed-{target}", "analyst")
    assert (status["status"], status["output"], status["error"]) == ("completed", VALID, None)


def test_a_model_that_never_complies_fails_naming_the_violation(
    analysts: TargetServer, llm: FakeLLM, target: str
) -> None:
    llm.script(Reply(Text("People love otters!")), Reply(Text(INVALID)))
    status = _run(analysts, f"so-never-{target}", "terse")
    assert status["status"] == "failed" and status["output"] is None
    assert status["error"] == (
        f"output 'output' does not match its schema: {VIOLATION} — no answer matched the "
        "output schema within max_steps=2"
    )
