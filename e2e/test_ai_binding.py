"""Workers AI through a real ``doemu dev`` (e2e/apps/ai_app): ``env.AI.run`` from a Worker.

The endpoint is the fake providers' server in the test process, named in the project's
``pyproject.toml`` (``[tool.doemu.ai]``) with its key in ``.dev.vars``, as a user configures a
local model server. Streamed answers reach the HTTP client as Workers AI's server-sent events.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from doemu.testing.fake_providers.embeddings import embedding

APP = Path(__file__).resolve().parent / "apps" / "ai_app"
SECRET = "sk-e2e-do-not-print-7731"


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(api_key=SECRET) as server:
        yield server


def _project(tmp_path: Path, llm: FakeLLM | None) -> Path:
    project = tmp_path / "app"
    shutil.copytree(APP, project, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    if llm is not None:
        (project / "pyproject.toml").write_text(
            f'[tool.doemu.ai]\nbase_url = "{llm.url}/v1"\n'
            '[tool.doemu.ai.models]\n"@cf/meta/llama-3.1-8b-instruct" = "local-llama"\n'
            '"@cf/baai/bge-base-en-v1.5" = "local-embed"\n'
        )
        (project / ".dev.vars").write_text(f"DOEMU_AI_API_KEY={SECRET}\n")
    return project


def _post(http: httpx.Client, path: str, body: dict[str, Any]) -> httpx.Response:
    return http.post(path, content=json.dumps(body))


def test_a_worker_runs_text_streams_embeddings_and_tool_calls_through_env_ai(
    dev_server: Any, tmp_path: Path, llm: FakeLLM
) -> None:
    llm.script(
        Reply(Text("Hello ", "world")),
        Reply(Text("one ", "two ", "three")),
        Reply(ToolUse("getWeather", {"city": "London"}, id="call_w")),
        Reply(fail=(503, "the model is loading")),
    )
    server = dev_server(_project(tmp_path, llm))
    with httpx.Client(base_url=server.url, timeout=30) as http:
        text = _post(http, "/text", {"prompt": "greet"})
        assert text.status_code == 200, text.text
        assert text.json()["response"] == "Hello world"
        assert text.json()["usage"]["completion_tokens"] == 2

        with http.stream("POST", "/stream", content=json.dumps({"prompt": "count"})) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            body = "".join(stream.iter_text())
        events = [b.removeprefix("data: ") for b in body.strip().split("\n\n")]
        assert events[-1] == "[DONE]"
        assert [json.loads(e)["response"] for e in events[:3]] == ["one ", "two ", "three"]
        assert json.loads(events[-2])["usage"]["completion_tokens"] == 3

        tool = _post(http, "/tool", {"prompt": "weather in london?"})
        assert tool.json() == {"tool_calls": [{"name": "getWeather",
                                               "arguments": {"city": "London"}}]}  # fmt: skip

        embed = _post(http, "/embed", {"text": ["a", "b"]})
        assert embed.json() == {"shape": [2, 8], "data": [embedding("a"), embedding("b")]}

        refused = _post(http, "/text", {"prompt": "again"})
        assert refused.status_code == 502
        error = refused.json()
        assert error["name"] == "InferenceUpstreamError"
        assert error["message"].startswith("503: the model is loading")
        assert "@cf/meta/llama-3.1-8b-instruct" in error["message"] and llm.url in error["message"]
        assert _post(http, "/text", {"prompt": "still there?"}).json()["response"] == "ok"
    sent = llm.requests("chat")
    assert [r["model"] for r in sent] == ["local-llama"] * 5
    assert sent[1]["stream"] is True
    assert llm.stats.generations[0].headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in server.output  # the banner names the secret, never its value


def test_without_an_endpoint_the_worker_is_told_how_to_configure_one(
    dev_server: Any, tmp_path: Path
) -> None:
    server = dev_server(_project(tmp_path, None))
    with httpx.Client(base_url=server.url, timeout=30) as http:
        answer = _post(http, "/text", {"prompt": "hi"})
        assert answer.status_code == 502
        error = answer.json()
        assert error["name"] == "AiInternalError"
        for words in ("cannot run locally", "[tool.doemu.ai]", "base_url", "pyproject.toml",
                      "DOEMU_AI_API_KEY"):  # fmt: skip
            assert words in error["message"]
        raw = http.get("/raw")  # not caught by the Worker: a 500, and the server goes on
        assert raw.status_code == 500
        assert "Traceback" not in raw.text and "httpx" not in raw.text
        assert _post(http, "/text", {"prompt": "hi"}).status_code == 502
        listed = http.get("/__doemu/api/bindings").json()
    (ai,) = [b for b in listed if b["type"] == "ai"]
    assert ai["binding"] == "AI" and ai["configured"] is False
