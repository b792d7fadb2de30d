"""The ``agents`` library on doemu and on workerd: routing, state over the SDK's protocol, RPC
— the same client script, the same frames (``e2e/apps/agent_app``, the app Cloudflare's own
``AgentClient`` drives in the Node interop test).

Two faults once kept these from running on Cloudflare's runtime at all (issue 22): a worker
importing ``agents`` failed to load (entropy at import), and ``route_agent_request`` answered 400
(it listed bindings with ``dir(env)``, which Cloudflare's env does not support). Each test below
fails on workerd if its fault comes back. The chat example is ``test_chat.py``; state sync,
schedules and RPC errors are ``test_agents_features.py``.

* ``CounterAgent`` behind ``route_agent_request`` (HTTP ``on_request``, the WebSocket protocol:
  identity, state, ``@callable`` RPC, a state broadcast, a streaming method).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

from ..targets import AGENTS_VENDOR, ROOT, TargetServer
from .conftest import running

AGENT_APP = ROOT / "e2e" / "apps" / "agent_app"


@pytest.fixture(scope="module")
def agent_app(serve: Any) -> TargetServer:
    server: TargetServer = serve(AGENT_APP, vendor=AGENTS_VENDOR)
    return server


def frames_until(ws: ClientConnection, done: Any, within: float = 15) -> list[dict[str, Any]]:
    """JSON frames received until ``done(frame)`` is true of one (included)."""
    frames: list[dict[str, Any]] = []
    while True:
        frame = json.loads(ws.recv(timeout=within))
        frames.append(frame)
        if done(frame):
            return frames


def test_route_agent_request_reaches_on_request(agent_app: TargetServer, target: str) -> None:
    """GET /agents/counter-agent/<name> is routed by binding name to the agent's on_request:
    its name and initial state come back; an agent class with no binding is the SDK's 400."""
    name = f"http-{target}"
    answer = httpx.get(f"{running(agent_app).url}/agents/counter-agent/{name}", timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"agent": name, "state": {"count": 0, "history": []}}
    missing = httpx.get(f"{agent_app.url}/agents/no-such-agent/{name}", timeout=30)
    assert (missing.status_code, missing.text) == (400, "Invalid request")


def test_protocol_state_and_rpc(agent_app: TargetServer, target: str) -> None:
    """1. A WebSocket to the agent gets identity, then the state, as the SDK sends them.
    2. An `rpc` frame calling `increment(2)` answers success with 2, and the new state is
       broadcast; a second call answers 5.
    3. A streaming method sends its chunks, then the final value.
    4. on_request (HTTP) sees the state the RPCs set."""
    name = f"ws-{target}"
    url = f"{running(agent_app).ws_url}/agents/counter-agent/{name}"
    with connect(url, open_timeout=30) as ws:
        hello = frames_until(ws, lambda f: f.get("type") == "cf_agent_state")
        assert hello[0] == {
            "type": "cf_agent_identity",
            "name": name,
            "agent": "counter-agent",
            "stateFollows": True,
        }
        assert hello[-1] == {"type": "cf_agent_state", "state": {"count": 0, "history": []}}

        ws.send(json.dumps({"type": "rpc", "id": "a", "method": "increment", "args": [2]}))
        got = frames_until(ws, lambda f: f.get("id") == "a")
        assert got[-1] == {"type": "rpc", "id": "a", "success": True, "result": 2, "done": True}
        assert {"type": "cf_agent_state", "state": {"count": 2, "history": ["+2"]}} in got
        ws.send(json.dumps({"type": "rpc", "id": "b", "method": "increment", "args": [3]}))
        got = frames_until(ws, lambda f: f.get("id") == "b")
        assert got[-1]["result"] == 5

        ws.send(json.dumps({"type": "rpc", "id": "c", "method": "countdown", "args": [3]}))
        got = frames_until(ws, lambda f: f.get("id") == "c" and f.get("done"))
        results = [(f["result"], f["done"]) for f in got if f.get("id") == "c"]
        assert results == [(3, False), (2, False), (1, False), ("liftoff", True)]
    state = httpx.get(f"{agent_app.url}/agents/counter-agent/{name}", timeout=30).json()["state"]
    assert state == {"count": 5, "history": ["+2", "+3"]}
