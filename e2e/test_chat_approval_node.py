"""Approval before a server tool runs, answered by Cloudflare's own chat client (issue 32, item 5).

The client is ``e2e/chat_client/chat.mjs``: npm ``@cloudflare/ai-chat`` 0.12.2's ``useAgentChat``
rendered headless in Node. It sends "refund me", waits for the tool part the hook renders in
``approval-requested``, answers with the hook's ``addToolApprovalResponse({id, approved})`` (which
sends ``cf_agent_tool_approval {toolCallId, approved, autoContinue: true}`` and resumes the
server's continuation) and waits until the hook renders the settled part and the model's next
words. The server is a real ``doemu dev`` serving ``e2e/apps/providers``: ``AnthropicChat``'s
``refund`` tool needs approval and POSTs to a counter server in this process.

That counter does *not* collapse repeated idempotency keys, so ``calls == 1`` means exactly one
request left the tool: the refund ran once, observed from outside the killed process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doemu.testing.devserver import DevServer, DevServerFactory
from doemu.testing.fake_providers import CounterServer, FakeLLM, Reply, Text, ToolUse

from .test_chat import CLIENT, chat_client  # noqa: F401 (the fixture: npm ci when needed)

APP = Path(__file__).resolve().parent / "apps" / "providers"
ROOT = Path(__file__).resolve().parent.parent
ASKING = "refunding"
pytestmark = pytest.mark.usefixtures("chat_client")
CONTINUED = ", refunded"


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(api_key="test-key") as server:
        server.script(Reply(Text(ASKING), ToolUse("refund", {"amount": 7}, id="rf1")))
        server.script(Reply(Text(CONTINUED)))
        yield server


@pytest.fixture
def counter() -> Iterator[CounterServer]:
    with CounterServer(honour_idempotency=False) as plain:  # every request counts
        yield plain


@pytest.fixture
def server(
    tmp_path: Path, doemu_dev: DevServerFactory, llm: FakeLLM, counter: CounterServer
) -> DevServer:
    project = tmp_path / "app"
    shutil.copytree(APP, project, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    (project / ".dev.vars").write_text(
        f"ANTHROPIC_API_KEY=test-key\nANTHROPIC_BASE_URL={llm.url}\n"
        f"OPENAI_API_KEY=test-key\nOPENAI_BASE_URL={llm.url}/v1\n"
        f"COUNTER_URL={counter.url}\nCOUNTER_PLAIN_URL={counter.url}\n"
    )
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return doemu_dev(project, env={"PYTHONPATH": pythonpath})


def client(server: DevServer, name: str, scenario: str) -> dict[str, Any]:
    """Run one ``chat.mjs`` scenario on ``AnthropicChat/<name>``; its report, every check held."""
    done = subprocess.run(
        ["node", "chat.mjs", f"{server.host}:{server.port}", "AnthropicChat", name, scenario],
        cwd=CLIENT,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, f"{scenario}: {done.stderr}\n{server.output}"
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["ok"] is True and all(report["checks"].values()), report["checks"]
    return report


def refund(message: dict[str, Any]) -> dict[str, Any]:
    part: dict[str, Any] = next(p for p in message["parts"] if p.get("toolCallId") == "rf1")
    return part


def shape(message: dict[str, Any]) -> list[tuple[str, str | None]]:
    """Each part's type and state (or text), as the client renders the message."""
    return [(p["type"], p.get("state") if p.get("toolCallId") else p.get("text"))
            for p in message["parts"]]  # fmt: skip


def second_request_tail(llm: FakeLLM) -> Any:
    requests = llm.requests("messages")
    assert len(requests) == 2  # the question, then the continuation: nothing asked again
    return requests[1]["messages"][-1]


def test_the_client_approves_and_the_refund_runs_once(
    server: DevServer, llm: FakeLLM, counter: CounterServer
) -> None:
    report = client(server, f"approve-{uuid.uuid4().hex[:8]}", "approve")
    asked = report["askedMessages"][-1]
    assert refund(asked)["state"] == "approval-requested"
    assert refund(asked)["approval"] == {"id": "rf1"}
    assert (counter.calls, counter.count) == (1, 1)  # the one request, after the approval
    assert counter.bodies == [{"amount": 7}]
    final = report["client"]["messages"][-1]
    assert final["id"] == asked["id"]  # the same assistant message goes on
    assert shape(final) == [("step-start", None), ("text", ASKING),
                            ("tool-refund", "output-available"), ("step-start", None),
                            ("text", CONTINUED)]  # fmt: skip
    assert refund(final)["approval"] == {"id": "rf1", "approved": True}
    assert refund(final)["output"]["count"] == 1
    assert report["continued"] == CONTINUED
    assert report["getMessages"][-1]["parts"] == final["parts"]  # what the server stored
    result = second_request_tail(llm)["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "rf1"
    assert json.loads(result["content"])["count"] == 1
    assert "Traceback" not in server.output


def test_the_client_denies_and_the_refund_never_runs(
    server: DevServer, llm: FakeLLM, counter: CounterServer
) -> None:
    report = client(server, f"deny-{uuid.uuid4().hex[:8]}", "deny")
    final = report["client"]["messages"][-1]
    assert shape(final) == [("step-start", None), ("text", ASKING),
                            ("tool-refund", "output-denied"), ("step-start", None),
                            ("text", CONTINUED)]  # fmt: skip
    assert refund(final)["approval"] == {"id": "rf1", "approved": False}
    assert "output" not in refund(final)
    assert (counter.calls, counter.count) == (0, 0)
    assert report["getMessages"][-1]["parts"] == final["parts"]
    assert second_request_tail(llm) == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "rf1", "content": "The user denied this tool call.",
         "is_error": True}]}  # fmt: skip
    assert "Traceback" not in server.output


def test_killed_while_the_approval_waits_a_new_tab_approves_after_the_restart(
    server: DevServer, llm: FakeLLM, counter: CounterServer
) -> None:
    """1. A tab asks; the reply ends waiting for the approval (stored ``approval-requested``).
    2. The server is SIGKILLed and restarted on the same state. 3. A new tab loads the stored
    transcript, shows the pending approval, approves it; the continuation runs the refund once
    and the model goes on in the same message."""
    name = f"killed-{uuid.uuid4().hex[:8]}"
    asked = client(server, name, "ask")
    waiting = asked["getMessages"][-1]
    assert refund(waiting)["state"] == "approval-requested"
    assert counter.calls == 0
    server.kill()
    server.start()
    report = client(server, name, "answer-approve")
    assert report["askedMessages"][-1] == waiting  # the new tab rendered the stored request
    final = report["client"]["messages"][-1]
    assert final["id"] == waiting["id"]
    assert shape(final)[2:] == [("tool-refund", "output-available"), ("step-start", None),
                                ("text", CONTINUED)]  # fmt: skip
    assert (counter.calls, counter.count) == (1, 1)
    assert report["getMessages"][-1]["parts"] == final["parts"]
    assert len(llm.requests("messages")) == 2
    assert "Traceback" not in server.output
