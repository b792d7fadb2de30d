"""``McpAgent`` under a real ``doemu dev``: the official ``mcp`` SDK's client (its
``streamable_http_client`` and ``ClientSession``, over real sockets) initializes, lists and calls
tools and reads a resource; the session's state survives an eviction (admin API) and a real
SIGKILL + restart, the client carrying on with the same ``Mcp-Session-Id``. Then agents' own MCP
client (``add_mcp_server`` in another agent of the same Worker) uses the same server — the two
halves of agents talking — and is restored after a SIGKILL.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from doemu.testing.devserver import DevServer, DevServerFactory

ROOT = Path(__file__).resolve().parent.parent
APP = Path(__file__).parent / "apps" / "mcp_agent"


@pytest.fixture
def server(tmp_path: Path, doemu_dev: DevServerFactory) -> DevServer:
    project = tmp_path / "app"
    shutil.copytree(APP, project, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    return doemu_dev(project, env={"PYTHONPATH": str(ROOT)})


def post(server: DevServer, path: str, body: Any) -> Any:
    answer = httpx.post(f"{server.url}{path}", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()


async def test_the_sdk_client_keeps_its_session_across_eviction_and_sigkill(
    server: DevServer,
) -> None:
    """1. initialize, list, call, read; 2. evict the session's object; 3. SIGKILL and restart;
    4. the same session (same id) answers with its state intact after each."""
    url = f"{server.url}/mcp"
    async with (
        streamable_http_client(url, terminate_on_close=False) as (read, write),
        ClientSession(read, write) as session,
    ):
        hello = await session.initialize()
        assert hello.server_info.name == "counter"
        assert hello.instructions == "A counter per session."
        tools = await session.list_tools()
        assert [t.name for t in tools.tools] == ["add"]
        assert (await session.call_tool("add", {"amount": 2})).structured_content == {"count": 2}
        assert (await session.read_resource("counter://value")).contents[0].text == "2"  # type: ignore[union-attr]

        (listed,) = _objects(server)  # one session, one object, named after the session
        assert listed["name"].startswith("streamable-http:") and len(listed["name"]) == 16 + 64
        async with httpx.AsyncClient(timeout=10) as http:
            evicted = await http.post(
                f"{server.url}/__doemu/api/objects/MCP_OBJECT/{listed['id']}/evict"
            )
        assert evicted.status_code == 200 and evicted.json()["evicted"] is True, evicted.text
        assert (await session.call_tool("add", {"amount": 3})).structured_content == {"count": 5}

        port = server.port
        await asyncio.to_thread(server.restart)  # SIGKILL, then a new process on the same state
        assert server.port == port, "the restart moved to another port: the client cannot follow"
        after = await session.call_tool("add", {"amount": 10})
        assert after.structured_content == {"count": 15}
        assert (await session.read_resource("counter://value")).contents[0].text == "15"  # type: ignore[union-attr]
        assert [o["id"] for o in _objects(server)] == [listed["id"]]  # the same session

    async with httpx.AsyncClient(timeout=10) as http:
        unknown = await http.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            timeout=10,
            headers={"accept": "application/json, text/event-stream", "mcp-session-id": "0" * 64},
        )
    assert unknown.status_code == 404
    assert unknown.json()["error"] == {"code": -32001, "message": "Session not found"}


def _objects(server: DevServer) -> list[dict[str, Any]]:
    """The objects of MCP_OBJECT, from the admin API."""
    answer = httpx.get(f"{server.url}/__doemu/api/objects?binding=MCP_OBJECT", timeout=10)
    return answer.json()  # type: ignore[no-any-return]


def test_an_agent_uses_the_mcp_agent_through_its_own_client(server: DevServer) -> None:
    """agents' client → agents' server: connect, discover, call with the session's state; after
    a SIGKILL the client reconnects (a new session) and calls again."""
    connected = post(server, "/agents/caller/c1/connect", {"url": f"{server.url}/mcp"})
    assert connected["state"] == "ready"
    server_id = connected["id"]
    info = connected["mcp"]["servers"][server_id]
    assert info["instructions"] == "A counter per session."
    assert [t["name"] for t in connected["mcp"]["tools"]] == ["add"]
    call = {"id": server_id, "tool": "add", "args": {"amount": 4}}
    assert post(server, "/agents/caller/c1/call", call) == {"result": {"count": 4}}
    assert post(server, "/agents/caller/c1/call", call) == {"result": {"count": 8}}

    server.restart()
    again = post(server, "/agents/caller/c1/call", call)
    assert again == {"result": {"count": 4}}  # restored: a new session, with its own state
