"""The v7 chat routes in the AI SDK's UI-message stream (issue 26, item 6), in process: a
``useChat`` request starts a run and reads it, an approval-gated tool is approved (or denied) by
the client's copy of the message, and ``/chat/{id}/stream`` re-attaches mid-run (204 after).
The AI SDK's own client drives the same routes in ``e2e/test_agent_server_ai_sdk.py``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from agents.providers import OpenAIChatCompletions, Tool
from agents.server import (
    AgentRegistry,
    create_agent_server,
    define_agent,
    needs_approval,
)
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from doemu.testing.plugin import HarnessFactory

from .agent_server_steps import Session

DEPLOYS: list[Any] = []


async def deploy(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    DEPLOYS.append(args)
    return {"deployed": args.get("service")}


def registry() -> AgentRegistry:
    agents = AgentRegistry()
    gated = needs_approval(Tool("deploy", "Deploy a service.", {"type": "object"}, execute=deploy))
    agents.register(define_agent("ops", tools=[gated]))
    return agents


Server = create_agent_server(
    agents=registry(),
    llm_adapter=lambda env, ctx: OpenAIChatCompletions.from_env(env, model="m"),
    name="UiStreamServer",
)


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    DEPLOYS.clear()
    with FakeLLM(api_key="k") as server:
        yield server


async def harness(doemu_harness: HarnessFactory, llm: FakeLLM) -> Any:
    return await doemu_harness(
        {"AGENTS": Server}, vars={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": f"{llm.url}/v1"}
    )


def chunks(text: str) -> list[Any]:
    """The UI-message chunks of an SSE body (``[DONE]`` as the string)."""
    out: list[Any] = []
    for line in text.splitlines():
        if line.startswith("data: "):
            data = line[6:]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def deltas(got: list[Any]) -> str:
    return "".join(c["delta"] for c in got if c != "[DONE]" and c["type"] == "text-delta")


async def post_chat(s: Session, body: dict[str, Any]) -> tuple[Any, list[Any]]:
    response = await s.stub.fetch("http://agent/chat", method="POST", body=json.dumps(body))
    return response, chunks(await response.text())


def user(text: str, message_id: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


async def test_a_use_chat_request_starts_a_run_and_reads_it_as_a_ui_message_stream(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(Text("hello ", "there")))
    h = await harness(doemu_harness, llm)
    s = Session(h, "ui-1", default_agent="ops")
    body = {"id": "ui-1", "messages": [user("hi", "u-client-1")], "trigger": "submit-message",
            "agentType": "ops"}  # fmt: skip
    response, got = await post_chat(s, body)
    assert response.headers.get("x-vercel-ai-ui-message-stream") == "v1"
    kinds = [c if isinstance(c, str) else c["type"] for c in got]
    assert kinds == ["start", "start-step", "text-start", "text-delta", "text-delta", "text-end",
                     "finish-step", "finish", "[DONE]"]  # fmt: skip
    stored = await s.messages()
    assert stored[0]["id"] == "u-client-1"  # the client's id is kept
    assert got[0]["messageId"] == stored[1]["id"]
    assert deltas(got) == "hello there"
    status, _ = await s.call("/chat/ui-1/stream")
    assert status == 204  # no run going on: the client has the messages


async def test_an_approval_gated_tool_runs_once_approved_and_not_when_denied(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(Text("deploying "), ToolUse("deploy", {"service": "api"}, id="d1")))
    llm.script(Reply(Text("done")))
    h = await harness(doemu_harness, llm)
    s = Session(h, "ui-approve", default_agent="ops")
    first = [user("deploy the api", "u1")]
    _, got = await post_chat(s, {"id": "ui-approve", "messages": first, "agentType": "ops"})
    kinds = [c if isinstance(c, str) else c["type"] for c in got]
    assert "tool-input-available" in kinds and "tool-approval-request" in kinds
    request = next(c for c in got if c != "[DONE]" and c["type"] == "tool-approval-request")
    assert request["toolCallId"] == "d1" and kinds[-2:] == ["finish", "[DONE]"]
    assert DEPLOYS == []  # nothing runs before the approval
    assert (await s.status())["status"] == "suspended_approval"
    _, snapshot = await s.call("/snapshot")
    assert list(snapshot["pendingClientToolCalls"]) == ["d1"]
    assistant = {"id": got[0]["messageId"], "role": "assistant", "parts": [
        {"type": "step-start"}, {"type": "text", "text": "deploying "},
        {"type": "tool-deploy", "toolCallId": "d1", "state": "approval-responded",
         "input": {"service": "api"}, "approval": {"id": "d1", "approved": True}}]}  # fmt: skip
    body = {"id": "ui-approve", "messages": [*first, assistant], "trigger": "submit-message"}
    _, more = await post_chat(s, body)
    assert more[0] == {"type": "start", "messageId": assistant["id"]}  # the same message goes on
    output = next(c for c in more if c != "[DONE]" and c["type"] == "tool-output-available")
    assert output == {"type": "tool-output-available", "toolCallId": "d1",
                      "output": {"deployed": "api"}}  # fmt: skip
    assert deltas(more) == "done"
    assert DEPLOYS == [{"service": "api"}]
    response = await s.stub.fetch("http://agent/chat", method="POST", body=json.dumps(body))
    refused = json.loads(await response.text())  # the same answer twice: nothing runs again
    assert response.status == 409 and refused["code"] == "NOTHING_TO_ANSWER"
    assert DEPLOYS == [{"service": "api"}] and (await s.status())["status"] == "completed"

    llm.script(Reply(ToolUse("deploy", {"service": "db"}, id="d2")))
    llm.script(Reply(Text("not deployed")))
    t = Session(h, "ui-deny", default_agent="ops")
    first = [user("deploy the db", "u2")]
    _, got = await post_chat(t, {"id": "ui-deny", "messages": first, "agentType": "ops"})
    denied = {"id": got[0]["messageId"], "role": "assistant", "parts": [
        {"type": "tool-deploy", "toolCallId": "d2", "state": "approval-responded",
         "input": {"service": "db"}, "approval": {"id": "d2", "approved": False,
                                                   "reason": "not today"}}]}  # fmt: skip
    _, more = await post_chat(t, {"id": "ui-deny", "messages": [*first, denied]})
    denial = next(c for c in more if c != "[DONE]" and c["type"] == "tool-output-denied")
    assert denial == {"type": "tool-output-denied", "toolCallId": "d2"}
    denied_result = llm.requests("chat")[-1]["messages"][-1]
    assert denied_result["role"] == "tool" and "not today" in denied_result["content"]
    assert DEPLOYS == [{"service": "api"}]  # the denied call never ran
    assert (await t.wait("completed"))["output"] == "not deployed"


async def test_the_stream_route_re_attaches_mid_run_from_the_message_start(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(Text("one ", "two ", "three ", "four"), hold_after=2))
    h = await harness(doemu_harness, llm)
    s = Session(h, "ui-reload", default_agent="ops")
    body = {"id": "ui-reload", "messages": [user("count", "u1")], "agentType": "ops"}
    first = asyncio.ensure_future(post_chat(s, body))
    await llm.await_held(timeout=10)
    response = await s.stub.fetch("http://agent/chat/ui-reload/stream")
    assert response.status == 200
    reading = asyncio.ensure_future(response.text())
    llm.release()
    replayed = chunks(await reading)
    _, original = await first
    assert replayed == original  # the same message, from its start, then live
    assert deltas(replayed) == "one two three four"
