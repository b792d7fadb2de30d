"""The agent's MCP client against a real MCP server built with the official ``mcp`` SDK.

Every request crosses a real socket (``workers.fetch`` → uvicorn serving the SDK's streamable
HTTP app). Eviction is the harness's; a server restart forgets every session.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from workers import WorkerEntrypoint

from agents import Agent, route_agent_request
from agents.errors import McpError, McpToolError
from agents.mcp import ai_tool_name
from doemu.testing.plugin import HarnessFactory

from .mcp_server import McpTestServer


class Tools(Agent):
    async def add(self, name: str, url: str, headers: Any = None) -> dict[str, Any]:
        return await self.add_mcp_server(name, url, headers=headers)

    async def remove(self, server_id: str) -> bool:
        return await self.remove_mcp_server(server_id)

    async def servers(self) -> dict[str, Any]:
        await self.mcp.wait_for_connections()
        return self.get_mcp_servers()

    async def call(self, server_id: str, tool: str, args: dict[str, Any]) -> Any:
        try:
            return {"ok": await self.mcp.call_tool(server_id, tool, args)}
        except McpToolError as exc:
            return {"tool_error": str(exc)}
        except McpError as exc:
            return {"error": str(exc)}

    async def rows(self) -> list[dict[str, Any]]:
        return self.sql("SELECT id, name, server_url, server_options FROM cf_agents_mcp_servers")


class Default(WorkerEntrypoint):
    async def fetch(self, request: Any) -> Any:
        return await route_agent_request(request, self.env)


@pytest.fixture
def mcp_server() -> Iterator[McpTestServer]:
    with McpTestServer() as server:
        yield server


async def test_a_server_is_added_discovered_and_its_tools_called(
    doemu_harness: HarnessFactory, unique_name: Any, mcp_server: McpTestServer
) -> None:
    h = await doemu_harness({"Tools": Tools})
    stub = h.env.Tools.getByName(unique_name("tools"))
    added = await stub.add("arith", mcp_server.url)
    assert added["state"] == "ready"
    server_id = added["id"]
    state = await stub.servers()
    server = state["servers"][server_id]
    assert (server["name"], server["server_url"], server["state"]) == ("arith", mcp_server.url,
                                                                       "ready")  # fmt: skip
    assert server["instructions"] == "Arithmetic and greetings, for tests."
    assert "tools" in server["capabilities"]
    tools = {t["name"]: t for t in state["tools"]}
    assert sorted(tools) == ["add", "explode", "greet", "tick"]
    assert {t["serverId"] for t in state["tools"]} == {server_id}
    assert tools["add"]["inputSchema"]["required"] == ["a", "b"]

    assert await stub.call(server_id, "add", {"a": 2, "b": 3}) == {"ok": {"sum": 5}}
    assert await stub.call(server_id, "greet", {"name": "Ada"}) == {"ok": "Hello, Ada!"}
    failed = await stub.call(server_id, "explode", {})
    assert "the tool exploded" in failed["tool_error"]
    assert ai_tool_name("a-b-c", "add") == "tool_abc_add"

    again = await stub.add("arith", mcp_server.url)  # the same server: not added twice
    assert again == {"id": server_id, "state": "ready"}
    assert len(await stub.rows()) == 1


async def test_servers_are_restored_after_eviction_and_sessions_after_a_server_restart(
    doemu_harness: HarnessFactory, unique_name: Any, mcp_server: McpTestServer
) -> None:
    h = await doemu_harness({"Tools": Tools})
    name = unique_name("restore")
    stub = h.env.Tools.getByName(name)
    server_id = (await stub.add("arith", mcp_server.url))["id"]
    assert await stub.call(server_id, "tick", {}) == {"ok": "tick 1"}

    await h.evict("Tools", name)
    state = await stub.servers()  # a new instance: reconnected from the table
    assert state["servers"][server_id]["state"] == "ready"
    assert await stub.call(server_id, "tick", {}) == {"ok": "tick 2"}

    mcp_server.restart()  # every session forgotten: the client initializes again, once
    assert await stub.call(server_id, "tick", {}) == {"ok": "tick 3"}
    assert mcp_server.ticks == 3


async def test_headers_reach_the_server_and_are_kept_for_restores(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    with McpTestServer(token="s3cret") as server:
        h = await doemu_harness({"Tools": Tools})
        name = unique_name("auth")
        stub = h.env.Tools.getByName(name)
        refused = await stub.add("locked", server.url)
        assert refused["state"] == "failed"
        state = await stub.servers()
        assert "HTTP 401" in state["servers"][refused["id"]]["error"]
        assert state["tools"] == []
        assert await stub.remove(refused["id"]) is True

        added = await stub.add("locked", server.url, {"Authorization": "Bearer s3cret"})
        assert added["state"] == "ready"
        await h.evict("Tools", name)
        assert (await stub.servers())["servers"][added["id"]]["state"] == "ready"
        assert await stub.call(added["id"], "greet", {"name": "Bo"}) == {"ok": "Hello, Bo!"}


async def test_bad_servers_fail_clearly_and_the_agent_keeps_serving(
    doemu_harness: HarnessFactory, unique_name: Any, mcp_server: McpTestServer
) -> None:
    h = await doemu_harness({"Tools": Tools})
    stub = h.env.Tools.getByName(unique_name("bad"))
    with pytest.raises(Exception, match="url must be http"):
        await stub.add("x", "ftp://example")
    with pytest.raises(Exception, match="needs a name"):
        await stub.add("", mcp_server.url)
    gone = await stub.add("gone", "http://127.0.0.1:9/mcp")  # nothing listens on port 9
    assert gone["state"] == "failed"
    assert "could not be reached" in (await stub.servers())["servers"][gone["id"]]["error"]
    answer = await stub.call(gone["id"], "add", {"a": 1, "b": 1})
    assert "is failed" in answer["error"]
    assert "no MCP server" in (await stub.call("nope", "add", {}))["error"]
    ok = await stub.add("arith", mcp_server.url)  # the agent still works
    assert ok["state"] == "ready"


async def test_the_frame_carries_servers_on_connect_and_every_change(
    doemu_harness: HarnessFactory, unique_name: Any, mcp_server: McpTestServer
) -> None:
    h = await doemu_harness({"Tools": Tools})
    h.entry = Default
    name = unique_name("frames")
    async with h.websocket(f"/agents/tools/{name}") as ws:

        async def next_mcp() -> dict[str, Any]:
            while True:
                frame = json.loads(await ws.receive_text())
                if frame.get("type") == "cf_agent_mcp_servers":
                    return frame["mcp"]  # type: ignore[no-any-return]

        assert await next_mcp() == {"prompts": [], "resources": [], "servers": {}, "tools": []}
        stub = h.env.Tools.getByName(name)
        server_id = (await stub.add("arith", mcp_server.url))["id"]
        states = [(await next_mcp())["servers"][server_id]["state"]]
        while states[-1] != "ready":
            states.append((await next_mcp())["servers"][server_id]["state"])
        assert states[0] == "connecting"
        await stub.remove(server_id)
        assert (await next_mcp())["servers"] == {}

    await stub.add("arith", mcp_server.url)
    async with h.websocket(f"/agents/tools/{name}") as ws:
        frames = [json.loads(await ws.receive_text()) for _ in range(2)]
        (mcp,) = [f["mcp"] for f in frames if f["type"] == "cf_agent_mcp_servers"]
        assert [s["state"] for s in mcp["servers"].values()] == ["ready"]
        assert len(mcp["tools"]) == 4
