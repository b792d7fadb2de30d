"""ctx.storage.sql's authorizer: what it refuses (the internal tables, transactions, pragmas
and functions) with the connection left usable, and what it allows (pragmas, SQLite's own schema
changes, FTS5), with views and trusted statements unable to leak internal tables."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import pytest

from doemu.errors import SqlNotAllowedError
from doemu.storage import ObjectStorage

from .settled import settled

# The error texts spelled out (golden), not imported from doemu: a drift in doemu's copy of
# Cloudflare's wording must fail a test.
SQL_TRANSACTION = (
    "To execute a transaction, please use the state.storage.transaction() or "
    "state.storage.transactionSync() APIs instead of the SQL BEGIN TRANSACTION or SAVEPOINT "
    "statements. The JavaScript API is safer because it will automatically roll back on "
    "exceptions, and because it interacts correctly with Durable Objects' automatic atomic "
    "write coalescing."
)


# -- the authorizer ------------------------------------------------------------------------------

REFUSED = [
    ("SELECT * FROM _cf_KV", "access to _cf_KV.key is prohibited: SQLITE_AUTH"),
    ("SELECT value FROM _cf_KV", "access to _cf_KV.value is prohibited: SQLITE_AUTH"),
    ("SELECT count(*) FROM _cf_METADATA", "not authorized: SQLITE_AUTH"),
    ("SELECT * FROM _CF_kv", "access to _cf_KV.key is prohibited: SQLITE_AUTH"),
    ("INSERT INTO _cf_KV VALUES ('k', x'00')", "not authorized: SQLITE_AUTH"),
    ("UPDATE _cf_KV SET value = NULL", "not authorized: SQLITE_AUTH"),
    ("DELETE FROM _cf_KV", "not authorized: SQLITE_AUTH"),
    ("DROP TABLE _cf_KV", "not authorized: SQLITE_AUTH"),
    ("ALTER TABLE _cf_KV ADD COLUMN x", "not authorized: SQLITE_AUTH"),
    ("CREATE INDEX i ON _cf_KV (value)", "not authorized: SQLITE_AUTH"),
    ("CREATE TABLE _cf_mine (a)", "not authorized: SQLITE_AUTH"),
    ("CREATE VIEW _cf_v AS SELECT 1", "not authorized: SQLITE_AUTH"),
    ("CREATE TRIGGER _cf_t AFTER INSERT ON t BEGIN SELECT 1; END", "not authorized: SQLITE_AUTH"),
    ("PRAGMA table_info(_cf_KV)", "not authorized: SQLITE_AUTH"),
    ("BEGIN", SQL_TRANSACTION),
    ("BEGIN TRANSACTION", SQL_TRANSACTION),
    ("COMMIT", SQL_TRANSACTION),
    ("END", SQL_TRANSACTION),
    ("ROLLBACK", SQL_TRANSACTION),
    ("SAVEPOINT x", SQL_TRANSACTION),
    ("RELEASE x", SQL_TRANSACTION),
    ("ROLLBACK TO x", SQL_TRANSACTION),
    ("ATTACH DATABASE 'other.sqlite' AS other", "not authorized: SQLITE_AUTH"),
    ("DETACH DATABASE other", "not authorized: SQLITE_AUTH"),
    ("CREATE TEMP TABLE tmp (a)", "not authorized: SQLITE_AUTH"),
    ("CREATE TEMPORARY VIEW tv AS SELECT 1", "not authorized: SQLITE_AUTH"),
    ("CREATE TEMP TRIGGER tt AFTER INSERT ON t BEGIN SELECT 1; END", "not authorized: SQLITE_AUTH"),
    ("PRAGMA journal_mode", "not authorized: SQLITE_AUTH"),
    ("PRAGMA journal_mode = DELETE", "not authorized: SQLITE_AUTH"),
    ("PRAGMA synchronous = OFF", "not authorized: SQLITE_AUTH"),
    ("PRAGMA user_version", "not authorized: SQLITE_AUTH"),
    ("PRAGMA foreign_keys = maybe", "not authorized: SQLITE_AUTH"),
    ("PRAGMA data_version = 1", "not authorized: SQLITE_AUTH"),
    ("PRAGMA optimize(abc)", "not authorized: SQLITE_AUTH"),
    ("PRAGMA TABLE_INFO(t)", "not authorized: SQLITE_AUTH"),
    ("SELECT sqlite_version()", "not authorized to use function: sqlite_version: SQLITE_ERROR"),
    ("CREATE VIRTUAL TABLE r USING rtree(id, x0, x1)", "not authorized: SQLITE_AUTH"),
]


@pytest.mark.parametrize(("query", "message"), REFUSED)
def test_refused_sql_leaves_the_connection_usable(
    storage: ObjectStorage, query: str, message: str
) -> None:
    storage.sql.exec("CREATE TABLE t (a)")
    storage.sql.exec("INSERT INTO t VALUES (1)")
    storage.put("kv", "value")
    with pytest.raises(SqlNotAllowedError) as info:
        storage.sql.exec(query)
    assert info.value.message == message
    # The earlier writes of the turn survive, and the connection keeps working.
    storage.sql.exec("INSERT INTO t VALUES (2)")
    storage.commit()
    assert storage.sql.exec("SELECT count(*) AS n FROM t").one().n == 2
    assert settled(storage.get("kv")) == "value"


def _has_row(row: dict[str, Any]) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda rows: row in rows


def _one_integer(column: str) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda rows: len(rows) == 1 and type(rows[0][column]) is int


T_A = {"cid": 0, "name": "a", "type": "", "notnull": 0, "dflt_value": None, "pk": 0}
QUICK_CHECK_OK = [{"quick_check": "ok"}]

#: Each allowed pragma, on ``CREATE TABLE t (a); CREATE INDEX t_a ON t (a)``, and SQLite's answer
#: (or a check of it, where the answer holds more than the user's schema or varies by connection).
ALLOWED_PRAGMAS: list[tuple[str, Any]] = [
    ("PRAGMA table_info(t)", [T_A]),
    ("PRAGMA table_xinfo(t)", [{**T_A, "hidden": 0}]),
    (
        "PRAGMA table_list",
        _has_row({"schema": "main", "name": "t", "type": "table", "ncol": 1, "wr": 0, "strict": 0}),
    ),
    ("PRAGMA index_list(t)", [{"seq": 0, "name": "t_a", "unique": 0, "origin": "c", "partial": 0}]),
    ("PRAGMA index_info(t_a)", [{"seqno": 0, "cid": 0, "name": "a"}]),
    (
        "PRAGMA index_xinfo(t_a)",
        [
            {"seqno": 0, "cid": 0, "name": "a", "desc": 0, "coll": "BINARY", "key": 1},
            {"seqno": 1, "cid": -1, "name": None, "desc": 0, "coll": "BINARY", "key": 0},
        ],
    ),
    ("PRAGMA foreign_keys", [{"foreign_keys": 1}]),  # on, as on Cloudflare
    ("PRAGMA foreign_keys = ON", []),
    ("PRAGMA foreign_keys = 'off'", []),
    ("PRAGMA defer_foreign_keys = true", []),
    ("PRAGMA foreign_key_check", []),
    ("PRAGMA foreign_key_check(t)", []),
    ("PRAGMA foreign_key_list(t)", []),
    ("PRAGMA case_sensitive_like = 1", []),
    ("PRAGMA ignore_check_constraints = no", []),
    ("PRAGMA legacy_alter_table = off", []),
    ("PRAGMA recursive_triggers = yes", []),
    ("PRAGMA reverse_unordered_selects = false", []),
    ("PRAGMA data_version", _one_integer("data_version")),
    ("PRAGMA quick_check", QUICK_CHECK_OK),
    ("PRAGMA quick_check(5)", QUICK_CHECK_OK),
    ("PRAGMA quick_check(t)", QUICK_CHECK_OK),
    ("PRAGMA optimize", []),
    ("PRAGMA optimize(65538)", []),
    ("SELECT * FROM pragma_table_info('t')", [T_A]),
]


@pytest.mark.parametrize(
    ("query", "expected"), ALLOWED_PRAGMAS, ids=[query for query, _ in ALLOWED_PRAGMAS]
)
def test_allowed_pragmas(storage: ObjectStorage, query: str, expected: Any) -> None:
    storage.sql.exec("CREATE TABLE t (a); CREATE INDEX t_a ON t (a)")
    rows = [dict(row) for row in storage.sql.exec(query)]
    if callable(expected):
        assert expected(rows), rows
    else:
        assert rows == expected
    assert storage.sql.exec("SELECT count(*) AS n FROM t").one().n == 0  # still usable


def test_schema_changes_that_sqlite_runs_internally_are_allowed(storage: ObjectStorage) -> None:
    storage.sql.exec(
        """
        CREATE TABLE t (a INTEGER, b TEXT DEFAULT CURRENT_TIMESTAMP);
        ALTER TABLE t ADD COLUMN c TEXT;
        ALTER TABLE t RENAME COLUMN c TO d;
        ALTER TABLE t DROP COLUMN d;
        ALTER TABLE t RENAME TO u;
        CREATE VIEW v AS SELECT a FROM u;
        WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 3)
        INSERT INTO u (a) SELECT x FROM n;
        """
    )
    row = storage.sql.exec(
        "SELECT count(*) AS n, json_group_array(a) AS j, coalesce(max(a), 0) AS m, "
        "typeof(b) AS tb FROM u"
    ).one()
    assert row == {"n": 3, "j": "[1,2,3]", "m": 3, "tb": "text"}
    assert storage.sql.exec("SELECT * FROM v").toArray() == [{"a": 1}, {"a": 2}, {"a": 3}]


def test_fts5_virtual_tables_are_allowed(storage: ObjectStorage) -> None:
    if "ENABLE_FTS5" not in {
        row[0] for row in sqlite3.connect(":memory:").execute("PRAGMA compile_options")
    }:
        pytest.skip("this SQLite build has no FTS5")
    storage.sql.exec(
        "CREATE VIRTUAL TABLE docs USING fts5(body); "
        "INSERT INTO docs VALUES ('durable objects are fun');"
    )
    assert storage.sql.exec("SELECT body FROM docs WHERE docs MATCH 'durable'").one().body


def test_views_cannot_leak_internal_tables(storage: ObjectStorage) -> None:
    storage.sql.exec("CREATE VIEW v AS SELECT * FROM _cf_KV")  # SQLite checks reads at use
    with pytest.raises(SqlNotAllowedError, match=r"access to _cf_KV\.key is prohibited"):
        storage.sql.exec("SELECT * FROM v")


def test_a_trusted_statement_is_never_reused_for_user_sql(storage: ObjectStorage) -> None:
    storage.put("k", 1)  # prepares (and caches) the storage layer's own statements
    with pytest.raises(SqlNotAllowedError):
        storage.sql.exec("SELECT value FROM _cf_KV WHERE key = ?", "k")
