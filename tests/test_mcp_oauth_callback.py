"""What the MCP OAuth callback answers the browser, and where the callback URL points.

``tests/test_mcp_oauth.py`` proves the flow with the defaults (host given, the SDK's path, a
redirect to the origin); here are the options of :mod:`agents.mcp.callback`: the host taken from
the request being handled, ``callback_path`` (a path the Worker routes to the agent itself), and
``configure_oauth_callback``'s success and error redirects and custom handler. The authorization
server is the official ``mcp`` SDK's (``tests/mcp_server.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from workers import Response, WorkerEntrypoint

from agents import Agent, route_agent_request
from doemu.testing.plugin import HarnessFactory

from .mcp_server import McpTestServer, consent

HOST = "http://testserver"  # the harness client's origin: where the browser comes back


class Redirecting(Agent):
    """Redirects the browser to its own pages, and is called back on a path of its choosing."""

    async def on_start(self) -> None:
        self.mcp.configure_oauth_callback(
            success_redirect="/done", error_redirect="https://app.example/oops"
        )

    async def on_request(self, request: Any) -> Any:
        body = await request.json()  # from a request: the callback's host is its origin
        added = await self.add_mcp_server(
            "secured", body["url"], callback_path=f"/oauth/{self.name}/back"
        )
        return Response.json(added)

    async def servers(self) -> dict[str, Any]:
        await self.mcp.wait_for_connections()
        return self.get_mcp_servers()


class Handled(Agent):
    """Answers the browser itself (the SDK's ``customHandler``)."""

    async def on_start(self) -> None:
        self.mcp.configure_oauth_callback(
            custom_handler=lambda result: Response.json({"handled": result}, status=201)
        )

    async def add(self, url: str) -> dict[str, Any]:
        return await self.add_mcp_server("secured", url, callback_host=HOST)


class Default(WorkerEntrypoint):
    async def fetch(self, request: Any) -> Any:
        path = httpx.URL(str(request.url)).path
        if path.startswith("/oauth/"):  # a callback_path outside /agents/: routed by the Worker
            return await self.env.Redirecting.getByName(path.split("/")[2]).fetch(request)
        return await route_agent_request(request, self.env)


async def routed(factory: HarnessFactory) -> Any:
    h = await factory({"Redirecting": Redirecting, "Handled": Handled})
    h.entry = Default
    return h


@pytest.fixture
def secured() -> Iterator[McpTestServer]:
    with McpTestServer(oauth=True) as server:
        yield server


async def add_from_a_request(h: Any, name: str, url: str) -> dict[str, Any]:
    async with h.client() as http:
        answer = await http.post(f"/agents/redirecting/{name}/add", json={"url": url})
    assert answer.status_code == 200, answer.text
    added: dict[str, Any] = answer.json()
    assert added["state"] == "authenticating"
    return added


async def test_the_host_comes_from_the_request_and_success_goes_to_its_redirect(
    doemu_harness: HarnessFactory, unique_name: Any, secured: McpTestServer
) -> None:
    h = await routed(doemu_harness)
    name = unique_name("redirecting")
    added = await add_from_a_request(h, name, secured.url)

    callback = consent(added["authUrl"])
    assert callback.startswith(f"{HOST}/oauth/{name}/back?code=")
    async with h.client() as http:
        answer = await http.get(callback.removeprefix(HOST))
    assert (answer.status_code, answer.headers["location"]) == (302, f"{HOST}/done")
    server = (await h.env.Redirecting.getByName(name).servers())["servers"][added["id"]]
    assert server["state"] == "ready"


async def test_a_denied_authorization_goes_to_the_error_redirect_with_its_reason(
    doemu_harness: HarnessFactory, unique_name: Any, secured: McpTestServer
) -> None:
    assert secured.oauth is not None
    h = await routed(doemu_harness)
    name = unique_name("refused")
    added = await add_from_a_request(h, name, secured.url)
    callback = httpx.URL(consent(added["authUrl"]))
    refusal = {"error": "access_denied", "state": callback.params["state"]}
    async with h.client() as http:
        answer = await http.get(callback.path, params=refusal)
    location = "https://app.example/oops?error=access_denied"
    assert (answer.status_code, answer.headers["location"]) == (302, location)
    assert secured.oauth.exchanges == 0


async def test_a_custom_handler_answers_the_browser_with_the_result(
    doemu_harness: HarnessFactory, unique_name: Any, secured: McpTestServer
) -> None:
    h = await routed(doemu_harness)
    name = unique_name("handled")
    added = await h.env.Handled.getByName(name).add(secured.url)
    callback = consent(added["authUrl"])
    assert callback.startswith(f"{HOST}/agents/handled/{name}/callback?code=")
    async with h.client() as http:
        answer = await http.get(callback.removeprefix(HOST))
    assert answer.status_code == 201
    assert answer.json() == {"handled": {"serverId": added["id"], "authSuccess": True}}
