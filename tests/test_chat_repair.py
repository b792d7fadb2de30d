"""Transcript repair before every model call: interrupted tool calls get a result, waiting ones
are left for their client (``agents.chat.transcript.repair``, the SDK's
``repairInterruptedToolParts``)."""

from __future__ import annotations

import json
from typing import Any

from agents.chat.transcript.repair import (
    APPROVED_NOT_RUN_TEXT,
    INTERRUPTED_TOOL_TEXT,
    client_tool_names,
    repair_interrupted_tool_parts,
)
from doemu.testing.plugin import HarnessFactory

from .polling import eventually
from .test_chat_agent import Chat, _steps, connect, request

__all__ = ["_steps"]


def tool(call_id: str, state: str, name: str = "search", **extra: Any) -> dict[str, Any]:
    return {"type": f"tool-{name}", "toolCallId": call_id, "state": state, "input": {}, **extra}


def assistant(message_id: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"id": message_id, "role": "assistant", "parts": list(parts)}


USER = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}


def test_an_interrupted_server_tool_call_gets_an_error_result() -> None:
    messages = [USER, assistant("a1", tool("c1", "input-available")), USER | {"id": "u2"}]
    repaired, ids = repair_interrupted_tool_parts(
        messages, client_tools=frozenset(), repair_approval_responded=True
    )
    assert ids == ["c1"]
    assert repaired[1]["parts"][0] == tool("c1", "output-error", errorText=INTERRUPTED_TOOL_TEXT)
    assert repaired[0] is USER  # untouched messages are the same objects


def test_parts_waiting_for_a_client_and_settled_parts_are_left_alone() -> None:
    parts = [
        tool("c1", "input-available", name="getWeather"),  # a client tool: the browser answers
        tool("c2", "approval-requested"),  # the user may still approve
        tool("c3", "output-available", output=1),
        tool("c4", "output-error", errorText="boom"),
    ]
    messages = [USER, assistant("a1", *parts)]
    repaired, ids = repair_interrupted_tool_parts(
        messages,
        client_tools=client_tool_names([{"name": "getWeather"}]),
        repair_approval_responded=True,
    )
    assert ids == [] and repaired[1]["parts"] == parts


def test_an_approved_call_is_kept_for_a_continuation_or_in_the_last_message() -> None:
    approved = tool("c1", "approval-responded", approval={"id": "a", "approved": True})
    denied = tool("c2", "approval-responded", approval={"id": "b", "approved": False})
    older = [USER, assistant("a1", approved, denied), USER | {"id": "u2"}]
    kept, ids = repair_interrupted_tool_parts(
        older, client_tools=frozenset(), repair_approval_responded=False
    )
    assert ids == [] and kept == older
    repaired, ids = repair_interrupted_tool_parts(
        older, client_tools=frozenset(), repair_approval_responded=True
    )
    assert ids == ["c1", "c2"]
    assert repaired[1]["parts"][0]["errorText"] == APPROVED_NOT_RUN_TEXT
    assert repaired[1]["parts"][1]["state"] == "output-denied"
    last = [USER, assistant("a1", approved)]
    assert (
        repair_interrupted_tool_parts(
            last, client_tools=frozenset(), repair_approval_responded=True
        )[1]
        == []
    )


class AsksUser(Chat):
    def repair_interrupted_tool_part(self, part: dict[str, Any]) -> dict[str, Any]:
        return {"type": "text", "text": f"(unanswered: {part['toolCallId']})"}


async def test_the_next_turn_repairs_and_persists_before_the_model_runs(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"CHAT": AsksUser})
    stub = h.env.CHAT.getByName("room")
    a = await connect(stub, "a")
    orphan = assistant("a0", tool("c9", "input-streaming", name="ask_user"))
    a.send({"type": "cf_agent_chat_messages", "messages": [USER, orphan]})
    a.send(request("r1", "hi", "u2"))
    await eventually(lambda: a.done("r1"), what="the turn")
    response = await stub.fetch("http://doemu/agents/chat/room/get-messages")
    stored = json.loads(await response.text())
    assert stored[1]["parts"] == [{"type": "text", "text": "(unanswered: c9)"}]
    assert [m["id"] for m in stored][:3] == ["u1", "a0", "u2"]
