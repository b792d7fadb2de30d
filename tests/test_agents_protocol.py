"""The Agents SDK wire protocol over a real server: routing, connect frames, state sync, RPC.

A real uvicorn serves a Runtime whose entry worker calls ``route_agent_request``; clients are the
``websockets`` asyncio client and ``httpx``, so every frame crosses a real socket.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from workers import Response, WorkerEntrypoint

from agents import Agent
from agents.core.connections import Connection, ConnectionContext
from agents.core.protocol import camel_case_to_kebab_case
from agents.routing import route_agent_request
from agents.rpc import CallableMetadata, StreamingResponse, callable
from doemu.runtime import ClassSpec, Runtime

from .servers import Served, serve

INITIAL = {"messages": []}


class ProtoAgent(Agent):
    initial_state = INITIAL

    def should_connection_be_readonly(self, connection: Connection, ctx: ConnectionContext) -> bool:
        return "readonly=1" in str(ctx.request.url)

    def get_connection_tags(self, connection: Connection, ctx: ConnectionContext) -> list[str]:
        return ["viewer"] if "readonly=1" in str(ctx.request.url) else ["editor"]

    async def on_request(self, request: Any) -> Any:
        body = await request.text() if request.method == "POST" else None
        return Response.json(
            {"agent": self.name, "method": request.method, "url": request.url, "body": body}
        )

    async def on_message(self, connection: Connection, message: Any) -> None:
        if isinstance(message, bytes):  # binary frames are never protocol frames
            self.broadcast(bytes(message), without=[connection.id])
            return
        text = str(message)
        if text.startswith("remember:"):
            connection.set_state({"memo": text.removeprefix("remember:")})
            connection.send("remembered")
        elif text == "recall":
            connection.send(json.dumps({"id": connection.id, "memo": connection.state}))
        elif text.startswith("shout:"):
            self.broadcast(text.removeprefix("shout:"), without=[connection.id])
        elif text.startswith("count:"):
            tag = text.removeprefix("count:")
            connection.send(f"{tag}={len(self.get_connections(tag))}")

    @callable()
    async def add(self, a: int, b: int) -> int:
        return a + b

    @callable(description="sync methods are callable too")
    def echo(self, value: Any) -> Any:
        return {"echo": value, "state": self.state}

    @callable()
    async def fail(self) -> None:
        raise ValueError("boom")

    async def not_exposed(self) -> str:
        return "secret"

    async def on_close(
        self, connection: Connection, code: int, reason: str, was_clean: bool
    ) -> None:
        self.sql("CREATE TABLE IF NOT EXISTS closes (id TEXT, code INT, reason TEXT, clean INT)")
        self.sql(
            "INSERT INTO closes VALUES (?, ?, ?, ?)", connection.id, code, reason, int(was_clean)
        )

    @callable()
    async def closes(self) -> list[list[Any]]:
        if not self.sql("SELECT name FROM sqlite_master WHERE name = 'closes'"):
            return []
        return [list(row.values()) for row in self.sql("SELECT * FROM closes")]

    @callable()
    async def bump(self) -> Any:
        self.set_state({"messages": [*self.state["messages"], "bump"]})
        return self.state

    @callable(streaming=True)
    async def count(self, stream: StreamingResponse, n: int) -> None:
        for i in range(n):
            stream.send(i)
        stream.end({"total": n})

    @callable(streaming=True)
    async def broken(self, stream: StreamingResponse) -> None:
        stream.send("first")
        raise RuntimeError("stream broke")


class LoudAgent(Agent):
    """Bound as ``LOUD_AGENT``: the SDK maps an all-caps binding to ``loud-agent``."""


class Default(WorkerEntrypoint):
    async def fetch(self, request: Any) -> Any:
        routed = await route_agent_request(request, self.env)
        return routed if routed is not None else Response("no such route", status=404)


@pytest.fixture
async def srv(tmp_path: Path) -> AsyncIterator[Served]:
    runtime = Runtime(
        worker_name="agents-proto",
        classes={"ProtoAgent": ClassSpec(ProtoAgent), "LoudAgent": ClassSpec(LoudAgent)},
        bindings={"ProtoAgent": "ProtoAgent", "LOUD_AGENT": "LoudAgent"},
        persist_dir=tmp_path / "state",
    )
    async with serve(runtime, entry=Default) as served:
        yield served


async def recv(ws: ClientConnection) -> Any:
    raw = await asyncio.wait_for(ws.recv(), timeout=5)
    try:
        return json.loads(raw)
    except ValueError:
        return raw


async def recv_until(ws: ClientConnection, predicate: Callable[[Any], bool]) -> list[Any]:
    """Frames up to and including the first one matching ``predicate``."""
    seen: list[Any] = []
    while True:
        frame = await recv(ws)
        seen.append(frame)
        if predicate(frame):
            return seen


def is_rpc(rpc_id: str) -> Callable[[Any], bool]:
    return lambda f: isinstance(f, dict) and f.get("type") == "rpc" and f.get("id") == rpc_id


async def open_agent(srv: Served, name: str, query: str = "") -> ClientConnection:
    """Connect and consume the connect frames (identity, state, MCP servers)."""
    ws = await connect(f"{srv.ws_url}/agents/proto-agent/{name}{query}")
    await recv_until(ws, lambda f: isinstance(f, dict) and f["type"] == "cf_agent_mcp_servers")
    return ws


async def call(ws: ClientConnection, rpc_id: str, method: str, *args: Any) -> list[Any]:
    await ws.send(json.dumps({"type": "rpc", "id": rpc_id, "method": method, "args": list(args)}))
    return await recv_until(ws, lambda f: is_rpc(rpc_id)(f) and f.get("done", True) is not False)


async def test_connect_sends_identity_then_state(srv: Served, unique_name: Any) -> None:
    name = unique_name("hello")
    async with connect(f"{srv.ws_url}/agents/proto-agent/{name}") as ws:
        frames = [await recv(ws) for _ in range(3)]
    assert frames == [
        {"type": "cf_agent_identity", "name": name, "agent": "proto-agent", "stateFollows": True},
        {"type": "cf_agent_state", "state": INITIAL},
        {
            "mcp": {"prompts": [], "resources": [], "servers": {}, "tools": []},
            "type": "cf_agent_mcp_servers",
        },
    ]


async def test_without_state_identity_has_no_state_follows(srv: Served, unique_name: Any) -> None:
    name = unique_name("loud")
    async with connect(f"{srv.ws_url}/agents/loud-agent/{name}") as ws:
        first, second = await recv(ws), await recv(ws)
    assert first == {"type": "cf_agent_identity", "name": name, "agent": "loud-agent"}
    assert second["type"] == "cf_agent_mcp_servers"


async def test_client_state_is_persisted_and_broadcast_to_others(
    srv: Served, unique_name: Any
) -> None:
    name = unique_name("sync")
    a = await open_agent(srv, name)
    b = await open_agent(srv, name)
    new_state = {"messages": ["from a"]}
    await a.send(json.dumps({"type": "cf_agent_state", "state": new_state}))
    assert await recv(b) == {"type": "cf_agent_state", "state": new_state}
    # The sender is not echoed: the next frame it gets is the answer to a later call.
    assert await call(a, "r1", "echo", 1) == [
        {
            "done": True,
            "id": "r1",
            "result": {"echo": 1, "state": new_state},
            "success": True,
            "type": "rpc",
        }
    ]
    await a.close()
    await b.close()
    await srv.control.evict("ProtoAgent", name)
    async with connect(f"{srv.ws_url}/agents/proto-agent/{name}") as c:
        frames = [await recv(c), await recv(c)]
    assert frames[1] == {"type": "cf_agent_state", "state": new_state}


async def test_readonly_connection_is_refused(srv: Served, unique_name: Any) -> None:
    name = unique_name("readonly")
    writer = await open_agent(srv, name)
    viewer = await open_agent(srv, name, "?readonly=1")
    await viewer.send(json.dumps({"type": "cf_agent_state", "state": {"messages": ["nope"]}}))
    assert await recv(viewer) == {"type": "cf_agent_state_error", "error": "Connection is readonly"}
    await writer.send("count:viewer")
    assert await recv(writer) == "viewer=1"  # the writer saw no state frame before this answer
    assert (await call(writer, "r2", "echo", None))[0]["result"]["state"] == INITIAL
    # Server-side set_state on behalf of a readonly connection is refused as well.
    assert await call(viewer, "r3", "bump") == [
        {"error": "Connection is readonly", "id": "r3", "success": False, "type": "rpc"}
    ]
    # A server-side change reaches every connection, the caller included (before its answer).
    bumped = {"messages": ["bump"]}
    assert await call(writer, "r4", "bump") == [
        {"type": "cf_agent_state", "state": bumped},
        {"done": True, "id": "r4", "result": bumped, "success": True, "type": "rpc"},
    ]
    assert await recv(viewer) == {"type": "cf_agent_state", "state": {"messages": ["bump"]}}
    await writer.close()
    await viewer.close()


async def test_rpc_success_error_and_unknown_methods(srv: Served, unique_name: Any) -> None:
    ws = await open_agent(srv, unique_name("rpc"))
    assert await call(ws, "a", "add", 2, 3) == [
        {"done": True, "id": "a", "result": 5, "success": True, "type": "rpc"}
    ]
    assert await call(ws, "b", "fail") == [
        {"error": "boom", "id": "b", "success": False, "type": "rpc"}
    ]
    assert (await call(ws, "c", "nope"))[0]["error"] == "Method nope does not exist"
    assert (await call(ws, "d", "not_exposed"))[0]["error"] == "Method not_exposed is not callable"
    assert (await call(ws, "e", "state"))[0]["error"] == "Method state does not exist"
    assert (await call(ws, "f", "add", 1))[0]["success"] is False  # wrong arity is an error too
    await ws.close()


async def test_streaming_rpc_sends_chunks_then_done(srv: Served, unique_name: Any) -> None:
    ws = await open_agent(srv, unique_name("stream"))
    frames = await call(ws, "s", "count", 3)
    assert frames == [
        {"done": False, "id": "s", "result": 0, "success": True, "type": "rpc"},
        {"done": False, "id": "s", "result": 1, "success": True, "type": "rpc"},
        {"done": False, "id": "s", "result": 2, "success": True, "type": "rpc"},
        {"done": True, "id": "s", "result": {"total": 3}, "success": True, "type": "rpc"},
    ]
    frames = await call(ws, "t", "broken")
    assert frames == [
        {"done": False, "id": "t", "result": "first", "success": True, "type": "rpc"},
        {"error": "stream broke", "id": "t", "success": False, "type": "rpc"},
    ]
    await ws.close()


async def test_connection_state_and_id_survive_eviction(srv: Served, unique_name: Any) -> None:
    name = unique_name("conn-state")
    ws = await connect(f"{srv.ws_url}/agents/proto-agent/{name}?_pk=client-chosen-id")
    await recv_until(ws, lambda f: isinstance(f, dict) and f["type"] == "cf_agent_mcp_servers")
    await ws.send("remember:blue")
    assert await recv(ws) == "remembered"
    host = srv.runtime.host("ProtoAgent", name)
    await srv.control.evict("ProtoAgent", name)
    assert not host.live
    await ws.send("recall")
    assert await recv(ws) == {"id": "client-chosen-id", "memo": {"memo": "blue"}}
    await ws.close()


async def test_broadcast_skips_excluded_connections(srv: Served, unique_name: Any) -> None:
    name = unique_name("shout")
    a, b, c = [await open_agent(srv, name) for _ in range(3)]
    await a.send("shout:hi all")
    assert await recv(b) == "hi all"
    assert await recv(c) == "hi all"
    await a.send(b"\x00\xffbinary")
    assert await recv(b) == b"\x00\xffbinary"
    assert await recv(c) == b"\x00\xffbinary"
    await a.send("count:editor")
    assert await recv(a) == "editor=3"  # a got no copy of its own shout
    for ws in (a, b, c):
        await ws.close()


async def test_http_requests_reach_on_request(srv: Served, unique_name: Any) -> None:
    name = unique_name("http")
    async with httpx.AsyncClient(base_url=srv.url) as http:
        got = await http.post(f"/agents/proto-agent/{name}/sub/path?x=1", content="payload")
        assert got.status_code == 200
        assert got.json() == {
            "agent": name,
            "method": "POST",
            "url": f"{srv.url}/agents/proto-agent/{name}/sub/path?x=1",
            "body": "payload",
        }
        default = await http.get(f"/agents/loud-agent/{unique_name('plain')}")
        assert (default.status_code, default.text) == (404, "Not implemented")


async def test_routing_by_kebab_case_and_unknown_agents(srv: Served, unique_name: Any) -> None:
    async with httpx.AsyncClient(base_url=srv.url) as http:
        wrong_case = await http.get(f"/agents/ProtoAgent/{unique_name('case')}")
        unknown = await http.get("/agents/no-such-agent/x")
        outside = await http.get("/elsewhere")
        too_short = await http.get("/agents/proto-agent")
    # An agent path naming no binding is the SDK's 400; anything else falls through to 404.
    assert (wrong_case.status_code, wrong_case.text) == (400, "Invalid request")
    assert (unknown.status_code, unknown.text) == (400, "Invalid request")
    assert (outside.status_code, outside.text) == (404, "no such route")
    assert (too_short.status_code, too_short.text) == (404, "no such route")


def test_callable_methods_are_introspectable() -> None:
    agent = object.__new__(ProtoAgent)  # introspection needs no activation
    methods = agent.get_callable_methods()
    assert sorted(methods) == ["add", "broken", "bump", "closes", "count", "echo", "fail"]
    assert methods["count"] == CallableMetadata(streaming=True)
    assert methods["echo"].description == "sync methods are callable too"


@pytest.mark.parametrize(
    ("name", "kebab"),
    [
        ("MyAgent", "my-agent"),
        ("myAgent", "my-agent"),
        ("MY_AGENT", "my-agent"),
        ("ProtoAgent", "proto-agent"),
        ("Chat_Agent_", "chat--agent"),
        ("agent", "agent"),
    ],
)
def test_kebab_case_matches_the_sdk(name: str, kebab: str) -> None:
    assert camel_case_to_kebab_case(name) == kebab


async def test_on_close_sees_code_reason_and_connection(srv: Served, unique_name: Any) -> None:
    name = unique_name("close")
    leaving = await connect(f"{srv.ws_url}/agents/proto-agent/{name}?_pk=leaving")
    await leaving.close(4001, "bye now")
    observer = await open_agent(srv, name)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5
    rows: list[Any] = []
    while not rows and loop.time() < deadline:
        rows = (await call(observer, f"c{loop.time()}", "closes"))[-1]["result"]
    assert rows == [["leaving", 4001, "bye now", 1]]
    await observer.close()
