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
    out = server.output()
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
