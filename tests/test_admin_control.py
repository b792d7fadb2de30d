"""The admin API acting: alarms shown and run on demand, evict and reset (one object or all),
and the manual clock advanced to run due alarms (a real clock cannot be moved).

Time is a :class:`ManualClock`, so alarm times are exact.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from doemu.server.app import DoemuApp

from .admin_helpers import ALARMS, API, JSON_TYPE, T0, Admin, admin_on, client, make_runtime


@pytest.fixture
async def admin(tmp_path: Path) -> AsyncIterator[Admin]:
    async with admin_on(tmp_path) as ready:
        yield ready


async def test_alarm_is_shown_and_run_on_demand(admin: Admin) -> None:
    await admin.stub("BOX", "al").arm(T0 + 3_600_000)
    await admin.control.evict("BOX", "al")
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
