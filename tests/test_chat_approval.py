"""Approval before a server tool runs, in ``model_reply`` (issue 32, item 5).

A ``Tool`` with ``needs_approval`` is not run when the model calls it: the reply emits the AI
SDK's ``tool-approval-request`` and ends waiting (``finishReason: "tool-calls"``), the part
persisted ``approval-requested``. ``cf_agent_tool_approval {toolCallId, approved, autoContinue}``
answers: approved, the continuation runs the tool once (ledger) and the model goes on; denied, the
part is ``output-denied`` and the model reads the denial. Real doemu runtime, real SQLite, the
providers' wire-format fakes; the SIGKILL paths are in ``e2e/test_chat_approval.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from agents.chat import AIChatAgent, ChatMessageOptions
from agents.chat.turns.autocontinue import APPROVED_CONTINUATION_KEY
from agents.providers import AnthropicMessages, Tool, model_reply
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from doemu.testing.plugin import HarnessFactory

from .polling import eventually
from .test_chat_agent import Client, connect, request

DEPLOYS: list[dict[str, Any]] = []
PAYMENTS: list[dict[str, Any]] = []


async def deploy(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    DEPLOYS.append({"args": args, "key": ctx.idempotency_key})
    return {"deployed": args.get("service")}


async def pay(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    PAYMENTS.append(args)
    return {"paid": args.get("amount")}


def big(args: dict[str, Any]) -> bool:
    return float(args.get("amount", 0)) > 100


TOOLS = [
    Tool("deploy", "Deploy a service.", {"type": "object"}, execute=deploy, needs_approval=True),
    Tool("pay", "Pay an amount.", {"type": "object"}, execute=pay, needs_approval=big),
]


class ApprovalChat(AIChatAgent):
    tools: ClassVar[list[Tool]] = TOOLS

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        provider = AnthropicMessages.from_env(self.env, model="m")
        return model_reply(self, options, provider, tools=self.tools)

    async def pending(self) -> bool:
        return self.has_pending_interaction()

    async def marker(self) -> Any:
        return self.ctx.storage.kv.get(APPROVED_CONTINUATION_KEY)

    async def ledger(self) -> list[dict[str, Any]]:
        return [op.to_dict() for op in self.operations()]


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    DEPLOYS.clear()
    PAYMENTS.clear()
    with FakeLLM(api_key="k") as server:
        yield server


async def chat(doemu_harness: HarnessFactory, llm: FakeLLM) -> tuple[Any, Any, Client]:
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": llm.url}
    h = await doemu_harness({"CHAT": ApprovalChat}, vars=env)
    stub = h.env.CHAT.getByName("room")
    return h, stub, await connect(stub, "a")


async def stored(stub: Any) -> list[dict[str, Any]]:
    response = await stub.fetch("http://doemu/agents/chat/room/get-messages")
    messages: list[dict[str, Any]] = json.loads(await response.text())
    return messages


def tool_part(message: dict[str, Any], call_id: str) -> dict[str, Any]:
    return next(p for p in message["parts"] if p.get("toolCallId") == call_id)


def text_of(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")


def approval(call_id: str, approved: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "cf_agent_tool_approval", "toolCallId": call_id, "approved": approved,
            "autoContinue": True, **extra}  # fmt: skip


async def asked(a: Client, stub: Any, request_id: str, call_id: str) -> dict[str, Any]:
    """The reply ended waiting for the approval of ``call_id``; the stored assistant message."""
    await eventually(lambda: a.done(request_id), what="the reply waiting for the approval")
    chunks = a.chunks(request_id)
    assert {"type": "tool-approval-request", "approvalId": call_id,
            "toolCallId": call_id} in chunks  # fmt: skip
    finish = [c for c in chunks if c["type"] == "finish"]
    assert finish[-1]["messageMetadata"] == {"finishReason": "tool-calls"}
    waiting = (await stored(stub))[-1]
    part = tool_part(waiting, call_id)
    assert part["state"] == "approval-requested" and part["approval"] == {"id": call_id}
    return waiting


async def continued(stub: Any, text: str) -> dict[str, Any]:
    async def done() -> Any:
        last = (await stored(stub))[-1]
        return last if last["role"] == "assistant" and text_of(last).endswith(text) else None

    found: dict[str, Any] = await eventually(done, what="the continuation")
    return found


async def test_an_approved_call_runs_once_and_the_model_goes_on(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(Text("deploying"), ToolUse("deploy", {"service": "api"}, id="d1")))
    llm.script(Reply(Text("done")))
    h, stub, a = await chat(doemu_harness, llm)
    a.send(request("r1", "deploy the api", "u1"))
    waiting = await asked(a, stub, "r1", "d1")
    assert DEPLOYS == []  # nothing ran before the approval
    assert await stub.pending()  # a person is waited for
    assert len(llm.requests("messages")) == 1

    a.send(approval("d1", True))
    await eventually(lambda: a.of("cf_agent_message_updated"), what="the approval applied")
    updated = a.of("cf_agent_message_updated")[-1]["message"]
    assert tool_part(updated, "d1")["state"] == "approval-responded"
    assert tool_part(updated, "d1")["approval"] == {"id": "d1", "approved": True}
    await h.advance(50)  # the auto-continuation's coalescing window
    reply = await continued(stub, "done")
    assert reply["id"] == waiting["id"]  # the same message goes on
    part = tool_part(reply, "d1")
    assert part["state"] == "output-available" and part["output"] == {"deployed": "api"}
    (run,) = DEPLOYS
    assert run["args"] == {"service": "api"} and run["key"].startswith("op_")
    second = llm.requests("messages")[1]["messages"]
    result = {"type": "tool_result", "tool_use_id": "d1", "content": '{"deployed": "api"}'}
    assert second[-1] == {"role": "user", "content": [result]}
    assert not await stub.pending()
    assert await stub.marker() is None
    ops = [(op["kind"], op["status"]) for op in await stub.ledger() if op["kind"] == "tool:deploy"]
    assert ops == [("tool:deploy", "completed")]

    # The same approval again: refused to its sender by name, nothing runs again.
    a.send(approval("d1", True))
    errors = await eventually(lambda: a.of("cf_agent_tool_error"), what="the refusal")
    assert errors[-1]["toolCallId"] == "d1" and errors[-1]["answer"] == "approval"
    assert "'d1'" in errors[-1]["error"] and "output-available" in errors[-1]["error"]
    await h.advance(100)
    assert len(DEPLOYS) == 1 and len(llm.requests("messages")) == 2


async def test_a_denied_call_never_runs_and_the_model_reads_the_denial(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(ToolUse("deploy", {"service": "db"}, id="d2")))
    llm.script(Reply(Text("not deployed")))
    h, stub, a = await chat(doemu_harness, llm)
    a.send(request("r1", "deploy the db", "u1"))
    await asked(a, stub, "r1", "d2")
    a.send(approval("d2", False))
    await h.advance(50)
    reply = await continued(stub, "not deployed")
    part = tool_part(reply, "d2")
    assert part["state"] == "output-denied"
    assert part["approval"] == {"id": "d2", "approved": False}
    assert DEPLOYS == []
    second = llm.requests("messages")[1]["messages"]
    assert second[-1] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "d2", "content": "The user denied this tool call.",
         "is_error": True}]}  # fmt: skip
    assert await stub.ledger() == [op for op in await stub.ledger() if op["kind"] != "tool:deploy"]


async def test_a_callable_needs_approval_gates_only_the_calls_it_names(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(ToolUse("pay", {"amount": 5}, id="p1"), ToolUse("pay", {"amount": 500},
                                                                       id="p2")))  # fmt: skip
    llm.script(Reply(Text("paid both")))
    h, stub, a = await chat(doemu_harness, llm)
    a.send(request("r1", "pay", "u1"))
    waiting = await asked(a, stub, "r1", "p2")
    assert PAYMENTS == [{"amount": 5}]  # the small one ran at once
    assert tool_part(waiting, "p1")["state"] == "output-available"
    assert not any(c.get("toolCallId") == "p1" and c["type"] == "tool-approval-request"
                   for c in a.chunks("r1"))  # fmt: skip
    a.send(approval("p2", True))
    await h.advance(50)
    reply = await continued(stub, "paid both")
    assert tool_part(reply, "p2")["output"] == {"paid": 500}
    assert PAYMENTS == [{"amount": 5}, {"amount": 500}]


async def test_unknown_and_malformed_approvals_get_an_error_frame_naming_them(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(ToolUse("deploy", {"service": "api"}, id="d1")))
    h, stub, a = await chat(doemu_harness, llm)
    a.send(request("r1", "deploy", "u1"))
    await asked(a, stub, "r1", "d1")
    a.send(approval("nope", True))
    a.send(approval("d1", "yes"))
    a.send({"type": "cf_agent_tool_approval", "approved": True})
    await eventually(lambda: len(a.of("cf_agent_tool_error")) == 3, what="three refusals")
    unknown, malformed, missing = a.of("cf_agent_tool_error")
    assert unknown["toolCallId"] == "nope" and "no tool call 'nope'" in unknown["error"]
    assert malformed["toolCallId"] == "d1" and "approved: true or false" in malformed["error"]
    assert missing["toolCallId"] is None and "toolCallId" in missing["error"]
    await h.advance(100)
    assert tool_part((await stored(stub))[-1], "d1")["state"] == "approval-requested"
    assert DEPLOYS == []


async def test_an_approval_whose_continuation_never_started_survives_a_crash(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    """The approval is stored and its continuation remembered; the instance dies before the
    coalescing window ran out. The next activation continues: the tool runs once."""
    llm.script(Reply(ToolUse("deploy", {"service": "api"}, id="d1")))
    llm.script(Reply(Text("done")))
    h, stub, a = await chat(doemu_harness, llm)
    a.send(request("r1", "deploy", "u1"))
    await asked(a, stub, "r1", "d1")
    a.send(approval("d1", True))
    await eventually(lambda: a.of("cf_agent_message_updated"), what="the approval applied")
    assert await stub.marker() is not None
    assert h.reset("CHAT", "room", "simulated crash")  # in-memory continuation state is gone
    assert DEPLOYS == []
    stub = h.env.CHAT.getByName("room")
    await connect(stub, "b")  # activates the object again
    await h.advance(50)
    reply = await continued(stub, "done")
    assert tool_part(reply, "d1")["state"] == "output-available"
    assert len(DEPLOYS) == 1
    assert await stub.marker() is None


def test_needs_approval_is_checked_when_the_tool_is_defined() -> None:
    with pytest.raises(ValueError, match="'ask' has needs_approval but no execute"):
        Tool("ask", "Ask the user.", needs_approval=True)
    with pytest.raises(TypeError, match="needs_approval must be True/False or a function"):
        Tool("x", "", execute=deploy, needs_approval="yes")  # type: ignore[arg-type]
    assert Tool("y", "", execute=deploy, needs_approval=big).requires_approval({"amount": 101})
    assert not Tool("y", "", execute=deploy, needs_approval=big).requires_approval({"amount": 1})
    assert not Tool("z", "", execute=deploy).requires_approval({})
