"""examples/counter on doemu and on workerd: every documented path, the same answers.

The counter has no ``Default`` entry worker: doemu's default router sends
``/COUNTER/<name>/<path>`` to the object, and on workerd the runner's generated router does the
same, so this one client script runs against both: SQL (incr, value), KV, an alarm that fires,
JSON echo, the hibernatable WebSocket with its attachment, a SIGKILL and restart, and the
router's own 404s.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from tests.polling import eventually_sync

from ..targets import ROOT, TargetServer, close_and_await, stored_alarm
from .conftest import running

EXAMPLE = ROOT / "examples" / "counter"


@pytest.fixture(scope="module")
def counter(serve: Any) -> TargetServer:
    server: TargetServer = serve(EXAMPLE)
    return server


def call(server: TargetServer, method: str, path: str, **kw: Any) -> httpx.Response:
    return httpx.request(method, f"{running(server).url}{path}", timeout=30, **kw)


def test_incr_and_value(counter: TargetServer, target: str) -> None:
    """1. POST incr twice: 1, then 2 (an UPDATE … RETURNING).
    2. GET value: 2, and the object's name as ctx.id.name gives it."""
    name = f"incr-{target}"
    assert call(counter, "POST", f"/COUNTER/{name}/incr").json() == {"value": 1}
    assert call(counter, "POST", f"/COUNTER/{name}/incr").json() == {"value": 2}
    assert call(counter, "GET", f"/COUNTER/{name}/value").json() == {"value": 2, "name": name}
    assert counter.sql("COUNTER", name, "SELECT value FROM counter") == [{"value": 2}]


def test_kv_put_and_get(counter: TargetServer, target: str) -> None:
    """1. PUT kv/<key> stores the body (text, non-ASCII included); GET reads it back.
    2. A key never stored reads as null."""
    name = f"kv-{target}"
    text = "héllo, wörld ✓"
    stored = call(counter, "PUT", f"/COUNTER/{name}/kv/greeting", content=text.encode())
    assert stored.json() == {"stored": "greeting"}
    got = call(counter, "GET", f"/COUNTER/{name}/kv/greeting").json()
    assert got == {"key": "greeting", "value": text}
    assert call(counter, "GET", f"/COUNTER/{name}/kv/missing").json() == {
        "key": "missing",
        "value": None,
    }


def test_alarm_fires_once_at_its_time(counter: TargetServer, target: str) -> None:
    """1. POST alarm?in_ms=1500 stores an alarm (the answer carries its time, epoch ms).
    2. The alarm fires by itself: the log gets one row, scheduled at that time, retry 0,
       fired no earlier than scheduled; no alarm is left stored."""
    name = f"alarm-{target}"
    at = call(counter, "POST", f"/COUNTER/{name}/alarm?in_ms=1500").json()["alarm"]
    stored = stored_alarm(counter, "COUNTER", name)
    assert stored is None or stored == at  # None: it fired already (a very slow machine)
    log = eventually_sync(
        lambda: call(counter, "GET", f"/COUNTER/{name}/alarms").json(),
        within=15,
        what="the alarm to fire",
    )
    assert len(log) == 1, log
    (entry,) = log
    assert entry["scheduled"] == at
    assert entry["retry_count"] == 0
    assert entry["fired_at"] >= at
    assert stored_alarm(counter, "COUNTER", name) is None


def test_echo_parses_json(counter: TargetServer, target: str) -> None:
    """POST echo with a nested JSON body: the same value comes back."""
    body = {"list": [1, 2.5, None, True], "nested": {"ü": "✓", "empty": {}}, "n": -7}
    answer = call(counter, "POST", f"/COUNTER/echo-{target}/echo", json=body)
    assert answer.status_code == 200
    assert answer.json() == {"echo": body}


def test_unknown_action_and_routes_answer_json_404(counter: TargetServer, target: str) -> None:
    """1. An action the object does not know: the object's own JSON 404.
    2. A path the router cannot route, or an unknown binding: the router's JSON 404, naming
       the bindings (doemu's default router, and the runner's on workerd)."""
    answer = call(counter, "GET", f"/COUNTER/nope-{target}/nope")
    assert (answer.status_code, answer.json()) == (404, {"error": "no action 'nope'"})
    answer = call(counter, "GET", "/nowhere")
    assert answer.status_code == 404
    assert answer.json()["error"].startswith("no route for '/nowhere'")
    answer = call(counter, "GET", "/MISSING/a/value")
    assert (answer.status_code, answer.json()) == (
        404,
        {"error": "unknown binding 'MISSING'; known: ['COUNTER']"},
    )


def test_websocket_echo_counts_in_its_attachment(counter: TargetServer, target: str) -> None:
    """1. GET ws upgrades to a hibernatable WebSocket tagged "counter", with a JS-object
       attachment (to_js: what workerd requires).
    2. Each message comes back numbered from the attachment, with the SQL counter's value.
    3. Closing it runs webSocketClose, which records the close code."""
    name = f"ws-{target}"
    with connect(f"{running(counter).ws_url}/COUNTER/{name}/ws", open_timeout=30) as ws:
        ws.send("hi")
        assert ws.recv(timeout=10) == "hi #1 (counter 1)"
        ws.send("again")
        assert ws.recv(timeout=10) == "again #2 (counter 2)"
        close_and_await(
            ws,
            lambda: (
                counter.sql("COUNTER", name, "SELECT at FROM boots WHERE at < 0") == [{"at": -1000}]
            ),
            what="webSocketClose to record code 1000",
        )
    assert call(counter, "GET", f"/COUNTER/{name}/value").json()["value"] == 2


def test_state_survives_sigkill(counter: TargetServer, target: str) -> None:
    """1. incr three times; 2. SIGKILL the server (port closed); 3. restart on the same state
    and the same port; 4. the value is 3 and the next incr answers 4."""
    name = f"kill-{target}"
    for expected in (1, 2, 3):
        assert call(counter, "POST", f"/COUNTER/{name}/incr").json() == {"value": expected}
    url = counter.url
    counter.kill()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/COUNTER/{name}/value", timeout=5)
    counter.restart()
    assert counter.url == url
    assert call(counter, "GET", f"/COUNTER/{name}/value").json() == {"value": 3, "name": name}
    assert call(counter, "POST", f"/COUNTER/{name}/incr").json() == {"value": 4}
