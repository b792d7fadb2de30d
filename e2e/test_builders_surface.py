"""Issue 32's builders' features under a real ``doemu dev``, with real SIGKILLs where durability
is the point: MCP connections restored after a kill, a scheduled ``destroy()`` finished after a
kill, a Think session whose compaction was killed mid-summary and finished after the restart,
``on_start(props)`` from routing, and the projects ``doemu init --template`` writes.

The MCP server is the official ``mcp`` SDK's (tests/mcp_server.py), the model doemu's fake
OpenAI chat-completions server; both run in this test process, on loopback.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from doemu.testing.devserver import DevServer, DevServerFactory
from doemu.testing.fake_providers import FakeLLM, Reply, Text
from tests.mcp_server import McpTestServer
from tests.polling import eventually_sync

ROOT = Path(__file__).resolve().parent.parent
APP = Path(__file__).parent / "apps" / "builders"
BIN = Path(sys.executable).parent


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(api_key="test-key") as server:
        yield server


@pytest.fixture
def server(tmp_path: Path, doemu_dev: DevServerFactory, llm: FakeLLM) -> DevServer:
    project = tmp_path / "app"
    shutil.copytree(APP, project, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    (project / ".dev.vars").write_text(f"OPENAI_API_KEY=test-key\nOPENAI_BASE_URL={llm.url}/v1\n")
    return doemu_dev(project, env={"PYTHONPATH": str(ROOT)})


def get(server: DevServer, path: str) -> Any:
    return httpx.get(f"{server.url}{path}", timeout=30).json()


def post(server: DevServer, path: str, body: Any = None, **kw: Any) -> Any:
    if body is not None:
        kw["json"] = body
    answer = httpx.post(f"{server.url}{path}", timeout=30, **kw)
    return answer.json()


def test_mcp_connections_are_restored_after_sigkill(server: DevServer) -> None:
    """1. add the official SDK's server; 2. call a side effect; 3. SIGKILL and restart;
    4. the server is ready again from the table and the tool is called on a new session."""
    with McpTestServer() as mcp:
        added = post(server, "/agents/tools/t1/add", {"name": "arith", "url": mcp.url})
        assert added["state"] == "ready"
        sid = added["id"]
        assert post(server, "/agents/tools/t1/call", {"id": sid, "tool": "tick"}) == {
            "result": "tick 1"
        }
        server.restart()  # SIGKILL, then a new process on the same persist dir
        state = get(server, "/agents/tools/t1/servers")
        assert state["servers"][sid]["state"] == "ready"
        assert sorted(t["name"] for t in state["tools"]) == ["add", "explode", "greet", "tick"]
        assert post(server, "/agents/tools/t1/call", {"id": sid, "tool": "tick"}) == {
            "result": "tick 2"
        }
        assert mcp.ticks == 2


def test_a_scheduled_destroy_is_finished_after_sigkill(server: DevServer) -> None:
    """1. an agent with notes, started with props from routing; 2. condemned (marker + alarm
    one second out); 3. SIGKILL before the alarm; 4. after the restart the teardown completes
    and the name answers as a brand-new agent."""
    assert post(server, "/agents/notes/n1/add?props=1", content=b"kept?") == [
        'props:{"via": "routing"}',
        "kept?",
    ]
    post(server, "/agents/notes/n1/condemn")
    server.kill()
    server.start()
    eventually_sync(
        lambda: _fresh(server), within=20, what="the teardown after the restart",
        ignoring=(httpx.TransportError, ValueError),
    )  # fmt: skip


def _fresh(server: DevServer) -> bool:
    answer = httpx.get(f"{server.url}/agents/notes/n1/list", timeout=10)
    return answer.status_code == 200 and answer.json() == []


def test_a_compaction_killed_mid_summary_is_finished_after_the_restart(
    server: DevServer, llm: FakeLLM
) -> None:
    """1. three turns cross the compaction threshold; 2. the summary request is held and the
    server SIGKILLed; 3. after the restart the durable schedule runs the compaction again with
    no request; 4. the transcript is the summary and the newest messages, nothing lost."""
    llm.script(
        Reply(Text("one")),
        Reply(Text("two")),
        Reply(Text("three")),
        Reply(Text("cut"), hold_after=0),  # the first summary: held, then the kill
        Reply(Text("They counted to three.")),
    )
    for word in ("first", "second", "third"):
        assert post(server, "/agents/helper/h1/ask", content=word.encode())["status"] == (
            "completed"
        )
    llm.wait_held(timeout=20)  # the summary is being generated: kill the server now
    server.kill()
    before = len(llm.requests("chat"))
    llm.release()
    server.start()
    state = eventually_sync(
        lambda: _compacted(server), within=30, what="the compaction after the restart",
        ignoring=(httpx.TransportError, ValueError),
    )  # fmt: skip
    assert state["texts"] == [
        "Summary of the earlier conversation: They counted to three.",
        "third",
        "three",
    ]
    assert state["schedules"] == []
    assert len(llm.requests("chat")) == before + 1  # one more summary request after the kill


def _compacted(server: DevServer) -> dict[str, Any] | None:
    state: dict[str, Any] = httpx.get(f"{server.url}/agents/helper/h1/state", timeout=10).json()
    return state if state["texts"] and state["texts"][0].startswith("Summary") else None


@pytest.mark.parametrize("template", ["chat", "agent-server"])
def test_init_template_projects_pass_their_own_tests(tmp_path: Path, template: str) -> None:
    project = tmp_path / f"my-{template}"
    init = subprocess.run([str(BIN / "doemu"), "init", str(project), "--template", template],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert init.returncode == 0, init.stderr
    tests = subprocess.run(
        [str(BIN / "pytest"), "-q", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "1 passed" in tests.stdout


def test_init_chat_template_serves_a_turn_under_doemu_dev(
    tmp_path: Path, doemu_dev: DevServerFactory
) -> None:
    import asyncio
    import json

    import websockets

    project = tmp_path / "chatproj"
    subprocess.run([str(BIN / "doemu"), "init", str(project), "--template", "chat"], check=True,
                   capture_output=True, timeout=60)  # fmt: skip
    server = doemu_dev(project)

    async def turn() -> str:
        message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
        request = {
            "type": "cf_agent_use_chat_request",
            "id": "r1",
            "init": {"method": "POST", "body": json.dumps({"messages": [message]})},
        }
        text = ""
        async with websockets.connect(f"{server.ws_url}/agents/chat/alice") as ws:
            await ws.send(json.dumps(request))
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), timeout=30))
                if frame.get("type") != "cf_agent_use_chat_response":
                    continue
                chunk = json.loads(frame["body"]) if frame["body"] else {}
                text += chunk.get("delta", "") if chunk.get("type") == "text-delta" else ""
                if frame["done"]:
                    return text

    assert asyncio.run(turn()) == "Hello, world"
