"""OAuth for MCP servers that need it, against the official ``mcp`` SDK's authorization server.

The MCP server is real (uvicorn, the SDK's auth routes and token handler checking PKCE: see
``tests/mcp_server.py``); the agent's callback is reached through the harness's client, the way
a browser would after the authorization server's redirect (its ``Location`` header). The
end-to-end flow over real sockets, with a SIGKILL, is ``e2e/differential/test_builders.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from workers import WorkerEntrypoint

from agents import Agent, route_agent_request
from agents.errors import McpError
from doemu.testing.plugin import HarnessFactory

from .mcp_server import McpTestServer, consent

HOST = "http://testserver"  # the harness client's origin: where the browser comes back


class Secured(Agent):
    async def add(self, url: str, host: Any = HOST) -> dict[str, Any]:
        return await self.add_mcp_server("secured", url, callback_host=host)

    async def servers(self) -> dict[str, Any]:
        await self.mcp.wait_for_connections()
        return self.get_mcp_servers()

    async def call(self, server_id: str, tool: str, args: dict[str, Any]) -> Any:
        try:
            return {"ok": await self.mcp.call_tool(server_id, tool, args)}
        except McpError as exc:
            return {"error": str(exc)}

    async def remove(self, server_id: str) -> bool:
        return await self.remove_mcp_server(server_id)

    async def oauth_rows(self) -> list[dict[str, Any]]:
        return self.sql("SELECT server_id, tokens, nonce FROM cf_agents_mcp_oauth")


class Default(WorkerEntrypoint):
    async def fetch(self, request: Any) -> Any:
        return await route_agent_request(request, self.env)


async def routed(factory: HarnessFactory) -> Any:
    h = await factory({"Secured": Secured})
    h.entry = Default
    return h


@pytest.fixture
def secured() -> Iterator[McpTestServer]:
    with McpTestServer(oauth=True) as server:
        yield server


async def test_the_callback_authorizes_tokens_survive_eviction_and_are_refreshed(
    doemu_harness: HarnessFactory, unique_name: Any, secured: McpTestServer
) -> None:
    assert secured.oauth is not None
    h = await routed(doemu_harness)
    name = unique_name("secured")
    stub = h.env.Secured.getByName(name)
    added = await stub.add(secured.url)
    assert added["state"] == "authenticating"
    assert (await stub.servers())["servers"][added["id"]]["auth_url"] == added["authUrl"]
    assert await stub.add(secured.url) == added  # the same pending URL, not a second flow
    assert secured.oauth.registrations == 1

    callback = consent(added["authUrl"])
    assert callback.startswith(f"{HOST}/agents/secured/{name}/callback?code=")
    async with h.client() as http:
        answer = await http.get(callback.removeprefix(HOST))
    assert (answer.status_code, answer.headers["location"]) == (302, HOST)
    state = await stub.servers()
    assert state["servers"][added["id"]]["state"] == "ready"
    assert state["servers"][added["id"]]["auth_url"] is None
    assert sorted(t["name"] for t in state["tools"]) == ["add", "explode", "greet", "tick"]
    assert await stub.call(added["id"], "add", {"a": 1, "b": 2}) == {"ok": {"sum": 3}}

    await h.evict("Secured", name)
    assert (await stub.servers())["servers"][added["id"]]["state"] == "ready"
    secured.oauth.revoke_access_tokens()  # expired, say: the stored refresh token gets new ones
    assert await stub.call(added["id"], "greet", {"name": "Ada"}) == {"ok": "Hello, Ada!"}
    assert (secured.oauth.authorizations, secured.oauth.refreshes) == (1, 1)

    assert await stub.remove(added["id"]) is True
    assert await stub.oauth_rows() == []  # the tokens go with the server


async def test_a_forged_or_denied_callback_never_reaches_the_token_endpoint(
    doemu_harness: HarnessFactory, unique_name: Any, secured: McpTestServer
) -> None:
    assert secured.oauth is not None
    h = await routed(doemu_harness)
    name = unique_name("forged")
    stub = h.env.Secured.getByName(name)
    added = await stub.add(secured.url)
    callback = consent(added["authUrl"])
    base, _, query = callback.partition("?")
    path = base.removeprefix(HOST)
    params = dict(pair.split("=", 1) for pair in query.split("&"))
    nonce, server_id = params["state"].split(".")
    async with h.client() as http:
        forged = await http.get(
            path, params={"code": params["code"], "state": f"x{nonce}.{server_id}"}
        )
        assert forged.status_code == 302
        assert (await stub.servers())["servers"][added["id"]]["state"] == "authenticating"
        assert secured.oauth.exchanges == 0

        denied = await http.get(path, params={"error": "access_denied", "state": params["state"]})
        assert denied.status_code == 302
        server = (await stub.servers())["servers"][added["id"]]
        assert (server["state"], server["error"]) == ("failed", "access_denied")
        late = await http.get(path, params={"code": params["code"], "state": params["state"]})
        assert late.status_code == 302  # the state was consumed by the denial
        assert secured.oauth.exchanges == 0
        stray = await http.get(f"/agents/secured/{name}/callback", params={"state": "nope"})
        assert stray.status_code == 404  # not a callback: on_request's answer


async def test_without_a_callback_host_an_oauth_server_fails_clearly(
    doemu_harness: HarnessFactory, unique_name: Any, secured: McpTestServer
) -> None:
    h = await routed(doemu_harness)
    stub = h.env.Secured.getByName(unique_name("nohost"))
    added = await stub.add(secured.url, None)  # RPC: no request to take the host from
    assert added["state"] == "failed"
    error = (await stub.servers())["servers"][added["id"]]["error"]
    assert "HTTP 401" in error and "authorization" in error
