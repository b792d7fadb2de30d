"""The admin API's SQL route: read-only queries read the file without waking the object, writes
run inside it under its authorizer, and bad bodies, KV-only classes and failing constructors are
refused as JSON. The app is driven in-process through ``httpx.ASGITransport``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from .admin_helpers import API, JSON_TYPE, Admin, admin_on


@pytest.fixture
async def admin(tmp_path: Path) -> AsyncIterator[Admin]:
    async with admin_on(tmp_path) as ready:
        yield ready


async def test_read_only_sql_reads_the_file_without_waking_the_object(admin: Admin) -> None:
    stub = admin.stub("BOX", "sql")
    await stub.add("one", b"\x01\x02")
    await stub.add("two")
    await admin.control.evict("BOX", "sql")
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


async def test_write_sql_runs_inside_the_object_under_its_authorizer(admin: Admin) -> None:
    await admin.stub("BOX", "w").put("k", 1)
    await admin.control.evict("BOX", "w")
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
    assert response.json() == {"error": "SQL is not enabled for this Durable Object class."}


async def test_a_failing_constructor_is_a_json_500_not_a_traceback(admin: Admin) -> None:
    response = await admin.http.post(
        f"{API}/objects/BROKEN/b/sql", json={"query": "SELECT 1", "write": True}
    )
    assert response.status_code == 500
    assert response.json() == {"error": "RuntimeError: constructor exploded"}
    assert "Traceback" not in response.text
