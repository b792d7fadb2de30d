"""No configured secret reaches a log line of a real ``doemu dev`` serving the agent server.

1. The agent-server app is served with secrets from each source a developer uses: ``--var``
   (the model's API key, a webhook secret), ``.dev.vars`` (a service token) and ``[vars]``
   (a database password) — and one plain ``--var`` that may be shown.
2. A session runs with a server tool, a sub-agent and the model (which needs the key), then a
   request the server refuses, with ``--log-level debug`` so every logger speaks.
3. The whole output — banner, request log, agent logs — holds none of the secret values, while
   the plain value and every variable's name are shown.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from doemu.testing.devserver import DevServerFactory
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from tests.polling import eventually_sync

from .agent_server_fixtures import APP, ROOT, copy_app

KEY = f"sk-live-{secrets.token_hex(12)}"


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(api_key=KEY) as server:
        yield server


def test_no_configured_secret_appears_in_any_log_line(
    tmp_path: Path, doemu_dev: DevServerFactory, llm: FakeLLM
) -> None:
    values = {
        "OPENAI_API_KEY": KEY,
        "WEBHOOK_SECRET": f"whsec-{secrets.token_hex(8)}",
        "SERVICE_TOKEN": f"tok-{secrets.token_hex(8)}",
        "DB_PASSWORD": f"pw-{secrets.token_hex(8)}",
    }
    dev_vars = f"OPENAI_BASE_URL={llm.url}/v1\nSERVICE_TOKEN={values['SERVICE_TOKEN']}\n"
    project = copy_app(APP, tmp_path / "app", dev_vars)
    config = project / "wrangler.toml"
    config.write_text(
        config.read_text().replace(
            'compatibility_flags = ["python_workers"]\n',
            'compatibility_flags = ["python_workers"]\n\n'
            f'[vars]\nDB_PASSWORD = "{values["DB_PASSWORD"]}"\n',
        )
    )
    args = [
        "--var", f"OPENAI_API_KEY:{values['OPENAI_API_KEY']}",
        "--var", f"WEBHOOK_SECRET:{values['WEBHOOK_SECRET']}",
        "--var", "PLAIN_SETTING:shown-on-purpose",
        "--log-level", "debug",
    ]  # fmt: skip
    server = doemu_dev(project, args=args, env={"PYTHONPATH": str(ROOT)})
    llm.script(Reply(ToolUse("analyzer", {"message": "look"}, id="sub1")))
    llm.script(Reply(Text("child ", "says")))
    llm.script(Reply(Text("all ", "done")))
    base = f"{server.url}/sessions/sec"
    started = httpx.post(f"{base}/start", timeout=20, json={
        "agentType": "researcher", "sessionId": "sec", "input": {"message": "go"}})  # fmt: skip
    assert started.status_code == 200, started.text

    def completed() -> bool:
        return bool(httpx.get(f"{base}/status", timeout=20).json()["status"] == "completed")

    eventually_sync(completed, within=30, what="the session completed")
    assert llm.stats.requests["responses.create"] == 3  # the key was used, and accepted
    refused = httpx.post(f"{base}/start", content="{not json", timeout=20)
    assert refused.status_code == 400
    output = server.output
    leaked = sorted(name for name, value in values.items() if value in output)
    assert leaked == [], f"secret values printed: {leaked}"
    for name in values:
        assert f"{name} = (hidden)" in output, name  # listed by name, value hidden
    assert "PLAIN_SETTING = 'shown-on-purpose'" in output
