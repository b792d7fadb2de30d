"""The agent server's v7 chat routes driven by the AI SDK's own client (issue 26, item 6).

``e2e/ai_sdk_client/chat.mjs`` renders ``useChat`` of npm ``@ai-sdk/react`` over npm ``ai``'s
``DefaultChatTransport`` headless in Node, against a real ``doemu dev`` serving the agent
server (the model: the fake OpenAI Responses server):

1. ``send`` — a message answered, the client's messages (ids included) equal to the stored ones;
2. ``reload`` — the tab goes away mid-answer; a new one mounted with the stored messages and
   ``resume: true`` re-attaches (``GET /chat/<id>/stream``) and shows the whole answer, equal to
   the stored one, without sending anything;
3. ``approve`` — an approval-gated tool: the client sees ``approval-requested``, answers with
   ``addToolApprovalResponse``, the hook re-sends by itself, the tool runs on the server once
   (counted from outside) and the answer goes on in the same assistant message.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from doemu.testing.devserver import DevServer
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse

from .agent_server_fixtures import effects as effects  # the fixtures: server asks for both
from .agent_server_fixtures import llm as llm
from .agent_server_fixtures import server as server
from .counter import Counter
from .node import locked_project

CLIENT = Path(__file__).resolve().parent / "ai_sdk_client"


@pytest.fixture(scope="module")
def ai_sdk_client() -> Path:
    """The Node project with its locked dependencies (``npm ci`` when they are missing)."""
    return locked_project(CLIENT, ("ai", "@ai-sdk/react"), "the AI SDK client test")


def drive(client: Path, server: DevServer, session_id: str, scenario: str) -> dict[str, object]:
    done = subprocess.run(
        ["node", "chat.mjs", server.url, session_id, scenario],
        cwd=client, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    lines = done.stdout.strip().splitlines()
    assert lines, f"no report from the client (exit {done.returncode}):\n{done.stderr}"
    report: dict[str, object] = json.loads(lines[-1])
    assert done.returncode == 0 and report["ok"], (
        f"checks {report.get('checks')}\nstderr:\n{done.stderr}\nserver:\n{server.output}"
    )
    return report


def test_use_chat_sends_a_message_and_reads_the_answer(
    ai_sdk_client: Path, server: DevServer, llm: FakeLLM
) -> None:
    llm.script(Reply(Text("hello ", "there")))
    report = drive(ai_sdk_client, server, "sdk-send", "send")
    assert report["checks"] == {"twoMessages": True, "statusesInOrder": True, "endedReady": True,
                                "replyMatchesServer": True, "sameMessageIds": True}  # fmt: skip
    assert "Traceback" not in server.output


def test_use_chat_reloaded_mid_answer_re_attaches_to_the_run(
    ai_sdk_client: Path, server: DevServer, llm: FakeLLM
) -> None:
    llm.script(Reply(Text(*[f"w{i} " for i in range(40)]), delay_ms=50))
    report = drive(ai_sdk_client, server, "sdk-reload", "reload")
    stored = report["stored"]
    assert isinstance(stored, list)
    reply = "".join(p.get("text", "") for p in stored[-1]["parts"] if p["type"] == "text")
    assert reply == "".join(f"w{i} " for i in range(40))
    assert llm.stats.requests["responses.create"] == 1  # the reload did not ask the model again
    assert "Traceback" not in server.output


def test_use_chat_approves_a_tool_that_then_runs_once_on_the_server(
    ai_sdk_client: Path, server: DevServer, llm: FakeLLM, effects: Counter
) -> None:
    llm.script(Reply(ToolUse("deploy", {"service": "api"}, id="d1")))
    llm.script(Reply(Text("deployed ", "it")))
    report = drive(ai_sdk_client, server, "sdk-approve", "approve")
    assert report["checks"] == {"approvalRequested": True, "resentAutomatically": True,
                                "toolRanOnServer": True, "oneAssistantMessage": True,
                                "replyMatchesServer": True, "noError": True}  # fmt: skip
    assert [c["service"] for c in effects.snapshot()] == ["api"]  # the side effect, once
    assert "Traceback" not in server.output
