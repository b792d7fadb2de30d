"""Agent state in-process: initial state, falsy states, corrupt JSON, validation, hooks, durability.

WebSocket clients here are the client ends of in-process ``WebSocketPair``s returned by the
agent's ``fetch`` (no server needed); they see exactly the frames a network client would.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agents import Agent
from doemu.jsboundary import JsException
from doemu.testing import WorkerHarness
from doemu.testing.plugin import HarnessFactory

from .polling import eventually

#: Per agent name, what ``on_state_changed`` saw: ``[state, "server" | connection id]``.
CHANGES: dict[str, list[list[Any]]] = {}

INITIAL = {"count": 0, "items": []}


def _source(source: Any) -> str:
    return source if source == "server" else f"conn:{source.id}"


class Notes(Agent):
    initial_state = INITIAL

    def validate_state_change(self, next_state: Any, source: Any) -> None:
        if isinstance(next_state, dict) and next_state.get("count", 0) < 0:
            raise ValueError("count must not be negative")

    async def on_state_changed(self, state: Any, source: Any) -> None:
        CHANGES.setdefault(self.name, []).append([state, _source(source)])

    async def get(self) -> Any:
        return self.state

    async def put(self, value: Any) -> Any:
        await self.set_state(value)
        return self.state

    async def put_without_waiting(self, value: Any) -> None:
        self.set_state(value)  # the write is synchronous; the hook runs later

    async def rows(self) -> list[list[Any]]:
        return [[r["id"], r["state"]] for r in self.sql("SELECT id, state FROM cf_agents_state")]

    async def write_raw(self, raw: Any) -> None:
        self.sql(
            "INSERT OR REPLACE INTO cf_agents_state (id, state) VALUES ('cf_state_row_id', ?)", raw
        )

    async def mutate_class_copy(self) -> Any:
        self.state["items"].append("mutated")  # must never reach the class attribute
        return type(self).initial_state


class Bare(Agent):
    """No ``initial_state``: unset means ``None`` and no row."""

    async def get(self) -> Any:
        return self.state

    async def has(self) -> bool:
        return self.has_state

    async def put(self, value: Any) -> None:
        await self.set_state(value)

    async def rows(self) -> int:
        return len(self.sql("SELECT id FROM cf_agents_state"))

    async def write_raw(self, raw: str) -> None:
        self.sql(
            "INSERT OR REPLACE INTO cf_agents_state (id, state) VALUES ('cf_state_row_id', ?)", raw
        )


@pytest.fixture
async def h(doemu_harness: HarnessFactory) -> WorkerHarness:
    harness: WorkerHarness = await doemu_harness({"NOTES": Notes, "BARE": Bare})
    return harness


class Client:
    """The client end of an in-process agent WebSocket, collecting parsed frames."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.frames: list[Any] = []
        ws.accept()
        ws.addEventListener("message", lambda event: self.frames.append(json.loads(event.data)))

    def send(self, frame: Any) -> None:
        self.ws.send(json.dumps(frame))

    async def wait_for(self, predicate: Callable[[Any], bool]) -> Any:
        def find() -> Any:
            return next((f for f in self.frames if predicate(f)), None)

        return await eventually(find, what="a matching frame")


async def connect(h: WorkerHarness, binding: str, name: str) -> Client:
    stub = getattr(h.env, binding).getByName(name)
    response = await stub.fetch(
        f"http://agent/agents/{binding.lower()}/{name}", headers={"Upgrade": "websocket"}
    )
    assert response.status == 101
    return Client(response._web_socket)


async def test_initial_state_is_returned_and_persisted(
    h: WorkerHarness, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("initial")
    stub = h.env.NOTES.getByName(name)
    assert await stub.get() == INITIAL
    # The SDK persists the fallback under its row id, through the normal change path.
    assert await stub.rows() == [["cf_state_row_id", '{"count":0,"items":[]}']]
    await eventually(lambda: CHANGES.get(name), what="on_state_changed")
    assert CHANGES[name] == [[INITIAL, "server"]]
    # Mutating the live state never touches the class attribute.
    assert await stub.mutate_class_copy() == {"count": 0, "items": []}


@pytest.mark.parametrize("value", [0, "", [], {}, False, None])
async def test_falsy_states_are_states(
    h: WorkerHarness, unique_name: Callable[[str], str], value: Any
) -> None:
    name = unique_name("falsy")
    stub = h.env.NOTES.getByName(name)
    assert await stub.put(value) == value
    await h.evict("NOTES", name)
    got = await stub.get()
    # not the initial state, not coerced (a dict arrives over RPC as the SDK's JsDict)
    assert got == value and isinstance(got, type(value))
    assert await stub.rows() == [["cf_state_row_id", json.dumps(value)]]


async def test_unset_state_without_initial_state(
    h: WorkerHarness, unique_name: Callable[[str], str]
) -> None:
    stub = h.env.BARE.getByName(unique_name("bare"))
    assert await stub.get() is None
    assert await stub.has() is False
    assert await stub.rows() == 0
    await stub.put(None)  # JSON null is a state, distinct from unset
    assert await stub.has() is True


async def test_corrupt_json_falls_back_to_initial_state(
    h: WorkerHarness, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("corrupt")
    stub = h.env.NOTES.getByName(name)
    await stub.put({"count": 5, "items": ["a"]})
    await stub.write_raw("{not json")
    await h.evict("NOTES", name)
    assert await stub.get() == INITIAL
    assert await stub.rows() == [["cf_state_row_id", '{"count":0,"items":[]}']]


async def test_corrupt_json_without_initial_state_clears_the_row(
    h: WorkerHarness, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("corrupt-bare")
    stub = h.env.BARE.getByName(name)
    await stub.write_raw('{"truncated": ')
    await h.evict("BARE", name)
    assert await stub.get() is None
    assert await stub.rows() == 0


async def test_refused_change_persists_and_broadcasts_nothing(
    h: WorkerHarness, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("refuse")
    stub = h.env.NOTES.getByName(name)
    await stub.put({"count": 1, "items": []})
    client = await connect(h, "NOTES", name)
    await client.wait_for(lambda f: f["type"] == "cf_agent_mcp_servers")  # connect frames done
    CHANGES[name] = []
    before = len(client.frames)

    # Over RPC the caller sees the callee's traceback (a PythonError), as on Cloudflare.
    with pytest.raises(JsException, match=r"StateValidationError: .*count must not be negative"):
        await stub.put({"count": -1, "items": []})

    assert await stub.get() == {"count": 1, "items": []}
    assert await stub.rows() == [["cf_state_row_id", '{"count":1,"items":[]}']]
    await h.evict("NOTES", name)  # the cache did not change either
    assert await stub.get() == {"count": 1, "items": []}
    # A later accepted change is broadcast; the refused one never was.
    await stub.put({"count": 2, "items": []})
    frame = await client.wait_for(lambda f: f.get("state", {}).get("count") == 2)
    assert (
        client.frames[before:] == [frame] == [{"type": "cf_agent_state", "state": frame["state"]}]
    )
    assert CHANGES[name] == [[{"count": 2, "items": []}, "server"]]


async def test_refused_client_update_gets_the_sdk_error(
    h: WorkerHarness, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("refuse-client")
    stub = h.env.NOTES.getByName(name)
    client = await connect(h, "NOTES", name)
    client.send({"type": "cf_agent_state", "state": {"count": -5, "items": []}})
    error = await client.wait_for(lambda f: f["type"] == "cf_agent_state_error")
    assert error == {"type": "cf_agent_state_error", "error": "State update rejected"}
    assert await stub.get() == INITIAL


async def test_on_state_changed_sees_server_and_client_sources(
    h: WorkerHarness, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("hooks")
    stub = h.env.NOTES.getByName(name)
    await stub.put({"count": 1, "items": []})
    client = await connect(h, "NOTES", name)
    identity = await client.wait_for(lambda f: f["type"] == "cf_agent_identity")
    assert identity == {
        "type": "cf_agent_identity",
        "name": name,
        "agent": "notes",
        "stateFollows": True,
    }
    client.send({"type": "cf_agent_state", "state": {"count": 7, "items": ["x"]}})
    await eventually(lambda: len(CHANGES.get(name, [])) >= 2, what="the client change's hook")
    state, source = CHANGES[name][-1]
    assert state == {"count": 7, "items": ["x"]}
    assert source.startswith("conn:") and len(source) > len("conn:")
    assert CHANGES[name][0] == [{"count": 1, "items": []}, "server"]
    assert len(CHANGES[name]) == 2
    assert await stub.get() == {"count": 7, "items": ["x"]}
    # The source connection is not echoed its own update.
    assert not any(f.get("state") == {"count": 7, "items": ["x"]} for f in client.frames)


async def test_set_state_is_written_before_the_hook_runs(
    h: WorkerHarness, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("sync")
    stub = h.env.NOTES.getByName(name)
    await stub.put_without_waiting({"count": 3, "items": []})
    h.reset("NOTES", name, "crash right after the call returned")
    assert await stub.get() == {"count": 3, "items": []}


async def test_state_survives_eviction_and_restart(
    h: WorkerHarness, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("durable")
    await h.env.NOTES.getByName(name).put({"count": 9, "items": ["kept"]})
    await h.evict("NOTES", name)
    assert await h.env.NOTES.getByName(name).get() == {"count": 9, "items": ["kept"]}
    await h.restart()
    assert await h.env.NOTES.getByName(name).get() == {"count": 9, "items": ["kept"]}
