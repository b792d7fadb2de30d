"""The admin API (``/__doemu/api``): every route, its refusals, access control and the SSE stream.

The app is driven in-process through ``httpx.ASGITransport`` (which buffers whole responses), and
the never-ending SSE stream through raw ASGI calls and, once, through a real uvicorn server.
Time is a :class:`ManualClock`, so alarm times and activity stamps are exact.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator, MutableMapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.routing import Route
from workers import DurableObject

from doemu.admin import ADMIN_PREFIX
from doemu.adminclient import AdminClient, AdminUnavailable
from doemu.clock import ManualClock
from doemu.errors import DoemuError
from doemu.ids import INVALID_ID_FOREIGN
from doemu.runtime import ClassSpec, Runtime
from doemu.server import DoemuApp
from doemu.storage import messages

T0 = 1_700_000_000_000.0
API = ADMIN_PREFIX
JSON_TYPE = {"content-type": "application/json"}
ALARMS: list[tuple[str | None, float]] = []


class Box(DurableObject):
    """SQL, KV and an alarm handler: everything the admin API can look at."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, label TEXT, blob BLOB)"
        )

    async def add(self, label: str, blob: bytes | None = None) -> None:
        self.ctx.storage.sql.exec("INSERT INTO items(label, blob) VALUES (?, ?)", label, blob)

    async def put(self, key: str, value: Any) -> None:
        await self.ctx.storage.put(key, value)

    async def arm(self, at_ms: float) -> None:
        await self.ctx.storage.setAlarm(at_ms)

    async def alarm(self, alarm_info: Any) -> None:
        ALARMS.append((self.ctx.id.name, alarm_info.scheduledTime))
        await self.ctx.storage.put("alarm-ran", alarm_info.scheduledTime)


class Legacy(DurableObject):
    """A KV-only class (no ``new_sqlite_classes`` migration): write SQL is refused."""

    async def put(self, key: str, value: Any) -> None:
        await self.ctx.storage.put(key, value)


class Broken(DurableObject):
    """A constructor that throws: waking it from the admin API must be a JSON 500."""

    def __init__(self, ctx: Any, env: Any) -> None:
        raise RuntimeError("constructor exploded")


@dataclass
class Admin:
    runtime: Runtime
    clock: ManualClock
    app: DoemuApp
    http: httpx.AsyncClient

    def id_of(self, binding: str, name: str) -> str:
        return str(self.runtime.bindings[binding].ids.from_name(name))

    def live(self, binding: str, name: str) -> bool:
        host = self.runtime.bindings[binding].hosts.get(self.id_of(binding, name))
        return host is not None and host.live

    def stub(self, binding: str, name: str) -> Any:
        return getattr(self.runtime.env, binding).getByName(name)


def make_runtime(persist_dir: Path, clock: ManualClock | None) -> Runtime:
    return Runtime(
        worker_name="admin-test",
        classes={
            "Box": ClassSpec(Box),
            "Legacy": ClassSpec(Legacy, sql=False),
            "Broken": ClassSpec(Broken),
        },
        bindings={"BOX": "Box", "LEGACY": "Legacy", "BROKEN": "Broken"},
        persist_dir=persist_dir,
        clock=clock,
    )


def client(app: DoemuApp, host: str = "127.0.0.1") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(host, 1234))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8787")


@pytest.fixture
async def admin(tmp_path: Path) -> AsyncIterator[Admin]:
    ALARMS.clear()
    clock = ManualClock(T0)
    runtime = make_runtime(tmp_path / "state", clock)
    await runtime.start()
    app = DoemuApp(runtime)
    async with client(app) as http:
        yield Admin(runtime, clock, app, http)
    await runtime.close()


async def test_health_summarises_the_runtime(admin: Admin) -> None:
    response = await admin.http.get(f"{API}/health")
    assert response.status_code == 200
    assert response.json() == {
        "ok": True,
        "worker": "admin-test",
        "persist_dir": str(admin.runtime.persist_dir),
        "live_objects": 0,
        "pending_alarms": 0,
        "clock": {"now": T0, "manual": True},
    }
    await admin.stub("BOX", "a").arm(T0 + 1_000)
    body = (await admin.http.get(f"{API}/health")).json()
    assert (body["live_objects"], body["pending_alarms"]) == (1, 1)


async def test_namespaces_lists_bindings_with_live_and_stored_counts(admin: Admin) -> None:
    await admin.stub("BOX", "a").put("k", 1)
    await admin.stub("BOX", "b").put("k", 2)
    await admin.runtime.evict("BOX", "b")
    response = await admin.http.get(f"{API}/namespaces")
    assert response.status_code == 200
    assert response.json() == [
        {
            "binding": "BOX",
            "class_name": "Box",
            "unique_key": "admin-test-Box",
            "sql": True,
            "live": 1,
            "stored": 2,
        },
        {
            "binding": "LEGACY",
            "class_name": "Legacy",
            "unique_key": "admin-test-Legacy",
            "sql": False,
            "live": 0,
            "stored": 0,
        },
        {
            "binding": "BROKEN",
            "class_name": "Broken",
            "unique_key": "admin-test-Broken",
            "sql": True,
            "live": 0,
            "stored": 0,
        },
    ]


async def test_objects_lists_live_and_evicted_objects_with_names_and_alarms(
    admin: Admin, tmp_path: Path
) -> None:
    await admin.stub("BOX", "alpha").arm(T0 + 60_000)
    await admin.stub("BOX", "beta").put("k", "v")
    await admin.stub("LEGACY", "gamma").put("k", "v")
    await admin.runtime.evict("BOX", "beta")
    await admin.runtime.evict("LEGACY", "gamma")
    alpha, beta = admin.id_of("BOX", "alpha"), admin.id_of("BOX", "beta")
    gamma = admin.id_of("LEGACY", "gamma")
    box: list[dict[str, Any]] = [
        {
            "binding": "BOX",
            "id": alpha,
            "name": "alpha",
            "state": "live",
            "alarm": T0 + 60_000,
            "sockets": 0,
            "last_activity": T0,
        },
        {
            "binding": "BOX",
            "id": beta,
            "name": "beta",
            "state": "evicted",
            "alarm": None,
            "sockets": 0,
            "last_activity": None,
        },
    ]
    box.sort(key=lambda item: str(item["id"]))
    legacy: dict[str, Any] = {
        "binding": "LEGACY",
        "id": gamma,
        "name": "gamma",
        "state": "evicted",
        "alarm": None,
        "sockets": 0,
        "last_activity": None,
    }
    response = await admin.http.get(f"{API}/objects")
    assert response.status_code == 200
    assert response.json() == [*box, legacy]
    assert (await admin.http.get(f"{API}/objects?binding=BOX")).json() == box
    assert (await admin.http.get(f"{API}/objects?binding=LEGACY")).json() == [legacy]

    response = await admin.http.get(f"{API}/objects?binding=NOPE")
    assert response.status_code == 404
    assert response.json() == {
        "error": "unknown Durable Object binding 'NOPE'; known: ['BOX', 'BROKEN', 'LEGACY']"
    }

    # A new runtime on the same files knows nothing in memory: names come from the files (and
    # the alarm table), and the pending alarm is still listed.
    await admin.runtime.close()
    restarted = make_runtime(tmp_path / "state", ManualClock(T0))
    await restarted.start()
    try:
        async with client(DoemuApp(restarted)) as http:
            listed = (await http.get(f"{API}/objects?binding=BOX")).json()
    finally:
        await restarted.close()
    assert [(o["name"], o["state"], o["alarm"]) for o in listed] == [
        (o["name"], "evicted", o["alarm"]) for o in box
    ]


async def test_kv_by_name_and_by_id_renders_bytes(admin: Admin) -> None:
    stub = admin.stub("BOX", "kv")
    await stub.put("a", {"n": 1, "list": [1, 2]})
    await stub.put("b:raw", b"\x00\x01\xff")
    await stub.put("b:text", "hello")
    hex_id = admin.id_of("BOX", "kv")
    entries = [
        {"key": "a", "value": {"n": 1, "list": [1, 2]}},
        {"key": "b:raw", "value": {"$bytes": base64.b64encode(b"\x00\x01\xff").decode()}},
        {"key": "b:text", "value": "hello"},
    ]
    by_name = await admin.http.get(f"{API}/objects/BOX/kv/kv")
    assert by_name.status_code == 200
    assert by_name.json() == {"id": hex_id, "name": "kv", "entries": entries}
    await admin.runtime.evict("BOX", "kv")
    for address in (hex_id, hex_id.upper()):
        by_id = await admin.http.get(f"{API}/objects/BOX/{address}/kv")
        assert by_id.status_code == 200
        assert by_id.json() == {"id": hex_id, "name": "kv", "entries": entries}
    assert not admin.live("BOX", "kv")  # inspection never wakes an object

    prefixed = await admin.http.get(f"{API}/objects/BOX/kv/kv", params={"prefix": "b:", "limit": 1})
    assert prefixed.json()["entries"] == entries[1:2]
    empty = await admin.http.get(f"{API}/objects/BOX/never-created/kv")
    assert empty.json() == {
        "id": admin.id_of("BOX", "never-created"),
        "name": "never-created",
        "entries": [],
    }
    assert admin.id_of("BOX", "never-created") not in admin.runtime.bindings["BOX"].hosts

    for bad in ("ten", "-1"):
        response = await admin.http.get(f"{API}/objects/BOX/kv/kv", params={"limit": bad})
        assert response.status_code == 400
        assert response.json() == {
            "error": f"query parameter 'limit' must be an integer >= 0, got '{bad}'"
        }


async def test_names_are_percent_decoded_exactly_once(admin: Admin) -> None:
    """The CLI quotes names with ``safe=''``: '/' stays one segment and '%' is not decoded twice."""
    for name, encoded in (("team/alice", "team%2Falice"), ("100%", "100%25"), ("a%41", "a%2541")):
        await admin.stub("BOX", name).put("k", name)
        response = await admin.http.get(f"{API}/objects/BOX/{encoded}/kv")
        assert response.status_code == 200, name
        assert response.json() == {
            "id": admin.id_of("BOX", name),
            "name": name,
            "entries": [{"key": "k", "value": name}],
        }
        response = await admin.http.post(f"{API}/objects/BOX/{encoded}/evict")
        assert response.json() == {"id": admin.id_of("BOX", name), "evicted": True}


async def test_object_addresses_are_validated(admin: Admin) -> None:
    foreign = admin.id_of("LEGACY", "x")  # a valid id, but of another namespace
    for method, suffix in (
        ("GET", "kv"),
        ("POST", "sql"),
        ("GET", "alarm"),
        ("POST", "alarm/run"),
        ("POST", "evict"),
        ("POST", "reset"),
    ):
        body = {"query": "SELECT 1"} if suffix == "sql" else None
        response = await admin.http.request(
            method, f"{API}/objects/BOX/{foreign}/{suffix}", json=body
        )
        assert response.status_code == 400, suffix
        assert response.json() == {"error": INVALID_ID_FOREIGN}, suffix
        response = await admin.http.request(method, f"{API}/objects/NOPE/x/{suffix}", json=body)
        assert response.status_code == 404, suffix
        assert response.json() == {
            "error": "unknown Durable Object binding 'NOPE'; known: ['BOX', 'BROKEN', 'LEGACY']"
        }


async def test_read_only_sql_reads_the_file_without_waking_the_object(admin: Admin) -> None:
    stub = admin.stub("BOX", "sql")
    await stub.add("one", b"\x01\x02")
    await stub.add("two")
    await admin.runtime.evict("BOX", "sql")
    assert not admin.live("BOX", "sql")
    url = f"{API}/objects/BOX/sql/sql"

    response = await admin.http.post(url, json={"query": "SELECT id, label, blob FROM items"})
    assert response.status_code == 200
    assert response.json() == {
        "columns": ["id", "label", "blob"],
        "rows": [[1, "one", {"$bytes": "AQI="}], [2, "two", None]],
    }
    response = await admin.http.post(
        url, json={"query": "SELECT label FROM items WHERE id = ?", "params": [2]}
    )
    assert response.json() == {"columns": ["label"], "rows": [["two"]]}
    # Reading the internal tables is allowed here: this is the operator's view of the file.
    response = await admin.http.post(url, json={"query": "SELECT count(*) FROM _cf_KV"})
    assert response.json() == {"columns": ["count(*)"], "rows": [[0]]}
    assert not admin.live("BOX", "sql")
    assert admin.id_of("BOX", "sql") not in admin.runtime.bindings["BOX"].hosts

    for query, what in (
        ("INSERT INTO items(label) VALUES ('three')", "INSERT"),
        ("CREATE TABLE more (x)", "CREATE TABLE"),
        ("DELETE FROM items", "DELETE"),
        ("UPDATE items SET label = 'x'", "UPDATE"),
        ("DROP TABLE items", "DROP TABLE"),
        ("PRAGMA user_version = 5", "PRAGMA"),
        ("BEGIN", "TRANSACTION"),
        ("ATTACH DATABASE ':memory:' AS other", "ATTACH"),
    ):
        response = await admin.http.post(url, json={"query": query})
        assert response.status_code == 400, query
        assert response.json() == {
            "error": f"read-only SQL cannot run {what}; only reads run here. Send "
            '"write": true (doemu sql --write) to run it inside the object.'
        }
    rows = await admin.http.post(url, json={"query": "SELECT count(*) FROM items"})
    assert rows.json()["rows"] == [[2]]
    assert not admin.live("BOX", "sql")


async def test_sql_refuses_bad_bodies(admin: Admin) -> None:
    await admin.stub("BOX", "body").add("x")
    url = f"{API}/objects/BOX/body/sql"
    usage = 'expected a JSON body like {"query": "SELECT 1", "params": [], "write": false}'
    cases: list[tuple[bytes, int, str]] = [
        (b"{not json", 400, f"{usage}; the body is not valid JSON"),
        (b"", 400, f"{usage}; the body is not valid JSON"),
        (b"\xff\xfe", 400, f"{usage}; the body is not valid JSON"),
        (b"[1]", 400, f"{usage}; got list"),
        (b'{"query": 1}', 400, f"{usage}; 'query' must be a string"),
        (b'{"params": []}', 400, f"{usage}; 'query' must be a string"),
        (b'{"query": "SELECT 1", "params": 5}', 400, "'params' must be a list, got int"),
        (
            b'{"query": "SELECT 1", "write": "yes"}',
            400,
            "'write' must be true or false, got \"yes\"",
        ),
        (b'{"query": "SELEC 1"}', 400, 'near "SELEC": syntax error'),
        (b'{"query": "SELECT 1; SELECT 2"}', 400, "You can only execute one statement at a time."),
        (
            b'{"query": "SELECT ?", "params": []}',
            400,
            "Incorrect number of bindings supplied. "
            "The current statement uses 1, and there are 0 supplied.",
        ),
        (b'{"query": "SELECT * FROM nope"}', 400, "no such table: nope"),
    ]
    for content, status, message in cases:
        response = await admin.http.post(url, content=content, headers=JSON_TYPE)
        assert (response.status_code, response.json()) == (status, {"error": message}), content
    response = await admin.http.post(f"{API}/objects/BOX/nobody/sql", json={"query": "SELECT 1"})
    assert response.status_code == 404
    assert response.json() == {
        "error": f"object {admin.id_of('BOX', 'nobody')} of BOX has no storage yet"
    }


async def test_write_sql_runs_inside_the_object_under_its_authorizer(admin: Admin) -> None:
    await admin.stub("BOX", "w").put("k", 1)
    await admin.runtime.evict("BOX", "w")
    url = f"{API}/objects/BOX/w/sql"
    response = await admin.http.post(url, json={"query": "SELECT * FROM _cf_KV", "write": True})
    assert response.status_code == 400
    assert response.json() == {"error": "access to _cf_KV.key is prohibited: SQLITE_AUTH"}

    response = await admin.http.post(
        url,
        json={
            "query": "INSERT INTO items(label) VALUES (?), (?)",
            "params": ["p", "q"],
            "write": True,
        },
    )
    assert response.status_code == 200
    assert response.json() == {"columns": [], "rows": [], "rowsWritten": 2}
    assert admin.live("BOX", "w")  # write mode goes through the object
    response = await admin.http.post(
        url,
        json={"query": "SELECT label FROM items ORDER BY id", "write": True},
    )
    assert response.json() == {"columns": ["label"], "rows": [["p"], ["q"]], "rowsWritten": 0}
    # ... and is durable: the read-only path sees it in the file.
    response = await admin.http.post(url, json={"query": "SELECT label FROM items ORDER BY id"})
    assert response.json() == {"columns": ["label"], "rows": [["p"], ["q"]]}

    response = await admin.http.post(
        url, json={"query": "SELECT ?", "params": [{"a": 1}], "write": True}
    )
    assert response.status_code == 400
    assert response.json() == {
        "error": 'SQL binding 1 has unsupported type "dict"; expected None, bool, int, float, '
        "str or bytes."
    }


async def test_write_sql_on_a_kv_only_class_is_refused(admin: Admin) -> None:
    response = await admin.http.post(
        f"{API}/objects/LEGACY/l/sql", json={"query": "SELECT 1", "write": True}
    )
    assert response.status_code == 400
    assert response.json() == {"error": messages.SQL_NOT_ENABLED}


async def test_a_failing_constructor_is_a_json_500_not_a_traceback(admin: Admin) -> None:
    response = await admin.http.post(
        f"{API}/objects/BROKEN/b/sql", json={"query": "SELECT 1", "write": True}
    )
    assert response.status_code == 500
    assert response.json() == {"error": "RuntimeError: constructor exploded"}
    assert "Traceback" not in response.text


async def test_alarm_is_shown_and_run_on_demand(admin: Admin) -> None:
    await admin.stub("BOX", "al").arm(T0 + 3_600_000)
    await admin.runtime.evict("BOX", "al")
    hex_id = admin.id_of("BOX", "al")
    response = await admin.http.get(f"{API}/objects/BOX/al/alarm")
    assert response.status_code == 200
    assert response.json() == {"id": hex_id, "scheduled_time": T0 + 3_600_000}
    assert not admin.live("BOX", "al")

    response = await admin.http.post(f"{API}/objects/BOX/al/alarm/run")
    assert response.status_code == 200
    assert response.json() == {"id": hex_id, "ran": True}
    assert ALARMS == [("al", T0)]  # delivered now, not in an hour
    assert (await admin.http.get(f"{API}/objects/BOX/al/alarm")).json() == {
        "id": hex_id,
        "scheduled_time": None,
    }
    kv = (await admin.http.get(f"{API}/objects/BOX/al/kv")).json()["entries"]
    assert kv == [{"key": "alarm-ran", "value": T0}]

    response = await admin.http.post(f"{API}/objects/BOX/al/alarm/run")
    assert response.status_code == 404
    assert response.json() == {"error": f"object {hex_id} of BOX has no pending alarm"}
    response = await admin.http.post(f"{API}/objects/BOX/none/alarm/run")
    assert response.status_code == 404
    assert response.json() == {
        "error": f"object {admin.id_of('BOX', 'none')} of BOX has no pending alarm"
    }
    assert admin.id_of("BOX", "none") not in admin.runtime.bindings["BOX"].hosts


async def test_evict_keeps_storage_and_reset_drops_the_instance(admin: Admin) -> None:
    stub = admin.stub("BOX", "ev")
    await stub.put("k", "kept")
    hex_id = admin.id_of("BOX", "ev")
    response = await admin.http.post(f"{API}/objects/BOX/ev/evict")
    assert response.status_code == 200
    assert response.json() == {"id": hex_id, "evicted": True}
    assert not admin.live("BOX", "ev")
    assert (await admin.http.post(f"{API}/objects/BOX/ev/evict")).json() == {
        "id": hex_id,
        "evicted": False,
    }
    entries = (await admin.http.get(f"{API}/objects/BOX/ev/kv")).json()["entries"]
    assert entries == [{"key": "k", "value": "kept"}]

    await stub.put("k2", "also kept")  # wakes it again
    assert admin.live("BOX", "ev")
    response = await admin.http.post(f"{API}/objects/BOX/{hex_id}/reset")
    assert response.status_code == 200
    assert response.json() == {"id": hex_id, "reset": True}
    assert not admin.live("BOX", "ev")
    assert (await admin.http.post(f"{API}/objects/BOX/ev/reset")).json() == {
        "id": hex_id,
        "reset": False,
    }
    entries = (await admin.http.get(f"{API}/objects/BOX/ev/kv")).json()["entries"]
    assert [e["key"] for e in entries] == ["k", "k2"]  # committed before the reset


async def test_evict_all_and_reset_all_count_live_objects(admin: Admin) -> None:
    for name in ("x", "y", "z"):
        await admin.stub("BOX", name).put("k", name)
    response = await admin.http.post(f"{API}/evict-all")
    assert (response.status_code, response.json()) == (200, {"evicted": 3})
    assert not any(admin.live("BOX", n) for n in ("x", "y", "z"))
    assert (await admin.http.post(f"{API}/evict-all")).json() == {"evicted": 0}
    for name in ("x", "y"):
        await admin.stub("BOX", name).put("k", name)
    response = await admin.http.post(f"{API}/reset-all")
    assert (response.status_code, response.json()) == (200, {"reset": 2})
    assert (await admin.http.post(f"{API}/reset-all")).json() == {"reset": 0}
    assert (await admin.http.get(f"{API}/health")).json()["live_objects"] == 0


async def test_manual_clock_advance_runs_due_alarms(admin: Admin) -> None:
    await admin.stub("BOX", "tick").arm(T0 + 500)
    response = await admin.http.get(f"{API}/clock")
    assert (response.status_code, response.json()) == (200, {"now": T0, "manual": True})
    response = await admin.http.post(f"{API}/clock", json={"advance_ms": 499})
    assert response.json() == {"now": T0 + 499, "manual": True}
    assert ALARMS == []
    response = await admin.http.post(f"{API}/clock", json={"advance_ms": 1.5})
    assert (response.status_code, response.json()) == (200, {"now": T0 + 500.5, "manual": True})
    assert ALARMS == [("tick", T0 + 500)]

    usage = 'expected a JSON body like {"advance_ms": 1000}'
    for content, message in (
        (b'{"advance_ms": -1}', "advance_ms must be a finite number >= 0, got -1"),
        (b'{"advance_ms": Infinity}', "advance_ms must be a finite number >= 0, got inf"),
        (b'{"advance_ms": NaN}', "advance_ms must be a finite number >= 0, got nan"),
        (b"{}", f"{usage}; 'advance_ms' must be a number"),
        (b'{"advance_ms": "5"}', f"{usage}; 'advance_ms' must be a number"),
        (b'{"advance_ms": true}', f"{usage}; 'advance_ms' must be a number"),
        (b"5", f"{usage}; got int"),
        (b"", f"{usage}; the body is not valid JSON"),
    ):
        response = await admin.http.post(f"{API}/clock", content=content, headers=JSON_TYPE)
        assert (response.status_code, response.json()) == (400, {"error": message}), content
    assert admin.clock.now() == T0 + 500.5


async def test_real_clock_cannot_be_moved(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path / "real", None)
    await runtime.start()
    try:
        async with client(DoemuApp(runtime)) as http:
            body = (await http.get(f"{API}/clock")).json()
            assert body["manual"] is False and isinstance(body["now"], float)
            response = await http.post(f"{API}/clock", json={"advance_ms": 5})
            assert response.status_code == 409
            assert response.json() == {
                "error": "the clock is real; start with a manual clock to move time"
            }
            assert (await http.get(f"{API}/health")).json()["clock"]["manual"] is False
    finally:
        await runtime.close()


async def test_openapi_document_lists_exactly_the_served_routes(admin: Admin) -> None:
    response = await admin.http.get(f"{API}/openapi.json")
    assert response.status_code == 200
    doc = response.json()
    assert doc["openapi"] == "3.1.0"
    assert doc["info"]["title"] and doc["info"]["version"]
    served: dict[str, set[str]] = {}
    for route in admin.app.admin.routes:
        assert isinstance(route, Route)
        methods = {m.lower() for m in route.methods or ()} - {"head"}
        served[API + route.path] = methods
    assert set(doc["paths"]) == set(served)
    for path, operations in doc["paths"].items():
        assert set(operations) == served[path], path
        declared_in_path = set(re.findall(r"{(\w+)}", path))
        for method, operation in operations.items():
            assert operation["summary"], (path, method)
            assert "200" in operation["responses"], (path, method)
            in_path = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
            assert in_path == declared_in_path, (path, method)
            for status, answer in operation["responses"].items():
                assert re.fullmatch(r"[1-5]\d\d", status) and answer["description"]


async def test_unknown_path_and_wrong_method_are_json(admin: Admin) -> None:
    response = await admin.http.get(f"{API}/nothing-here")
    assert response.status_code == 404
    assert response.json() == {"error": f"no admin route GET {API}/nothing-here"}
    response = await admin.http.get(API)
    assert (response.status_code, response.json()) == (404, {"error": f"no admin route GET {API}/"})

    response = await admin.http.post(f"{API}/health")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD"
    assert response.json() == {
        "error": f"method POST not allowed on {API}/health; allowed: GET, HEAD"
    }
    response = await admin.http.get(f"{API}/objects/BOX/x/sql")
    assert response.status_code == 405
    assert response.json() == {
        "error": f"method GET not allowed on {API}/objects/BOX/x/sql; allowed: POST"
    }
    response = await admin.http.delete(f"{API}/clock")
    assert response.status_code == 405
    assert response.json() == {
        "error": f"method DELETE not allowed on {API}/clock; allowed: GET, HEAD, POST"
    }


async def test_non_loopback_clients_are_refused_without_a_token(admin: Admin) -> None:
    async with client(admin.app, host="10.1.2.3") as stranger:
        for method, path in (
            ("GET", "/health"),
            ("POST", "/evict-all"),
            ("GET", "/events"),
            ("GET", "/nothing-here"),
        ):
            response = await stranger.request(method, API + path)
            assert response.status_code == 403, path
            assert response.json() == {
                "error": "admin API is loopback-only; start with --admin-token to share"
            }
    async with client(admin.app, host="::1") as ipv6_loopback:
        assert (await ipv6_loopback.get(f"{API}/health")).status_code == 200


async def test_a_token_is_required_from_everyone_once_configured(admin: Admin) -> None:
    app = DoemuApp(admin.runtime, admin_token="s3cret")
    unauthorized = {"error": "admin API requires 'Authorization: Bearer <admin token>'"}
    async with client(app, host="10.1.2.3") as remote, client(app) as local:
        for http in (remote, local):
            response = await http.get(f"{API}/health")
            assert (response.status_code, response.json()) == (401, unauthorized)
            assert response.headers["www-authenticate"] == "Bearer"
            for value in (
                b"Bearer wrong",
                b"s3cret",
                b"Bearer s3cret ",
                b"Basic s3cret",
                b"Bearer \xff\xfe",
                b"",
            ):
                response = await http.get(f"{API}/health", headers={b"authorization": value})
                assert (response.status_code, response.json()) == (401, unauthorized), value
            for value in (b"Bearer s3cret", b"bearer s3cret"):
                response = await http.get(f"{API}/health", headers={b"authorization": value})
                assert (response.status_code, response.json()["ok"]) == (200, True), value
        response = await remote.post(
            f"{API}/clock",
            json={"advance_ms": 10},
            headers={"authorization": "Bearer s3cret"},
        )
        assert response.json() == {"now": T0 + 10, "manual": True}


# -- server-sent events ---------------------------------------------------------------------------


class RawStream:
    """One ASGI request driven by hand, so a response that never ends can be read as it streams."""

    def __init__(self, app: DoemuApp, path: str, spec_version: str) -> None:
        self.messages: asyncio.Queue[MutableMapping[str, Any]] = asyncio.Queue()
        self.disconnect = asyncio.Event()
        self.requested = False
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": spec_version},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(b"host", b"127.0.0.1:8787"), (b"accept", b"text/event-stream")],
            "client": ("127.0.0.1", 1234),
            "server": ("127.0.0.1", 8787),
        }
        self.task = asyncio.ensure_future(app(scope, self._receive, self._send))
        self.buffer = b""

    async def _receive(self) -> dict[str, Any]:
        if not self.requested:
            self.requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self.disconnect.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: MutableMapping[str, Any]) -> None:
        await self.messages.put(message)

    async def start(self) -> MutableMapping[str, Any]:
        async with asyncio.timeout(5):
            return await self.messages.get()

    async def next_block(self) -> str:
        """The next SSE block (up to a blank line), within a deadline."""
        async with asyncio.timeout(5):
            while b"\n\n" not in self.buffer:
                message = await self.messages.get()
                assert message["type"] == "http.response.body" and message.get("more_body")
                self.buffer += message["body"]
        block, self.buffer = self.buffer.split(b"\n\n", 1)
        return block.decode()

    async def close(self) -> None:
        self.disconnect.set()
        async with asyncio.timeout(5):
            await self.task  # raises if the app failed


def parse_event(block: str) -> tuple[str, dict[str, Any]]:
    fields = dict(line.split(": ", 1) for line in block.splitlines())
    return fields["event"], json.loads(fields["data"])


@pytest.mark.parametrize("spec_version", ["2.3", "2.4"])
async def test_events_stream_delivers_lifecycle_events_and_closes(
    admin: Admin, spec_version: str
) -> None:
    stream = RawStream(admin.app, f"{API}/events", spec_version)
    start = await stream.start()
    assert start["status"] == 200
    headers = dict(start["headers"])
    assert headers[b"content-type"] == b"text/event-stream; charset=utf-8"
    assert headers[b"cache-control"] == b"no-cache"
    assert await stream.next_block() == ": doemu lifecycle events"
    assert len(admin.runtime.events._subscribers) == 1

    await admin.stub("BOX", "sse").put("k", 1)
    kind, event = parse_event(await stream.next_block())
    hex_id = admin.id_of("BOX", "sse")
    assert (kind, event) == (
        "constructed",
        {"type": "constructed", "timestamp": T0, "binding": "BOX", "id": hex_id, "name": "sse"},
    )
    response = await admin.http.post(f"{API}/objects/BOX/sse/evict")
    assert response.json()["evicted"] is True
    kind, event = parse_event(await stream.next_block())
    assert (kind, event) == (
        "evicted",
        {"type": "evicted", "timestamp": T0, "binding": "BOX", "id": hex_id, "name": "sse"},
    )

    await stream.close()  # ends promptly although no further event arrives
    assert admin.runtime.events._subscribers == set()
    admin.runtime.events.emit("evicted", binding="BOX", id=hex_id)  # nobody listening: no error


async def test_events_head_request_ends_at_once(admin: Admin) -> None:
    response = await admin.http.head(f"{API}/events")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert admin.runtime.events._subscribers == set()


async def until(predicate: Callable[[], bool], within: float = 5.0) -> None:
    """Poll ``predicate`` until it holds, failing after ``within`` seconds."""
    async with asyncio.timeout(within):
        while True:
            if predicate():
                return
            await asyncio.sleep(0.005)


# -- over a real server --------------------------------------------------------------------------


async def test_events_and_admin_client_over_a_real_server(admin: Admin) -> None:
    """SSE over real HTTP ends when the client hangs up (else shutdown would wait on it), and the
    CLI's stdlib client decodes answers and refusals."""
    config = uvicorn.Config(
        admin.app, host="127.0.0.1", port=0, lifespan="off", log_level="warning"
    )
    server = uvicorn.Server(config)
    serving = asyncio.ensure_future(server.serve())
    try:
        async with asyncio.timeout(5):
            while not server.started:
                assert not serving.done()
                await asyncio.sleep(0.005)
        port = server.servers[0].sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=url, timeout=5) as http:
            async with http.stream("GET", f"{API}/events") as response:
                assert response.status_code == 200
                lines = response.aiter_lines()
                async with asyncio.timeout(5):
                    assert await anext(lines) == ": doemu lifecycle events"
                    assert await anext(lines) == ""
                    await admin.stub("BOX", "real").put("k", 1)
                    await http.post(f"{API}/objects/BOX/real/evict")
                    seen = []
                    while "event: evicted" not in seen:
                        seen.append(await anext(lines))
                assert "event: constructed" in seen
            # The client hung up: the server's stream must end and unsubscribe by itself.
            await until(lambda: not admin.runtime.events._subscribers)

        admin_client = AdminClient(url)
        health = await asyncio.to_thread(admin_client.get, "/health")
        assert health["ok"] is True
        rows = await asyncio.to_thread(
            admin_client.post, "/objects/BOX/real/sql", {"query": "SELECT count(*) FROM items"}
        )
        assert rows == {"columns": ["count(*)"], "rows": [[0]]}
        with pytest.raises(DoemuError, match=r"admin API GET /objects\?binding=NOPE: 404 unknown"):
            await asyncio.to_thread(admin_client.get, "/objects?binding=NOPE")
    finally:
        server.should_exit = True
        async with asyncio.timeout(5):
            await serving


@pytest.fixture
def fake_server() -> Iterator[Callable[[int, bytes], str]]:
    """A stdlib HTTP server answering every request with one canned status and body."""
    answer: dict[str, Any] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(answer["status"])
            self.send_header("content-length", str(len(answer["body"])))
            self.end_headers()
            self.wfile.write(answer["body"])

        def log_message(self, *args: Any) -> None:
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()

    def set_answer(status: int, body: bytes) -> str:
        answer.update(status=status, body=body)
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield set_answer
    httpd.shutdown()
    httpd.server_close()


def test_admin_client_tells_no_server_from_a_refusal(fake_server: Any) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    with pytest.raises(AdminUnavailable, match="no doemu server at"):
        AdminClient(f"http://127.0.0.1:{free}", timeout=2).get("/health")

    url = fake_server(200, b"<html>not doemu</html>")
    with pytest.raises(AdminUnavailable, match="something other than JSON"):
        AdminClient(url, timeout=2).get("/health")

    url = fake_server(400, b'{"error": "the reason"}')
    with pytest.raises(DoemuError) as info:
        AdminClient(url, timeout=2).get("/health")
    assert str(info.value) == "admin API GET /health: 400 the reason"
    assert not isinstance(info.value, AdminUnavailable)

    url = fake_server(502, b"<html>bad gateway</html>")
    with pytest.raises(DoemuError) as info:
        AdminClient(url, timeout=2).get("/health")
    assert str(info.value) == "admin API GET /health: 502 Bad Gateway"

    url = fake_server(200, b'{"ok": true}')
    assert AdminClient(url + "/", timeout=2).get("/health") == {"ok": True}
