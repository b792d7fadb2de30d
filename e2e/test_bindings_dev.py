"""The bindings on a real ``doemu dev``: the banner names them, crons fire on the manual clock
moved through the admin API, ``/__scheduled`` runs one now, and a restart does not replay the
runs missed while the server was down."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

APP = Path(__file__).resolve().parent / "apps" / "bindings_app"
MINUTE = 60_000


def cron_keys(http: httpx.Client) -> list[str]:
    keys = http.get("/__doemu/api/kv/CACHE/keys", params={"prefix": "cron:"}).json()["keys"]
    return [k["name"] for k in keys]


def test_crons_on_a_real_server(dev_server: Any) -> None:
    """1. The banner lists the KV namespace, the D1 database and the cron trigger.
    2. With --clock manual, moving the clock three minutes runs scheduled() three times.
    3. GET /__scheduled?cron=… runs it once more, now, with that cron.
    4. SIGKILL, restart: no earlier run is replayed at start-up (the in-process tests move the
       clock across the downtime; here the new manual clock starts at the real time)."""
    server = dev_server(APP, "--clock", "manual")
    out = server.output
    assert "CACHE → kv e2e-cache" in out and "DB → d1 e2e-db-id" in out
    assert "crons:   * * * * * (scheduled;" in out
    with httpx.Client(base_url=server.url, timeout=10) as http:
        page = http.get("/hello")  # [assets] answer before the Worker
        assert page.status_code == 200 and "hello from assets" in page.text
        assert http.get("/hello.html").headers["location"] == "/hello"
        assert http.get("/kv-count").text == "0"  # everything else reaches the Worker
        assert cron_keys(http) == []
        http.post("/__doemu/api/clock", json={"advance_ms": 3 * MINUTE}).raise_for_status()
        assert len(cron_keys(http)) == 3
        ran = http.get("/__scheduled", params={"cron": "*/5 * * * *"})
        assert (ran.status_code, ran.text) == (200, "Ran scheduled event")
        keys = cron_keys(http)
        assert len(keys) == 4
        crons = http.get("/__doemu/api/crons").json()
        assert [r["cron"] for r in crons["history"]] == ["* * * * *"] * 3 + ["*/5 * * * *"]
    server.kill()
    server.start()
    with httpx.Client(base_url=server.url, timeout=10, follow_redirects=False) as http:
        assert cron_keys(http) == keys  # nothing replayed
        assert http.get("/__doemu/api/crons").json()["history"] == []


def test_bad_input_gets_cloudflares_errors_and_the_server_keeps_serving(dev_server: Any) -> None:
    """1. Bad calls from the Worker (oversized keys and values, a bad cursor, an unsatisfiable
       range, bad SQL, a value D1 cannot bind, an unknown binding) get Cloudflare's errors.
    2. A binding error the Worker does not catch is a JSON 500, not a traceback.
    3. Bad requests to the bindings' admin routes are JSON 4xx naming the problem.
    4. Through all of it, nothing was written, and the server keeps serving."""
    server = dev_server(APP)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        http.put("/kv/kept", content=b"before").raise_for_status()
        http.put("/r2/r2-bad-input", content=b"tiny").raise_for_status()
        seen = http.get("/bad").json()
        assert seen["kv_long_key"] == [
            "KvError",
            "Error: KV PUT failed: 414 UTF-8 encoded length of 600 exceeds key length limit of "
            "512.",
        ]
        assert seen["kv_big_value"][1].startswith("Error: KV PUT failed: 413 Value length of")
        assert "Expiration TTL must be at least 60" in seen["kv_bad_ttl"][1]
        assert seen["kv_bad_cursor"][0] == "ok"  # as Miniflare: a listing of nothing
        assert seen["r2_bad_range"][1] == (
            "Error: get: The requested range is not satisfiable (10039)"
        )
        assert (
            seen["r2_long_key"][1] == "Error: put: The specified object name is not valid. (10020)"
        )
        assert seen["d1_syntax"][1] == (
            'Error: D1_ERROR: near "SELEC": syntax error at offset 0: SQLITE_ERROR'
        )
        assert seen["d1_no_table"][1] == "Error: D1_ERROR: no such table: nope: SQLITE_ERROR"
        assert seen["d1_bad_bind"][1].startswith("Error: D1_TYPE_ERROR: Type 'object'")
        assert seen["unknown_binding"][0] == "AttributeError"

        uncaught = http.get("/kv-uncaught")
        assert uncaught.status_code == 500
        assert "KV GET failed: 414" in uncaught.json()["error"]

        api = "/__doemu/api"
        assert http.get(f"{api}/kv/NOPE/keys").status_code == 404
        assert http.put(f"{api}/kv/CACHE/keys/x", content=b"{").status_code == 415
        bad_json = http.put(
            f"{api}/kv/CACHE/keys/x", content=b"{", headers={"content-type": "application/json"}
        )
        assert bad_json.status_code == 400 and "not valid JSON" in bad_json.json()["error"]
        assert http.post(f"{api}/d1/DB/sql", json={"query": 5}).status_code == 400
        assert http.post(f"{api}/crons/run", json={"cron": ["x"]}).status_code == 400
        bad_cursor = http.get(f"{api}/r2/FILES/objects", params={"cursor": "abc"})
        assert bad_cursor.status_code == 400 and "not a cursor" in bad_cursor.json()["error"]

        assert http.get("/kv/kept").json() == "before"  # nothing was corrupted
        assert http.get("/kv/big").json() is None and http.get("/kv-count").text == "1"
        http.put("/kv/after", content=b"still serving").raise_for_status()
        assert http.get("/kv/after").json() == "still serving"
        assert http.get("/r2-check").json() == {"keys": ["r2-bad-input"], "bad": []}
