"""Issue 32's builders' features on doemu and on workerd, the same client script:
``on_start(props)`` from ``route_agent_request(props=...)``, ``schedule_destroy()`` torn down by
the alarm, CORS headers added to an agent's response, and the MCP client (``workers.fetch`` to
the official SDK's server on loopback).

App: ``e2e/apps/builders`` (its Think agent needs a model and is left to
``e2e/test_builders_surface.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.mcp_server import McpTestServer
from tests.polling import eventually_sync

from ..targets import AGENTS_VENDOR, ROOT, TargetServer
from .conftest import running

APP = ROOT / "e2e" / "apps" / "builders"


@pytest.fixture(scope="module")
def builders(serve: Any, target: str) -> TargetServer:
    server: TargetServer = serve(APP, vendor=AGENTS_VENDOR)
    return server


@pytest.fixture
def mcp() -> Iterator[McpTestServer]:
    with McpTestServer() as server:
        yield server


def test_props_reach_on_start_and_a_scheduled_destroy_tears_down(
    builders: TargetServer, target: str
) -> None:
    url = f"{running(builders).url}/agents/notes/props-{target}"
    answer = httpx.post(f"{url}/add?props=1", content=b"note", timeout=30)
    assert answer.json() == ['props:{"via": "routing"}', "note"]
    assert httpx.post(f"{url}/condemn", timeout=30).status_code == 200
    eventually_sync(
        lambda: httpx.get(f"{url}/list", timeout=30).json() == [],
        within=20, what="the teardown by the alarm", ignoring=(httpx.HTTPError, ValueError),
    )  # fmt: skip


def test_cors_headers_join_the_agents_own(builders: TargetServer, target: str) -> None:
    """``route_agent_request(cors=True)`` rebuilds the response with its headers: on Cloudflare
    ``response.headers`` is an ``HTTPMessage`` that ``Response(headers=…)`` refuses."""
    url = f"{running(builders).url}/agents/notes/cors-{target}"
    answer = httpx.post(f"{url}/add?cors=1", content=b"x", timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json() == ["x"]
    assert answer.headers["access-control-allow-origin"] == "*"
    assert answer.headers["content-type"].startswith("application/json")


def test_the_mcp_client_adds_discovers_and_calls(
    builders: TargetServer, target: str, mcp: McpTestServer
) -> None:
    url = f"{running(builders).url}/agents/tools/mcp-{target}"
    added = httpx.post(f"{url}/add", json={"name": "arith", "url": mcp.url}, timeout=30).json()
    assert added["state"] == "ready", added
    state = httpx.get(f"{url}/servers", timeout=30).json()
    assert sorted(t["name"] for t in state["tools"]) == ["add", "explode", "greet", "tick"]
    call = {"id": added["id"], "tool": "add", "args": {"a": 2, "b": 3}}
    assert httpx.post(f"{url}/call", json=call, timeout=30).json() == {"result": {"sum": 5}}


def test_an_oauth_mcp_server_is_authorized_at_the_callback_and_restored_after_sigkill(
    builders: TargetServer, target: str
) -> None:
    """The SDK's OAuth flow against the official SDK's authorization server: ``add`` answers
    ``authenticating`` with the authorization URL; a browser (httpx following redirects) goes
    there, is sent back to ``/agents/tools/<name>/callback``, which trades the code for tokens
    and redirects to the origin; the server becomes ready. After a SIGKILL the stored token
    connects again: no second authorization."""
    name = f"oauth-{target}"
    url = f"{running(builders).url}/agents/tools/{name}"
    with McpTestServer(oauth=True) as secured:
        assert secured.oauth is not None
        added = httpx.post(f"{url}/add", json={"name": "secured", "url": secured.url}, timeout=30)
        answer = added.json()
        assert answer["state"] == "authenticating", answer
        assert answer["authUrl"].startswith(f"http://127.0.0.1:{secured.port}/authorize?")
        assert (
            httpx.get(f"{url}/servers", timeout=30).json()["servers"][answer["id"]]["auth_url"]
            == answer["authUrl"]
        )

        browser = httpx.get(answer["authUrl"], follow_redirects=True, timeout=30)
        visited = [str(step.url).split("?", 1)[0] for step in browser.history]
        assert visited[1] == f"{url}/callback", visited
        assert browser.history[-1].headers["location"].rstrip("/") == running(builders).url
        assert (secured.oauth.registrations, secured.oauth.exchanges) == (1, 1)

        def ready() -> dict[str, Any]:
            state: dict[str, Any] = httpx.get(f"{url}/servers", timeout=30).json()
            assert state["servers"][answer["id"]]["state"] == "ready", state
            return state

        state = eventually_sync(ready, within=20, what="the connection after the callback",
                                ignoring=(AssertionError, httpx.HTTPError))  # fmt: skip
        assert sorted(t["name"] for t in state["tools"]) == ["add", "explode", "greet", "tick"]
        call = {"id": answer["id"], "tool": "add", "args": {"a": 20, "b": 22}}
        assert httpx.post(f"{url}/call", json=call, timeout=30).json() == {"result": {"sum": 42}}
        stored = builders.sql("Tools", name, "SELECT tokens FROM cf_agents_mcp_oauth")
        assert stored and "access_token" in stored[0]["tokens"]

        builders.kill()
        builders.restart()
        eventually_sync(ready, within=30, what="the connection restored with the stored token",
                        ignoring=(AssertionError, httpx.HTTPError))  # fmt: skip
        assert httpx.post(f"{url}/call", json=call, timeout=30).json() == {"result": {"sum": 42}}
        assert (secured.oauth.authorizations, secured.oauth.exchanges) == (1, 1)

        replayed = httpx.get(browser.history[1].url, timeout=30)  # the same code and state again
        assert replayed.status_code == 302
        assert secured.oauth.exchanges == 1  # refused before the token endpoint
