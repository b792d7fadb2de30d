"""An approved, non-idempotent server tool cut mid-run is never run twice (issue 32, item 5).

``transfer`` needs approval and is not ``idempotent``: its upstream cannot collapse a repeat. A
person approves it, the continuation starts it — the side effect happens (``STARTED``) — and the
instance dies before the result is recorded (``h.reset``: in-flight work cancelled, as after a
SIGKILL; the ledger's row stays ``started``). The next activation recovers the turn: the ledger
judges the call *ambiguous*, so the tool is not run again and the continuation reports the
ledger's "operation … may have executed; verify before retrying" as the call's ``output-error``
— to the model (an error ``tool_result``) and to the client (the stored part) — and the model goes
on. The idempotent twin (``refund``) runs again under the same idempotency key instead: the
contrast is the point. Real doemu runtime, real SQLite, the Anthropic wire-format fake.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from agents.chat import AIChatAgent, ChatMessageOptions
from agents.providers import AnthropicMessages, Tool, model_reply
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from doemu.testing.plugin import HarnessFactory

from .polling import eventually
from .test_chat_agent import Client, connect, request

#: Every start of a tool body (the side effect, as the world saw it): (tool, idempotency key).
STARTED: list[tuple[str, str]] = []
#: Set to let a running body finish; left unset, the body hangs until the reset cancels it.
RELEASE: dict[str, asyncio.Event] = {}


async def _side_effect(name: str, args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    STARTED.append((name, ctx.idempotency_key))
    if len([n for n, _ in STARTED if n == name]) == 1:  # the first run hangs: the kill lands
        await asyncio.Event().wait()
    return {name: args.get("amount")}


async def transfer(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return await _side_effect("transfer", args, ctx)


async def refund(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return await _side_effect("refund", args, ctx)


AMOUNT = {"type": "object", "properties": {"amount": {"type": "number"}}}
TOOLS = [
    Tool("transfer", "Wire money out.", AMOUNT, execute=transfer, needs_approval=True),
    Tool("refund", "Refund.", AMOUNT, execute=refund, idempotent=True, needs_approval=True),
]


class GatedChat(AIChatAgent):
    tools: ClassVar[list[Tool]] = TOOLS

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        provider = AnthropicMessages.from_env(self.env, model="m")
        return model_reply(self, options, provider, tools=self.tools)

    async def ledger(self) -> list[dict[str, Any]]:
        return [op.to_dict() for op in self.operations()]


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    STARTED.clear()
    with FakeLLM(api_key="k") as server:
        yield server


async def stored(stub: Any) -> list[dict[str, Any]]:
    response = await stub.fetch("http://doemu/agents/chat/room/get-messages")
    messages: list[dict[str, Any]] = json.loads(await response.text())
    return messages


def tool_part(message: dict[str, Any], call_id: str) -> dict[str, Any]:
    return next(p for p in message["parts"] if p.get("toolCallId") == call_id)


def text_of(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")


async def approved_then_killed(
    doemu_harness: HarnessFactory, llm: FakeLLM, tool: str
) -> tuple[Any, Any, Client]:
    """Ask for ``tool`` (call ``c1``), approve it, let its body start, then reset the instance;
    the harness, the stub of the restarted object and a new connection to it."""
    llm.script(Reply(Text("on it"), ToolUse(tool, {"amount": 9}, id="c1")))
    llm.script(Reply(Text(" — checked")))
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": llm.url}
    h = await doemu_harness({"CHAT": GatedChat}, vars=env)
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    a.send(request("r1", "go", "u1"))
    await eventually(lambda: a.done("r1"), what="the reply waiting for the approval")
    assert tool_part((await stored(stub))[-1], "c1")["state"] == "approval-requested"
    assert STARTED == []
    a.send({"type": "cf_agent_tool_approval", "toolCallId": "c1", "approved": True,
            "autoContinue": True})  # fmt: skip
    await h.advance(50)  # the auto-continuation's coalescing window
    await eventually(lambda: len(STARTED) == 1, what="the approved tool's body running")
    ops = {op["kind"]: op["status"] for op in await stub.ledger()}
    assert ops[f"tool:{tool}"] == "started"  # durable before the body ran
    assert h.reset("CHAT", "room", "simulated crash mid-tool")
    stub = h.env.CHAT.getByName("room")
    b = await connect(stub, "b")  # activates the object: recovery finds the cut turn
    return h, stub, b


async def recovered(h: Any, stub: Any) -> dict[str, Any]:
    async def done() -> Any:
        last = (await stored(stub))[-1]
        ok = last["role"] == "assistant" and text_of(last).endswith(" — checked")
        return last if ok else None

    for _ in range(3):  # the recovery's schedule (and its coalescing) on the manual clock
        await h.advance(1_000)
    found: dict[str, Any] = await eventually(done, what="the recovered continuation")
    return found


async def test_a_non_idempotent_approved_tool_cut_mid_run_is_reported_never_rerun(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    h, stub, b = await approved_then_killed(doemu_harness, llm, "transfer")
    reply = await recovered(h, stub)
    assert [name for name, _ in STARTED] == ["transfer"]  # the body never started again
    part = tool_part(reply, "c1")
    assert part["state"] == "output-error"
    op_id = part["callProviderMetadata"]["agents"]["opId"]
    ambiguity = f"operation {op_id} (tool:transfer) may have executed; verify before retrying"
    assert part["errorText"] == ambiguity
    assert part["approval"] == {"id": "c1", "approved": True}  # the decision stays recorded
    assert STARTED[0][1] == op_id  # the run that happened had the operation's key
    streamed = [json.loads(f["body"]) for f in b.of("cf_agent_use_chat_response") if f["body"]]
    told = {"type": "tool-output-error", "toolCallId": "c1", "errorText": ambiguity}
    assert told in streamed  # the connected client is told, live
    requests = llm.requests("messages")
    assert len(requests) == 2  # the question, then the model told of the ambiguity
    assert requests[1]["messages"][-1] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": ambiguity, "is_error": True}
        ],
    }
    ops = [
        (op["kind"], op["status"]) for op in await stub.ledger() if op["kind"] == "tool:transfer"
    ]
    assert ops == [("tool:transfer", "started")]  # left for a person to verify, not "completed"
    assert (await stored(stub))[-1]["id"] == reply["id"]


async def test_the_idempotent_twin_runs_again_under_the_same_key(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    h, stub, _b = await approved_then_killed(doemu_harness, llm, "refund")
    reply = await recovered(h, stub)
    part = tool_part(reply, "c1")
    assert part["state"] == "output-available" and part["output"] == {"refund": 9}
    (first, second) = STARTED
    assert first == second  # the same tool, under the same idempotency key: collapsed upstream
    assert first[1] == part["callProviderMetadata"]["agents"]["opId"]
    result = llm.requests("messages")[1]["messages"][-1]["content"][0]
    assert result == {"type": "tool_result", "tool_use_id": "c1", "content": '{"refund": 9}'}
