"""The admin API's binding routes: what a KV namespace (and the others) holds, and writes that go
through the binding with its limits, over a real in-process app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from doemu.clock import ManualClock
from doemu.config.bindings import (
    D1DatabaseBinding,
    KvNamespaceBinding,
    R2BucketBinding,
    WorkerResources,
)
from doemu.runtime import Runtime
from doemu.server.app import DoemuApp

from .admin_helpers import API, T0, client


@asynccontextmanager
async def served(
    tmp_path: Path, resources: WorkerResources
) -> AsyncIterator[tuple[Runtime, httpx.AsyncClient]]:
    """A runtime with ``resources`` (manual clock at T0) behind an in-process admin client."""
    runtime = Runtime(
        worker_name="bindings-admin",
        classes={},
        persist_dir=tmp_path / "state",
        clock=ManualClock(T0),
        resources=resources,
    )
    await runtime.start()
    try:
        async with client(DoemuApp(runtime)) as http:
            yield runtime, http
    finally:
        await runtime.close()


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[tuple[Runtime, httpx.AsyncClient]]:
    async with served(tmp_path, WorkerResources(kv=(KvNamespaceBinding("CACHE", "ns-1"),))) as it:
        yield it


async def test_bindings_are_listed_with_their_files(
    http: tuple[Runtime, httpx.AsyncClient],
) -> None:
    runtime, client_ = http
    listed = (await client_.get(f"{API}/bindings")).json()
    assert listed == [
        {
            "binding": "CACHE",
            "type": "kv",
            "resource": "ns-1",
            "file": str(runtime.persist_dir / "kv" / "ns-1.sqlite"),
        }
    ]


async def test_kv_entries_read_and_written_through_the_binding(
    http: tuple[Runtime, httpx.AsyncClient],
) -> None:
    runtime, c = http
    await runtime.env.CACHE.put("a/b", "hello", metadata={"m": 1}, expirationTtl=3600)
    await runtime.env.CACHE.put("raw", b"\xff\x00")
    page = (await c.get(f"{API}/kv/CACHE/keys", params={"prefix": "a/"})).json()
    assert page == {
        "keys": [{"name": "a/b", "expiration": int(T0 // 1000) + 3600, "metadata": {"m": 1}}],
        "list_complete": True,
        "cursor": None,
        "count": 1,
    }
    first = (await c.get(f"{API}/kv/CACHE/keys", params={"limit": 1})).json()
    assert first["list_complete"] is False and first["cursor"]
    entry = (await c.get(f"{API}/kv/CACHE/keys/{quote('a/b', safe='')}")).json()
    assert entry == {
        "key": "a/b",
        "value": "hello",
        "metadata": {"m": 1},
        "expiration": int(T0 // 1000) + 3600,
    }
    assert (await c.get(f"{API}/kv/CACHE/keys/raw")).json()["value"] == {"$bytes": "/wA="}

    stored = await c.put(f"{API}/kv/CACHE/keys/new", json={"value": "v", "metadata": [1]})
    assert stored.json() == {"key": "new", "stored": True}
    assert await runtime.env.CACHE.get("new") == "v"
    refused = await c.put(f"{API}/kv/CACHE/keys/new", json={"value": "v", "expirationTtl": 5})
    assert refused.status_code == 400
    assert refused.json() == {
        "error": "KV PUT failed: 400 Invalid expiration_ttl of 5. Expiration TTL must be at "
        "least 60."
    }
    assert (await c.delete(f"{API}/kv/CACHE/keys/new")).json() == {"key": "new", "deleted": True}
    missing = await c.get(f"{API}/kv/CACHE/keys/new")
    assert missing.status_code == 404
    assert missing.json() == {"error": "no key 'new' in KV namespace CACHE"}
    unknown = await c.get(f"{API}/kv/NOPE/keys")
    assert unknown.status_code == 404
    assert unknown.json() == {"error": "unknown KV binding 'NOPE'; known: CACHE"}
    bad = await c.put(f"{API}/kv/CACHE/keys/x", json={"value": 5})
    assert bad.status_code == 400 and "'value' must be a string" in bad.json()["error"]


@pytest.fixture
async def d1(tmp_path: Path) -> AsyncIterator[tuple[Runtime, httpx.AsyncClient, Path]]:
    folder = tmp_path / "migrations"
    folder.mkdir()
    (folder / "0001_users.sql").write_text("CREATE TABLE users (id INTEGER PRIMARY KEY, n TEXT);")
    (folder / "0002_seed.sql").write_text("INSERT INTO users (n) VALUES ('first');")
    resources = WorkerResources(d1=(D1DatabaseBinding("DB", "app", None, folder),))
    async with served(tmp_path, resources) as (runtime, http):
        yield runtime, http, folder


async def test_d1_migrations_and_sql_through_the_admin_api(
    d1: tuple[Runtime, httpx.AsyncClient, Path],
) -> None:
    runtime, c, folder = d1
    state = (await c.get(f"{API}/d1/DB/migrations")).json()
    assert state == {
        "folder": str(folder),
        "applied": [],
        "pending": ["0001_users.sql", "0002_seed.sql"],
    }
    tables = await c.post(f"{API}/d1/DB/sql", json={"query": "SELECT name FROM sqlite_master"})
    assert tables.json()["rows"] == []  # looking created no d1_migrations table
    applied = await c.post(f"{API}/d1/DB/migrations/apply")
    assert applied.json() == {"applied": ["0001_users.sql", "0002_seed.sql"]}
    assert (await c.post(f"{API}/d1/DB/migrations/apply")).json() == {"applied": []}
    assert [m["name"] for m in (await c.get(f"{API}/d1/DB/migrations")).json()["applied"]] == [
        "0001_users.sql",
        "0002_seed.sql",
    ]
    read = await c.post(f"{API}/d1/DB/sql", json={"query": "SELECT n FROM users"})
    assert read.json() == {"columns": ["n"], "rows": [["first"]]}
    refused = await c.post(f"{API}/d1/DB/sql", json={"query": "DELETE FROM users"})
    assert (
        refused.status_code == 400 and "read-only SQL cannot run DELETE" in refused.json()["error"]
    )
    written = await c.post(
        f"{API}/d1/DB/sql",
        json={"query": "INSERT INTO users (n) VALUES (?)", "params": ["x"], "write": True},
    )
    assert written.status_code == 200 and written.json()["meta"]["changes"] == 1
    assert await runtime.env.DB.prepare("SELECT count(*) AS c FROM users").first("c") == 2
    bad = await c.post(f"{API}/d1/DB/sql", json={"query": "SELECT * FROM nope", "write": True})
    assert bad.status_code == 400
    assert bad.json() == {"error": "D1_ERROR: no such table: nope: SQLITE_ERROR"}
    unknown = await c.post(f"{API}/d1/NOPE/sql", json={"query": "SELECT 1"})
    assert unknown.status_code == 404 and unknown.json() == {
        "error": "unknown D1 binding 'NOPE'; known: DB"
    }
    listed = (await c.get(f"{API}/bindings")).json()
    assert listed[0]["type"] == "d1" and listed[0]["resource"] == "app"


async def test_r2_objects_through_the_admin_api(tmp_path: Path) -> None:
    resources = WorkerResources(r2=(R2BucketBinding("FILES", "files"),))
    async with served(tmp_path, resources) as (runtime, c):
        await runtime.env.FILES.put("a/b", "hello", httpMetadata={"contentType": "text/x"})
        await runtime.env.FILES.put("c", b"\x00")
        listed = (await c.get(f"{API}/r2/FILES/objects", params={"delimiter": "/"})).json()
        assert [o["key"] for o in listed["objects"]] == ["c"]
        assert listed["delimitedPrefixes"] == ["a/"] and listed["truncated"] is False
        meta = (await c.get(f"{API}/r2/FILES/objects/{quote('a/b', safe='')}")).json()
        assert meta["size"] == 5 and meta["httpMetadata"] == {"contentType": "text/x"}
        assert meta["uploaded"] == T0 and meta["multipart"] is False
        body = await c.get(f"{API}/r2/FILES/objects/{quote('a/b', safe='')}?body=1")
        assert body.content == b"hello" and body.headers["content-type"].startswith("text/x")
        gone = await c.delete(f"{API}/r2/FILES/objects/c")
        assert gone.json() == {"key": "c", "deleted": True}
        missing = await c.get(f"{API}/r2/FILES/objects/c")
        assert missing.status_code == 404
        assert missing.json() == {"error": "no object 'c' in R2 bucket FILES"}
        assert (await c.get(f"{API}/r2/NOPE/objects")).status_code == 404


async def test_listings_count_what_has_the_prefix(tmp_path: Path) -> None:
    """A KV page says how many live keys have its prefix (an expired one is not counted), an R2
    page how many objects, and how many bytes, are under its prefix at any depth: what the
    inspector's "200 of 230" needs."""
    resources = WorkerResources(
        kv=(KvNamespaceBinding("CACHE", "ns-1"),), r2=(R2BucketBinding("FILES", "files"),)
    )
    async with served(tmp_path, resources) as (runtime, c):
        for n in range(5):
            await runtime.env.CACHE.put(f"a/{n}", "v")
        await runtime.env.CACHE.put("a/short", "v", expirationTtl=60)
        await runtime.env.CACHE.put("b", "v")
        page = (await c.get(f"{API}/kv/CACHE/keys", params={"prefix": "a/", "limit": 2})).json()
        assert (len(page["keys"]), page["count"], page["list_complete"]) == (2, 6, False)
        assert isinstance(runtime.clock, ManualClock)
        runtime.clock.advance(61_000)
        assert (await c.get(f"{API}/kv/CACHE/keys", params={"prefix": "a/"})).json()["count"] == 5
        assert (await c.get(f"{API}/kv/CACHE/keys")).json()["count"] == 6

        await runtime.env.FILES.put("docs/a.txt", "hello")
        await runtime.env.FILES.put("docs/img/b.png", b"\x00" * 10)
        await runtime.env.FILES.put("top", "x")
        docs = (
            await c.get(f"{API}/r2/FILES/objects", params={"prefix": "docs/", "delimiter": "/"})
        ).json()
        assert [o["key"] for o in docs["objects"]] == ["docs/a.txt"]
        assert docs["delimitedPrefixes"] == ["docs/img/"]
        assert (docs["count"], docs["bytes"]) == (2, 15)
        everything = (await c.get(f"{API}/r2/FILES/objects")).json()
        assert (everything["count"], everything["bytes"]) == (3, 16)


async def test_crons_say_now_on_the_doemu_clock(tmp_path: Path) -> None:
    """``/crons`` carries the clock's now (the one ``next`` is on), with or without crons."""
    async with served(tmp_path, WorkerResources()) as (runtime, c):
        listed = (await c.get(f"{API}/crons")).json()
        assert listed == {"handler": False, "crons": [], "history": [], "now": T0}
        assert isinstance(runtime.clock, ManualClock)
        runtime.clock.advance(5_000)
        assert (await c.get(f"{API}/crons")).json()["now"] == T0 + 5_000
