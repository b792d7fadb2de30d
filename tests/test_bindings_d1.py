"""D1 databases in process: prepare/bind/first/all/run/raw, batches as transactions, exec, meta,
D1's value conversions and error texts, migrations, durability.

The expectations were read off the same Python calls on workerd-Python under Miniflare
(``e2e/test_bindings_differential.py`` runs them both ways); where Miniflare and Cloudflare's
documentation disagree (``exec``), the test says which one doemu follows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyodide.ffi import JsException
from workers import DurableObject

from doemu.bindings.d1 import D1Error
from doemu.bindings.d1.engine import D1Engine, Query
from doemu.bindings.d1.migrations import (
    apply_migrations,
    create_migration,
    migration_state,
)
from doemu.compat.rpc import JsDict
from doemu.config.bindings import D1DatabaseBinding
from doemu.storage import durability
from doemu.testing.plugin import HarnessFactory


class Users(DurableObject):
    """An object that reads the database (bindings reach objects through env)."""

    async def count(self) -> int:
        return int(await self.env.DB.prepare("SELECT count(*) AS n FROM users").first("n"))


async def _db(doemu_harness: HarnessFactory, **options: Any) -> Any:
    h = await doemu_harness({"USERS": Users}, d1_databases=["DB"], **options)
    await h.env.DB.exec(
        "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, score REAL, data BLOB)"
    )
    return h


async def error_of(awaitable: Any) -> str:
    with pytest.raises(JsException) as info:
        await awaitable
    return str(info.value)


async def test_queries_and_their_result_shapes(doemu_harness: HarnessFactory) -> None:
    db = (await _db(doemu_harness)).env.DB
    inserted = (
        await db.prepare("INSERT INTO users (name, score) VALUES (?, ?)").bind("a", 1.5).run()
    )
    assert isinstance(inserted, JsDict) and inserted.success is True
    assert inserted.results == []
    meta = inserted.meta
    assert (meta.changes, meta.last_row_id, meta.changed_db) == (1, 1, True)
    assert meta.rows_written == 1 and meta.size_after > 0 and meta.duration >= 0
    assert meta.served_by_primary is True and "sql_duration_ms" in meta.timings
    await db.prepare("INSERT INTO users (name, score) VALUES (?, ?)").bind("b", 2).run()

    everything = await db.prepare("SELECT * FROM users ORDER BY id").all()
    assert everything.results == [
        {"id": 1, "name": "a", "score": 1.5, "data": None},
        {"id": 2, "name": "b", "score": 2, "data": None},
    ]
    assert type(everything.results[1].score) is int  # the JS number 2.0 is the Python int 2
    assert everything.meta.changed_db is False and everything.meta.rows_read == 2
    first = await db.prepare("SELECT * FROM users WHERE id = ?").bind(1).first()
    assert isinstance(first, JsDict) and first.name == "a"
    assert await db.prepare("SELECT name FROM users WHERE id = ?").bind(2).first("name") == "b"
    assert await db.prepare("SELECT * FROM users WHERE id = 99").first() is None
    assert await db.prepare("SELECT 1 AS a WHERE 0").first("a") is None
    assert await db.prepare("SELECT id, name FROM users ORDER BY id").raw() == [[1, "a"], [2, "b"]]
    assert await db.prepare("SELECT id FROM users WHERE 0").raw(columnNames=True) == [["id"]]
    assert await db.prepare("SELECT 1 AS a").raw({"columnNames": True}) == [["a"], [1]]
    assert (await db.prepare("SELECT id FROM users").run()).results == [{"id": 1}, {"id": 2}]
    assert await db.prepare("SELECT 1 AS a, 2 AS a").first() == {"a": 2}  # the later one wins
    # A statement is immutable: bind() returns a new one, binding again replaces the values.
    select = db.prepare("SELECT ? AS v")
    assert await select.bind(1).bind(2).first("v") == 2
    assert await select.bind(3).first("v") == 3
    assert await db.prepare("SELECT ?1 AS a, ?1 AS b").bind(7).first() == {"a": 7, "b": 7}
    assert await db.prepare("SELECT :x AS a").bind(7).first("a") == 7


async def test_values_cross_as_d1_converts_them(doemu_harness: HarnessFactory) -> None:
    db = (await _db(doemu_harness)).env.DB
    row = (
        await db.prepare("SELECT typeof(?) AS t, ? / 2 AS d, typeof(?) AS s")
        .bind(7, 7, "x")
        .first()
    )
    assert row == {"t": "real", "d": 3.5, "s": "text"}  # a JS number is bound as REAL
    assert await db.prepare("SELECT ? AS v, typeof(?) AS t").bind(False, True).first() == {
        "v": 0,
        "t": "real",
    }
    blob = await db.prepare("SELECT ? AS v, typeof(?) AS t").bind(b"\x01\x02", b"\x01").first()
    assert blob == {"v": [1, 2], "t": "blob"}  # a BLOB comes back as a list of bytes
    assert await db.prepare("SELECT ? AS v").bind([1, 2, 3]).first("v") == [1, 2, 3]
    assert await db.prepare("SELECT ? AS v").bind(None).first("v") is None
    big = await db.prepare("SELECT 9007199254740991 AS a, 9007199254740992 AS b").first()
    assert big == {"a": 9007199254740991, "b": 9007199254740992.0}
    assert type(big.b) is float  # beyond 2**53 a JS number is no longer an exact integer
    with pytest.raises(D1Error) as info:
        db.prepare("SELECT ?").bind({"a": 1})  # refused at bind(), synchronously, as in JS
    assert str(info.value) == (
        "Error: D1_TYPE_ERROR: Type 'object' not supported for value '[object Object]'"
    )
    with pytest.raises(
        D1Error, match="Type 'bigint' not supported for value '1152921504606846976'"
    ):
        db.prepare("SELECT ?").bind(2**60)
    with pytest.raises(TypeError, match="cannot be sent over RPC"):
        db.prepare("SELECT ?").bind((1, 2))


async def test_d1s_error_texts(doemu_harness: HarnessFactory) -> None:
    db = (await _db(doemu_harness)).env.DB
    assert await error_of(db.prepare("SELECT * FROM nope").all()) == (
        "Error: D1_ERROR: no such table: nope: SQLITE_ERROR"
    )
    assert await error_of(db.prepare("SELEC 1").all()) == (
        'Error: D1_ERROR: near "SELEC": syntax error at offset 0: SQLITE_ERROR'
    )
    await db.prepare("INSERT INTO users (id, name) VALUES (1, 'x')").run()
    assert await error_of(db.prepare("INSERT INTO users (id, name) VALUES (1, 'dup')").run()) == (
        "Error: D1_ERROR: UNIQUE constraint failed: users.id: SQLITE_CONSTRAINT "
        "(extended: SQLITE_CONSTRAINT_PRIMARYKEY)"
    )
    assert await error_of(db.prepare("SELECT ?, ?").bind(1).all()) == (
        "Error: D1_ERROR: Wrong number of parameter bindings for SQL query."
    )
    assert await error_of(db.prepare("SELECT 1 AS a").first("b")) == (
        "Error: D1_COLUMN_NOTFOUND: Column not found (b)"
    )
    assert await error_of(db.prepare("").all()) == "Error: D1_ERROR: No SQL statements detected."
    assert await error_of(db.prepare("-- nothing").all()) == (
        "Error: D1_ERROR: SQL code did not contain a statement."
    )
    # D1 is SQLite behind a Durable Object: the same authorizer as ctx.storage.sql.
    assert (await error_of(db.prepare("BEGIN TRANSACTION").run())).startswith(
        "Error: D1_ERROR: To execute a transaction, please use the state.storage.transaction()"
    )
    for refused in ("CREATE TABLE _cf_x (a)", "ATTACH DATABASE 'x' AS y", "PRAGMA journal_mode"):
        assert await error_of(db.prepare(refused).run()) == (
            "Error: D1_ERROR: not authorized: SQLITE_AUTH"
        ), refused
    assert (await db.prepare("PRAGMA foreign_keys = ON").run()).success is True
    # Nothing was broken by any of it.
    assert await db.prepare("SELECT count(*) AS n FROM users").first("n") == 1


async def test_a_batch_is_one_transaction(doemu_harness: HarnessFactory) -> None:
    db = (await _db(doemu_harness)).env.DB
    results = await db.batch(
        [
            db.prepare("INSERT INTO users (name) VALUES (?)").bind("c"),
            db.prepare("SELECT count(*) AS n FROM users"),
        ]
    )
    assert isinstance(results, list) and [r.results for r in results] == [[], [{"n": 1}]]
    assert results[0].meta.last_row_id == 1
    assert (
        await error_of(
            db.batch(
                [
                    db.prepare("INSERT INTO users (name) VALUES ('rolled back')"),
                    db.prepare("INSERT INTO nope VALUES (1)"),
                ]
            )
        )
        == "Error: D1_ERROR: no such table: nope: SQLITE_ERROR"
    )
    assert await db.prepare("SELECT count(*) AS n FROM users").first("n") == 1
    assert await error_of(db.batch([])) == "Error: D1_ERROR: No SQL statements detected."


async def test_exec_runs_line_by_line(doemu_harness: HarnessFactory) -> None:
    db = (await _db(doemu_harness)).env.DB
    done = await db.exec(
        "CREATE TABLE e (a);\n\n  \nINSERT INTO e VALUES (1); INSERT INTO e VALUES (2)"
    )
    assert isinstance(done, JsDict) and done.count == 2 and done.duration >= 0
    assert await db.prepare("SELECT count(*) AS n FROM e").first("n") == 2
    assert await error_of(db.exec("")) == (
        "Error: D1_EXEC_ERROR: Error in line 1: : No SQL statements detected."
    )
    assert await error_of(db.exec("CREATE TABLE e4 (\n a\n);")) == (
        "Error: D1_EXEC_ERROR: Error in line 1: CREATE TABLE e4 (: incomplete input: SQLITE_ERROR"
    )
    # Cloudflare: execution stops at the failing line, which the error names (Miniflare runs the
    # script as one transaction and always names line 1; doemu follows Cloudflare).
    assert await error_of(db.exec("CREATE TABLE e2 (a);\nSELECT * FROM nope")) == (
        "Error: D1_EXEC_ERROR: Error in line 2: SELECT * FROM nope: no such table: nope: "
        "SQLITE_ERROR"
    )


async def test_sessions_bookmarks_objects_and_restarts(doemu_harness: HarnessFactory) -> None:
    h = await _db(doemu_harness)
    db = h.env.DB
    session = db.withSession("first-unconstrained")
    assert session.getBookmark() is None
    await session.prepare("INSERT INTO users (name) VALUES ('s')").run()
    assert isinstance(session.getBookmark(), str)
    assert (await session.batch([session.prepare("SELECT 1 AS one")]))[0].results == [{"one": 1}]
    assert await h.stub("USERS", "reader").count() == 1
    await h.restart()
    assert await h.env.DB.prepare("SELECT name FROM users").first("name") == "s"


async def test_writes_are_fsynced_before_they_resolve_at_power_durability(
    doemu_harness: HarnessFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    monkeypatch.setattr(durability, "fsync_paths", lambda paths, **_: synced.extend(paths))
    h = await _db(doemu_harness, durability="power")
    synced.clear()
    await h.env.DB.prepare("INSERT INTO users (name) VALUES ('durable')").run()
    assert any(p.endswith("d1/DB.sqlite-wal") for p in synced)
    synced.clear()
    await h.env.DB.prepare("SELECT * FROM users").all()
    assert synced == []  # a read changed nothing: nothing to wait for


def test_migrations_apply_in_order_once(tmp_path: Path) -> None:
    folder = tmp_path / "migrations"
    binding = D1DatabaseBinding("DB", migrations_dir=folder)
    first = create_migration(binding, "Create users!")
    assert first.name == "0001_create_users.sql"
    first.write_text(
        first.read_text() + "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);\n"
    )
    second = create_migration(binding, "seed")
    second.write_text("INSERT INTO users (name) VALUES ('first');\n")
    engine = D1Engine(tmp_path / "db.sqlite")
    try:
        state = migration_state(engine, binding)
        assert state.applied == [] and state.pending == [first.name, second.name]
        assert apply_migrations(engine, binding) == [first.name, second.name]
        assert apply_migrations(engine, binding) == []  # once each
        assert [name for name, _ in migration_state(engine, binding).applied] == [
            first.name,
            second.name,
        ]
        broken = create_migration(binding, "broken")
        broken.write_text(
            "INSERT INTO users (name) VALUES ('never');\nINSERT INTO nope VALUES (1);"
        )
        with pytest.raises(D1Error, match=r"Migration 0003_broken\.sql failed: D1_ERROR: no such"):
            apply_migrations(engine, binding)
        [result] = engine.run([Query("SELECT count(*) FROM users")])
        assert result.rows == [(1,)]  # the failed file left nothing behind
        assert migration_state(engine, binding).pending == [broken.name]
    finally:
        engine.close()
