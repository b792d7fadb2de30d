"""Approval before a server tool runs, in a chat agent under a real ``doemu dev``, with SIGKILLs
(issue 32, item 5).

``e2e/apps/providers``' ``refund`` tool needs approval; it increments the fake counter server
that lives in the test process (it outlives the killed server and collapses repeats of one
idempotency key), so "the refund ran once" is counted from outside.

1. Killed while the approval is pending: the request survives (persisted ``approval-requested``),
   the restarted agent takes the approval, the refund runs once and the model goes on.
2. Killed right after the approval, while the refund is running (its request reached the
   counter, the answer held): the approval is durable, the keep-alive alarm brings the turn
   back, the ledger re-runs the idempotent refund under the same key — applied once — and the
   reply completes.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets

from doemu.testing.devserver import DevServer, DevServerFactory
from doemu.testing.fake_providers import CounterServer, FakeLLM, Reply, Text, ToolUse
from tests.polling import eventually_sync

from .test_providers import Chat

APP = Path(__file__).resolve().parent / "apps" / "providers"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(api_key="test-key") as server:
        yield server


@pytest.fixture
def counter() -> Iterator[CounterServer]:
    with CounterServer(honour_idempotency=True) as keyed:
        yield keyed


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
    return doemu_dev(project, env={"PYTHONPATH": str(ROOT)})


def refund_part(chat: Chat) -> dict[str, Any] | None:
    messages = chat.messages()
    last = messages[-1] if messages else None
    if last is None or last["role"] != "assistant":
        return None
    return next((p for p in last["parts"] if p.get("toolCallId") == "rf1"), None)


def approve(server: DevServer, chat: Chat, approved: bool = True) -> list[dict[str, Any]]:
    """Send ``cf_agent_tool_approval`` as ``useAgentChat`` does (``autoContinue``); the frames
    up to the message update it causes."""
    frame = {"type": "cf_agent_tool_approval", "toolCallId": "rf1", "approved": approved,
             "autoContinue": True}  # fmt: skip

    async def go() -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = []
        async with websockets.connect(f"{server.ws_url}{chat.path}") as ws:
            await ws.send(json.dumps(frame))
            async with asyncio.timeout(20):
                while not any(f.get("type") == "cf_agent_message_updated" for f in seen):
                    seen.append(json.loads(await ws.recv()))
        return seen

    return asyncio.run(go())


def ask_for_refund(llm: FakeLLM, chat: Chat) -> None:
    llm.script(Reply(Text("refunding"), ToolUse("refund", {"amount": 7}, id="rf1")))
    llm.script(Reply(Text(", refunded")))
    chat.send("refund me", until_chunks=1)
    eventually_sync(lambda: (refund_part(chat) or {}).get("state") == "approval-requested",
                    within=20, what="the persisted approval request")  # fmt: skip


def completed(chat: Chat) -> bool:
    part = refund_part(chat) or {}
    return part.get("state") == "output-available" and chat.texts()[-1] == (
        "assistant",
        "refunding, refunded",
    )


def test_killed_while_an_approval_waits_the_restarted_agent_takes_it_and_runs_once(
    server: DevServer, llm: FakeLLM, counter: CounterServer
) -> None:
    chat = Chat(server, "AnthropicChat", "approve-wait")
    ask_for_refund(llm, chat)
    assert counter.calls == 0  # nothing ran before the approval
    server.kill()
    assert (refund_part(chat) or {}).get("approval") == {"id": "rf1"}  # on disk, while down
    server.start()
    frames = approve(server, chat)
    updated = next(f for f in frames if f["type"] == "cf_agent_message_updated")
    part = next(p for p in updated["message"]["parts"] if p.get("toolCallId") == "rf1")
    assert part["state"] == "approval-responded"
    eventually_sync(lambda: completed(chat), within=30, what="the refund and the answer")
    assert (counter.count, counter.calls) == (1, 1)
    assert refund_part(chat)["output"]["count"] == 1  # type: ignore[index]
    assert len(llm.requests("messages")) == 2
    assert "Traceback" not in server.output


def test_killed_right_after_the_approval_the_refund_completes_once(
    server: DevServer, llm: FakeLLM, counter: CounterServer
) -> None:
    chat = Chat(server, "AnthropicChat", "approve-kill")
    ask_for_refund(llm, chat)
    counter.hold_next()  # the refund is applied, its answer held: the kill lands mid-tool
    approve(server, chat)
    counter.wait_held(timeout=20)
    server.kill()
    assert (refund_part(chat) or {}).get("state") == "approval-responded"  # durable decision
    counter.release()
    server.start()  # nothing connects: the persisted keep-alive alarm brings the turn back
    eventually_sync(lambda: completed(chat), within=40, what="the recovered continuation")
    assert counter.count == 1  # applied once, whatever ran again
    assert counter.calls == 2  # re-run after the kill, under the same idempotency key
    assert {b["amount"] for b in counter.bodies} == {7}
    assert "Traceback" not in server.output
