"""Eviction against a real server: idle eviction, hibernated WebSockets, admin evict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect

from tests.polling import eventually_sync

from .harness import DevServer


def object_state(server: DevServer, name: str) -> str | None:
    for item in httpx.get(f"{server.url}/__doemu/api/objects?binding=COUNTER").json():
        if item["name"] == name:
            return str(item["state"])
    return None


def boots(server: DevServer, name: str) -> int:
    response = httpx.post(
        f"{server.url}/__doemu/api/objects/COUNTER/{name}/sql",
        json={"query": "SELECT count(*) FROM boots WHERE at > 0"},
    )
    return int(response.json()["rows"][0][0])


def test_idle_object_is_evicted_and_rebuilt_with_storage_intact(
    dev_server: Any, counter_project: Path
) -> None:
    """1. With --idle-timeout 2, increment an object.  2. Wait (polling) until it is evicted.
    3. The next request re-runs the constructor and sees the stored value."""
    server = dev_server(counter_project, "--idle-timeout", "2")
    assert httpx.post(f"{server.url}/COUNTER/idler/incr").json() == {"value": 1}
    assert object_state(server, "idler") == "live"
    eventually_sync(lambda: object_state(server, "idler") == "evicted", within=15, what="eviction")
    assert httpx.get(f"{server.url}/COUNTER/idler/value").json()["value"] == 1
    assert boots(server, "idler") == 2


def test_hibernated_websocket_survives_eviction(dev_server: Any, counter_project: Path) -> None:
    """1. Open a hibernatable WebSocket and exchange a message.
    2. Evict the object through the admin API while the socket stays open.
    3. The next message re-runs the constructor, and the attachment is intact."""
    server = dev_server(counter_project)
    with connect(f"{server.ws_url}/COUNTER/socket/ws") as ws:
        ws.send("hello")
        assert ws.recv(timeout=5) == "hello #1 (counter 1)"
        evicted = httpx.post(f"{server.url}/__doemu/api/objects/COUNTER/socket/evict").json()
        assert evicted["evicted"] is True
        assert object_state(server, "socket") == "evicted"
        objects = httpx.get(f"{server.url}/__doemu/api/objects?binding=COUNTER").json()
        assert [o["sockets"] for o in objects if o["name"] == "socket"] == [1]
        ws.send("again")
        assert ws.recv(timeout=5) == "again #2 (counter 2)"
        ws.send(b"\x00\x01binary")
        reply = ws.recv(timeout=5)
        assert "#3" in str(reply)
    assert boots(server, "socket") == 2
