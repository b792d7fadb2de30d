"""The admin API (``/__doemu/api``) looking: health, namespaces, objects, KV, the addresses it
accepts, the OpenAPI document, JSON errors for unknown routes, and access control.

The event stream has its own module (test_admin_events.py), SQL (test_admin_sql.py) and acting
on objects and the clock (test_admin_control.py) theirs.

The app is driven in-process through ``httpx.ASGITransport`` (which buffers whole responses).
Time is a :class:`ManualClock`, so alarm times and activity stamps are exact.
"""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from starlette.routing import Route

from doemu.clock import ManualClock
from doemu.server.app import DoemuApp

from .admin_helpers import API, T0, Admin, admin_on, client, make_runtime

# The error texts spelled out (golden), not imported from doemu: a drift in doemu's copy of
# Cloudflare's wording must fail a test.
INVALID_ID_FOREIGN = "Durable Object ID is not valid for this namespace."


@pytest.fixture
async def admin(tmp_path: Path) -> AsyncIterator[Admin]:
    async with admin_on(tmp_path) as ready:
        yield ready


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
    await admin.control.evict("BOX", "b")
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
    await admin.control.evict("BOX", "beta")
    await admin.control.evict("LEGACY", "gamma")
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
    await admin.control.evict("BOX", "kv")
    for address in (hex_id, hex_id.upper()):
        by_id = await admin.http.get(f"{API}/objects/BOX/{address}/kv")
        assert by_id.status_code == 200
        assert by_id.json() == {"id": hex_id, "name": "kv", "entries": entries}
    assert not admin.live("BOX", "kv")  # inspection never wakes an object

    prefixed = await admin.http.get(f"{API}/objects/BOX/kv/kv", params={"prefix": "b:", "limit": 1})
    assert prefixed.json()["entries"] == entries[1:2]
    # An object that never existed is a 404 (test_admin_inspector.py), not an empty list.

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
    response = await admin.http.delete(API)  # GET is the inspector page (test_admin_inspector)
    assert response.json() == {"error": f"no admin route DELETE {API}/"}

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
