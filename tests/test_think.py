"""``Think`` in process, on doemu's fake model server (OpenAI chat completions on a real socket)
and a real MCP server: its definition, workspace tools, MCP tools, compaction between turns,
and a parent calling a child's ``chat()`` over RPC.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from agents.providers import OpenAIChatCompletions, Provider, Tool
from agents.think import Think, WorkspaceError
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from doemu.testing.plugin import HarnessFactory

from .mcp_server import McpTestServer


async def shout(args: dict[str, Any], ctx: Any) -> str:
    return str(args.get("text", "")).upper()


class Helper(Think):
    system = "You are terse."
    tools: ClassVar[list[Tool]] = [
        Tool("shout", "Upper-case a text.", {"type": "object"}, execute=shout)
    ]
    compact_after_messages = 4
    keep_recent_messages = 2

    def get_model(self) -> Provider:
        return OpenAIChatCompletions.from_env(self.env, model="m")

    async def ask(self, text: str) -> dict[str, Any]:
        return await self.chat(text)

    async def transcript(self) -> list[dict[str, Any]]:
        return self.messages

    async def files_now(self) -> dict[str, Any]:
        return {p: self.files.read(p) for p in self.files.list()}

    async def tool_names(self) -> list[str]:
        await self.mcp.wait_for_connections()
        return [t.name for t in self.all_tools()]

    async def add(self, url: str) -> dict[str, Any]:
        return await self.add_mcp_server("tools", url)

    async def pending_compactions(self) -> int:
        return len([s for s in self.get_schedules() if s.callback == "compact_session"])


class Parent(Helper):
    async def delegate(self, text: str) -> dict[str, Any]:
        child = self.env.HELPER.getByName(f"{self.name}-child")
        result: dict[str, Any] = await child.chat(text)
        return result


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(api_key="test-key") as server:
        yield server


def env_for(llm: FakeLLM) -> dict[str, str]:
    return {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": f"{llm.url}/v1"}


def texts(messages: list[dict[str, Any]]) -> list[str]:
    return ["".join(p.get("text", "") for p in m["parts"] if p["type"] == "text") for m in messages]


async def test_a_turn_uses_the_system_prompt_own_tools_and_the_workspace(
    doemu_harness: HarnessFactory, unique_name: Any, llm: FakeLLM
) -> None:
    llm.script(
        Reply(ToolUse("write_file", {"path": "notes/a.txt", "content": "alpha"})),
        Reply(ToolUse("shout", {"text": "done"})),
        Reply(Text("Saved.")),
    )
    h = await doemu_harness({"HELPER": Helper}, vars=env_for(llm))
    stub = h.env.HELPER.getByName(unique_name("helper"))
    answer = await stub.ask("save alpha")
    assert answer["status"] == "completed" and answer["text"] == "Saved."
    assert await stub.files_now() == {"notes/a.txt": "alpha"}
    requests = llm.requests("chat")
    first = requests[0]
    assert first["messages"][0] == {"role": "system", "content": "You are terse."}
    names = [t["function"]["name"] for t in first["tools"]]
    assert names[:5] == ["shout", "read_file", "write_file", "list_files", "delete_file"]
    tool_message = [m for m in requests[2]["messages"] if m["role"] == "tool"][-1]
    assert "DONE" in tool_message["content"]


async def test_workspace_paths_are_checked() -> None:
    from agents.think.workspace import _clean

    assert _clean("/a//b/c.txt") == "a/b/c.txt"
    for bad in ("", "../x", "a/./b", "a\\b", 3):
        with pytest.raises(WorkspaceError):
            _clean(bad)


async def test_mcp_tools_are_handed_to_the_model_and_called(
    doemu_harness: HarnessFactory, unique_name: Any, llm: FakeLLM
) -> None:
    with McpTestServer() as server:
        h = await doemu_harness({"HELPER": Helper}, vars=env_for(llm))
        stub = h.env.HELPER.getByName(unique_name("mcp"))
        server_id = (await stub.add(server.url))["id"]
        tool = f"tool_{server_id}_add"
        assert tool in await stub.tool_names()
        llm.script(Reply(ToolUse(tool, {"a": 20, "b": 22})), Reply(Text("42")))
        answer = await stub.ask("add 20 and 22")
        assert answer["text"] == "42"
        assert server.calls == ["add"]
        tool_message = [m for m in llm.requests("chat")[1]["messages"] if m["role"] == "tool"][-1]
        assert json.loads(tool_message["content"]) == {"sum": 42}


async def test_the_session_compacts_between_turns(
    doemu_harness: HarnessFactory, unique_name: Any, llm: FakeLLM
) -> None:
    h = await doemu_harness({"HELPER": Helper}, vars=env_for(llm))
    name = unique_name("compact")
    stub = h.env.HELPER.getByName(name)
    llm.script(Reply(Text("one")), Reply(Text("two")))
    await stub.ask("first")
    await stub.ask("second")  # 4 messages: not more than compact_after_messages
    assert await stub.pending_compactions() == 0
    llm.script(Reply(Text("three")), Reply(Text("They said first, second, third.")))
    await stub.ask("third")  # 6 > 4: a compaction is scheduled (durably), run by the alarm
    assert await stub.pending_compactions() == 1
    await h.advance(1000)
    messages = await stub.transcript()
    assert texts(messages) == [
        "Summary of the earlier conversation: They said first, second, third.",
        "third",
        "three",
    ]
    assert messages[0]["metadata"] == {"compaction": {"messages": 4}}
    summary_request = llm.requests("chat")[-1]
    assert "Summarize the conversation" in summary_request["messages"][0]["content"]
    assert "user: first" in summary_request["messages"][1]["content"]
    assert await stub.pending_compactions() == 0


async def test_a_parent_calls_a_child_think_over_rpc(
    doemu_harness: HarnessFactory, unique_name: Any, llm: FakeLLM
) -> None:
    h = await doemu_harness({"HELPER": Helper, "PARENT": Parent}, vars=env_for(llm))
    llm.script(Reply(Text("child says hi")))
    parent = h.env.PARENT.getByName(unique_name("parent"))
    answer = await parent.delegate("hello child")
    assert answer["status"] == "completed"
    assert answer["text"] == "child says hi"
    with pytest.raises(Exception, match="takes the message text"):
        await parent.ask("   ")
