"""``McpAgent``: MCP's streamable HTTP served by one durable agent per session.

The wire is checked directly (in process, through the entry Worker), then two real clients
connect over a loopback socket: the official ``mcp`` SDK's (``streamable_http_client`` +
``ClientSession``) and agents' own (``add_mcp_server`` from another agent).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from agents.mcp import McpServer
from agents.mcp.server import schema_of
from agents.mcp_agent.routing import SESSION_PREFIX
from doemu.testing.plugin import HarnessFactory

from .mcp_agents import Caller, Counter, Default
from .servers import serve

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
BINDINGS = {"MCP_OBJECT": Counter, "Caller": Caller}


class Session:
    """A raw streamable-HTTP session over an in-process client."""

    def __init__(self, http: httpx.AsyncClient, path: str = "/mcp") -> None:
        self.http, self.path = http, path
        self.id: str | None = None
        self._next = 0

    async def post(self, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
        sent = {**ACCEPT, **({"mcp-session-id": self.id} if self.id else {}), **(headers or {})}
        raw = body if isinstance(body, str | bytes) else json.dumps(body)
        return await self.http.post(self.path, content=raw, headers=sent)

    async def request(self, method: str, params: Any = None) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next, "method": method}
        if params is not None:
            message["params"] = params
        answer = await self.post(message)
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("application/json")
        body: dict[str, Any] = answer.json()
        assert body["id"] == self._next
        return body

    async def initialize(self, version: str = "2025-06-18") -> dict[str, Any]:
        answer = await self.post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
        )
        assert answer.status_code == 200, answer.text
        self.id = answer.headers["mcp-session-id"]
        notified = await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert notified.status_code == 202 and notified.content == b""
        return answer.json()  # type: ignore[no-any-return]


async def test_initialize_lists_and_calls_with_state_per_session(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness(BINDINGS)
    async with h.client(Default) as http:
        one, two = Session(http), Session(http)
        hello = await one.initialize()
        await two.initialize("1999-01-01")  # unknown: answered with the latest
        assert one.id and two.id and one.id != two.id and len(one.id) == 64
        result = hello["result"]
        assert result["protocolVersion"] == "2025-06-18"
        assert result["serverInfo"] == {"name": "counter", "version": "1.2.3"}
        assert result["instructions"] == "A counter per session."
        assert set(result["capabilities"]) == {"tools", "resources", "prompts"}

        tools = {t["name"]: t for t in (await one.request("tools/list"))["result"]["tools"]}
        assert sorted(tools) == ["add", "explode", "whoami"]
        assert tools["add"]["inputSchema"] == {
            "type": "object",
            "required": ["amount"],
            "properties": {"amount": {"type": "integer"}},
        }
        assert tools["whoami"]["description"] == "Who the Worker said this session is (its props)."

        add = await one.request("tools/call", {"name": "add", "arguments": {"amount": 2}})
        assert add["result"]["structuredContent"] == {"count": 2}
        assert json.loads(add["result"]["content"][0]["text"]) == {"count": 2}
        await one.request("tools/call", {"name": "add", "arguments": {"amount": 3}})
        other = await two.request("tools/call", {"name": "add", "arguments": {"amount": 10}})
        assert other["result"]["structuredContent"] == {"count": 10}  # its own state

        read = await one.request("resources/read", {"uri": "counter://value"})
        assert read["result"]["contents"] == [
            {"uri": "counter://value", "mimeType": "text/plain", "text": "5"}
        ]
        listed = (await one.request("resources/list"))["result"]["resources"]
        assert listed == [
            {
                "uri": "counter://value",
                "name": "value",
                "description": "The counter",
                "mimeType": "text/plain",
            }
        ]
        prompts = (await one.request("prompts/list"))["result"]["prompts"]
        assert prompts[0]["arguments"] == [
            {"name": "topic", "required": True},
            {"name": "tone", "required": False},
        ]
        prompt = await one.request("prompts/get", {"name": "ask", "arguments": {"topic": "cats"}})
        assert prompt["result"]["messages"] == [
            {
                "role": "user",
                "content": {"type": "text", "text": "Tell me about cats (plain); the count is 5."},
            }
        ]
        assert (await one.request("ping"))["result"] == {}
        who = await one.request("tools/call", {"name": "whoami", "arguments": {}})
        assert who["result"]["content"] == [{"type": "text", "text": "ada"}]  # routing's props


async def test_errors_are_json_rpc_errors_and_tool_failures_are_results(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness(BINDINGS)
    async with h.client(Default) as http:
        s = Session(http)
        await s.initialize()
        unknown = await s.request("nope/nothing")
        assert unknown["error"]["code"] == -32601
        no_tool = await s.request("tools/call", {"name": "missing", "arguments": {}})
        assert no_tool["error"] == {"code": -32602, "message": "Unknown tool: missing"}
        no_name = await s.request("tools/call", {"arguments": {}})
        assert no_name["error"]["code"] == -32602
        bad_args = await s.request("tools/call", {"name": "add", "arguments": {"amount": "x"}})
        assert bad_args["result"]["isError"] is True
        assert "Invalid arguments for tool add" in bad_args["result"]["content"][0]["text"]
        failed = await s.request("tools/call", {"name": "explode"})
        assert failed["result"] == {
            "content": [{"type": "text", "text": "the tool exploded"}],
            "isError": True,
        }
        missing = await s.request("resources/read", {"uri": "counter://nope"})
        assert missing["error"] == {
            "code": -32002,
            "message": "Resource not found",
            "data": {"uri": "counter://nope"},
        }
        no_topic = await s.request("prompts/get", {"name": "ask", "arguments": {}})
        assert no_topic["error"]["code"] == -32602 and "topic" in no_topic["error"]["message"]

        batch = await s.post(
            [
                {"jsonrpc": "2.0", "id": "a", "method": "ping"},
                {"jsonrpc": "2.0", "method": "notifications/cancelled"},
                {"jsonrpc": "2.0", "id": "b", "method": "tools/list"},
            ]
        )
        assert [m["id"] for m in batch.json()] == ["a", "b"]

        async def refused(answer: httpx.Response, status: int, code: int, text: str) -> None:
            assert answer.status_code == status, answer.text
            body = answer.json()
            assert (body["id"], body["error"]["code"]) == (None, code)
            assert text in body["error"]["message"]

        await refused(await s.post("{not json"), 400, -32700, "Parse error: Invalid JSON")
        await refused(await s.post({"id": 1}), 400, -32700, "Invalid JSON-RPC message")
        await refused(await s.post("[]"), 400, -32700, "Invalid JSON-RPC message")
        await refused(
            await s.post(
                {"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"accept": "application/json"}
            ),
            406,
            -32000,
            "Not Acceptable",
        )
        await refused(
            await s.post(
                {"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"content-type": "text/plain"}
            ),
            415,
            -32000,
            "Unsupported Media Type",
        )
        await refused(
            await s.post(
                {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                {"mcp-protocol-version": "1999-01-01"},
            ),
            400,
            -32000,
            "Unsupported protocol version: 1999-01-01",
        )
        await refused(
            await s.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
            400,
            -32600,
            "must not include a sessionId",
        )
        stranger = Session(http)
        await refused(
            await stranger.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
            400,
            -32000,
            "Mcp-Session-Id header is required",
        )
        stranger.id = "f" * 64
        await refused(
            await stranger.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
            404,
            -32001,
            "Session not found",
        )
        stranger.id = "bad id with spaces"
        await refused(
            await stranger.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
            404,
            -32001,
            "Session not found",
        )

        stream = await http.get("/mcp", headers={**ACCEPT, "mcp-session-id": str(s.id)})
        assert stream.status_code == 405 and stream.headers["allow"] == "POST, DELETE"
        ended = await http.delete("/mcp", headers={"mcp-session-id": str(s.id)})
        assert ended.status_code == 204
        await refused(
            await s.post({"jsonrpc": "2.0", "id": 9, "method": "ping"}),
            404,
            -32001,
            "Session not found",
        )
        again = await http.delete("/mcp", headers={"mcp-session-id": str(s.id)})
        assert again.status_code == 404

        fresh = Session(http)  # the server keeps serving
        assert (await fresh.initialize())["result"]["serverInfo"]["name"] == "counter"


async def test_session_state_and_props_survive_eviction(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness(BINDINGS)
    async with h.client(Default) as http:
        s = Session(http)
        await s.initialize()
        await s.request("tools/call", {"name": "add", "arguments": {"amount": 4}})
        assert await h.evict("MCP_OBJECT", SESSION_PREFIX + str(s.id))
        again = await s.request("tools/call", {"name": "add", "arguments": {"amount": 1}})
        assert again["result"]["structuredContent"] == {"count": 5}

        bare = Session(http, "/bare")  # McpAgent.serve: no props, and its own sessions
        await bare.initialize()
        who = await bare.request("tools/call", {"name": "whoami"})
        assert who["result"]["content"][0]["text"] == "nobody"

        # props are kept: after an eviction a request through /bare (no props) still sees them
        assert await h.evict("MCP_OBJECT", SESSION_PREFIX + str(s.id))
        s.path = "/bare"
        who = await s.request("tools/call", {"name": "whoami"})
        assert who["result"]["content"][0]["text"] == "ada"
        off_path = await http.post("/bare/else", headers=ACCEPT, content="{}")
        assert off_path.status_code == 404


async def test_the_official_sdk_client_and_the_agents_client_use_it(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness(BINDINGS)
    async with serve(h.runtime, entry=Default) as served:
        url = f"{served.url}/mcp"
        async with (
            streamable_http_client(url) as (read, write),
            ClientSession(read, write) as session,
        ):
            hello = await session.initialize()
            assert hello.server_info.name == "counter"
            tools = await session.list_tools()
            assert sorted(t.name for t in tools.tools) == ["add", "explode", "whoami"]
            first = await session.call_tool("add", {"amount": 7})
            assert first.structured_content == {"count": 7} and not first.is_error
            failed = await session.call_tool("explode", {})
            assert failed.is_error
            read_back = await session.read_resource("counter://value")
            assert read_back.contents[0].text == "7"  # type: ignore[union-attr]
            prompt = await session.get_prompt("ask", {"topic": "dogs", "tone": "warm"})
            assert "dogs (warm)" in prompt.messages[0].content.text  # type: ignore[union-attr]

        caller = h.env.Caller.getByName(unique_name("caller"))
        connected = await caller.connect(url)
        assert connected["state"] == "ready"
        server_id = connected["id"]
        info = connected["servers"]["servers"][server_id]
        assert info["instructions"] == "A counter per session."
        assert sorted(t["name"] for t in connected["servers"]["tools"]) == [
            "add",
            "explode",
            "whoami",
        ]
        assert await caller.call(server_id, "add", {"amount": 2}) == {"ok": {"count": 2}}
        assert await caller.call(server_id, "add", {"amount": 2}) == {"ok": {"count": 4}}
        assert await caller.call(server_id, "whoami", {}) == {"ok": "ada"}
        failed_call = await caller.call(server_id, "explode", {})
        assert failed_call == {"tool_error": "the tool exploded"}


def test_the_registry_derives_schemas_and_refuses_bad_registrations() -> None:
    def f(name: str, n: int, ratio: float = 1.0, tags: list[str] | None = None) -> None: ...

    assert schema_of(f) == {
        "type": "object",
        "required": ["name", "n"],
        "properties": {
            "name": {"type": "string"},
            "n": {"type": "integer"},
            "ratio": {"type": "number"},
            "tags": {},
        },
    }
    server = McpServer("s")
    with pytest.raises(Exception, match="tool name must match"):
        server.tool("bad name")(f)
    with pytest.raises(Exception, match="JSON Schema object"):
        server.tool("ok", input_schema={"type": "string"})(f)
    with pytest.raises(Exception, match="URI with a scheme"):
        server.resource("no-scheme")(f)
