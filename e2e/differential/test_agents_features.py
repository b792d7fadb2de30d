"""The ``agents`` library's features on doemu and on workerd, as clients observe them.

``apps/agents``: a ``Board`` agent (its docstring says what it does) driven by raw WebSocket
clients speaking the Agents SDK's protocol and by plain HTTP:

* state sync: a client's proposed state reaches the other clients; a refused one is answered
  with the SDK's error frame and changes nothing; a readonly connection may not propose;
* RPC: ``@callable`` methods answer, their state changes are broadcast, an error is the error
  frame with the exception's text, an unknown method is refused;
* schedules: a one-shot schedule fires (its state change reaches a connected client), a
  cancelled one never fires, a recurring one repeats, and one stored before a SIGKILL fires after
  the restart with no request.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.polling import eventually_sync

from ..targets import AGENTS_VENDOR, TargetServer
from .chatwire import ChatSocket
from .conftest import running

APP = Path(__file__).resolve().parent / "apps" / "agents"
MCP = {"type": "cf_agent_mcp_servers", "mcp": {"prompts": [], "resources": [], "servers": {},
                                               "tools": []}}  # fmt: skip


@pytest.fixture(scope="module")
def board(serve: Any) -> TargetServer:
    server: TargetServer = serve(APP, vendor=AGENTS_VENDOR)
    return server


def client(server: TargetServer, name: str, query: str = "") -> ChatSocket:
    return ChatSocket(f"{running(server).ws_url}/agents/board/{name}{query}")


def connected(ws: ChatSocket) -> None:
    """Wait for the connect frames: identity, state, MCP servers."""
    ws.until(lambda frames: any(f.get("type") == "cf_agent_mcp_servers" for f in frames))


def rpc(ws: ChatSocket, call_id: str, method: str, *args: Any) -> dict[str, Any]:
    ws.send(json.dumps({"type": "rpc", "id": call_id, "method": method, "args": list(args)}))
    ws.until(lambda frames: any(f.get("id") == call_id and f.get("done", True) for f in frames))
    return next(f for f in ws.frames if f.get("id") == call_id)


def states(ws: ChatSocket) -> list[Any]:
    return [f["state"] for f in ws.frames if f.get("type") == "cf_agent_state"]


def http(server: TargetServer, name: str) -> dict[str, Any]:
    answer = httpx.get(f"{running(server).url}/agents/board/{name}", timeout=30)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def test_state_syncs_between_clients(board: TargetServer, target: str) -> None:
    """1. Two clients connect: identity (state follows), the initial state, the MCP servers.
    2. A proposes a state: B receives it; the agent's on_state_changed saw a client change.
    3. A proposes an invalid state: A gets "State update rejected"; nothing changes.
    4. A readonly client proposes: it gets "Connection is readonly"; nothing changes."""
    name = f"sync-{target}"
    with client(board, name) as a, client(board, name) as b:
        connected(a)
        connected(b)
        assert a.frames == [
            {"type": "cf_agent_identity", "name": name, "agent": "board", "stateFollows": True},
            {"type": "cf_agent_state", "state": {"notes": []}},
            MCP,
        ]
        a.send(json.dumps({"type": "cf_agent_state", "state": {"notes": ["from a"]}}))
        b.until(lambda _: states(b)[-1] == {"notes": ["from a"]})
        a.send(json.dumps({"type": "cf_agent_state", "state": {"bad": True}}))
        a.until(lambda frames: frames[-1].get("type") == "cf_agent_state_error")
        assert a.frames[-1] == {"type": "cf_agent_state_error", "error": "State update rejected"}
        with client(board, name, "?readonly=1") as reader:
            connected(reader)
            reader.send(json.dumps({"type": "cf_agent_state", "state": {"notes": []}}))
            reader.until(lambda frames: frames[-1].get("type") == "cf_agent_state_error")
            assert reader.frames[-1] == {
                "type": "cf_agent_state_error",
                "error": "Connection is readonly",
            }
        assert states(a) == [{"notes": []}]  # a proposer is not sent its own state back
    seen = http(board, name)
    # The initial state is the first change (the server's), then A's.
    assert (seen["state"], seen["changes"]) == (
        {"notes": ["from a"]},
        [["server", 0], ["client", 1]],
    )


def test_rpc_answers_broadcasts_and_refuses(board: TargetServer, target: str) -> None:
    """1. add("x") answers 1 and every client gets the new state (the caller included).
    2. A method that raises: success false with the exception's text.
    3. An unknown method: success false, named."""
    name = f"rpc-{target}"
    with client(board, name) as a, client(board, name) as b:
        connected(a)
        connected(b)
        assert rpc(a, "1", "add", "x") == {
            "type": "rpc",
            "id": "1",
            "success": True,
            "result": 1,
            "done": True,
        }
        b.until(lambda _: states(b)[-1] == {"notes": ["x"]})
        assert states(a)[-1] == {"notes": ["x"]}
        assert rpc(a, "2", "fail", "on purpose") == {
            "type": "rpc",
            "id": "2",
            "success": False,
            "error": "on purpose",
        }
        unknown = rpc(a, "3", "nope")
        assert (unknown["success"], unknown["error"]) == (False, "Method nope does not exist")
    assert http(board, name)["changes"] == [["server", 0], ["server", 1]]


def test_schedules_fire_once_cancelled_never_recurring_repeat(
    board: TargetServer, target: str
) -> None:
    """1. remind(1, "tea") answers the schedule; a second later the callback runs, appending to
       the state, which the connected client receives.
    2. remind(1, "never") cancelled at once: True; a later control reminder fires, "never" not.
    3. tick_every(1) runs its callback again and again."""
    name = f"sched-{target}"
    with client(board, name) as a:
        connected(a)
        scheduled = rpc(a, "1", "remind", 1, "tea")["result"]
        assert (scheduled["type"], scheduled["callback"]) == ("delayed", "reminded")
        a.until(lambda _: states(a)[-1] == {"notes": ["tea"]}, within=15)
        never = rpc(a, "2", "remind", 1, "never")["result"]["id"]
        assert rpc(a, "3", "cancel", never)["result"] is True
        rpc(a, "4", "remind", 2, "control")
        a.until(lambda _: "control" in states(a)[-1]["notes"], within=15)
        assert http(board, name)["reminders"] == ["tea", "control"]
        assert rpc(a, "5", "pending")["result"] == []
        rpc(a, "6", "tick_every", 1)
        eventually_sync(
            lambda: board.sql("Board", name, "SELECT count(*) AS n FROM ticks")[0]["n"] >= 2,
            within=15,
            what="the recurring schedule to run twice",
        )
        assert rpc(a, "7", "pending")["result"] == ["ticked"]


def test_a_schedule_fires_after_sigkill_without_a_request(board: TargetServer, target: str) -> None:
    """remind(2, …); the server is SIGKILLed and restarted; nothing is sent: the stored alarm
    runs the callback, and no schedule is left."""
    name = f"crash-{target}"
    with client(board, name) as a:
        connected(a)
        rpc(a, "1", "remind", 2, "after the crash")
    board.kill()
    board.restart()
    eventually_sync(
        lambda: (
            board.sql("Board", name, "SELECT text FROM reminders") == [{"text": "after the crash"}]
        ),
        within=30,
        what="the schedule to fire with no request",
    )
    eventually_sync(
        lambda: (
            board.sql("Board", name, "SELECT count(*) AS n FROM cf_agents_schedules") == [{"n": 0}]
        ),
        within=10,
        what="the one-shot schedule to be deleted",
    )
    assert http(board, name)["state"] == {"notes": ["after the crash"]}
