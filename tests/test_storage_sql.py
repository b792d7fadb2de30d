"""ctx.storage.sql: exec, cursors, multi-statement queries, bindings and the authorizer."""

from __future__ import annotations

import enum
import pathlib
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest

from doemu.errors import SqlError, SqlNotAllowedError, StorageError
from doemu.jsboundary import JsException
from doemu.storage import IteratorResult, ObjectStorage, SqlRow
from doemu.storage.sql import split_statements

from .settled import settled

# The error texts spelled out (golden), not imported from doemu: a drift in doemu's copy of
# Cloudflare's wording must fail a test.
ONE_MULTIPLE = "Expected exactly one result from SQL query, but got multiple results."
ONE_NONE = "Expected exactly one result from SQL query, but got no results."
SQL_BINDINGS_ON_EARLIER_STATEMENT = (
    "When executing multiple SQL statements in a single call, only the last statement can "
    "have parameters."
)
SQL_NO_STATEMENT = "SQL code did not contain a statement."
SQL_NOT_ENABLED = "SQL is not enabled for this Durable Object class."
SQL_TRANSACTION = (
    "To execute a transaction, please use the state.storage.transaction() or "
    "state.storage.transactionSync() APIs instead of the SQL BEGIN TRANSACTION or SAVEPOINT "
    "statements. The JavaScript API is safer because it will automatically roll back on "
    "exceptions, and because it interacts correctly with Durable Objects' automatic atomic "
    "write coalescing."
)
SQL_WRONG_BINDING_COUNT = "Wrong number of parameter bindings for SQL query."


@pytest.fixture
def artists(storage: ObjectStorage) -> ObjectStorage:
    storage.sql.exec(
        """
        CREATE TABLE artist (artistid INTEGER PRIMARY KEY, artistname TEXT);
        INSERT INTO artist (artistid, artistname) VALUES
          (123, 'Alice'),
          (456, 'Bob'),
          (789, 'Charlie');
        """
    )
    return storage


# -- cursors -------------------------------------------------------------------------------------

SELECT_ALL = "SELECT * FROM artist ORDER BY artistname ASC"


def test_iteration_yields_rows_with_item_and_attribute_access(artists: ObjectStorage) -> None:
    rows = list(artists.sql.exec(SELECT_ALL))
    assert rows == [
        {"artistid": 123, "artistname": "Alice"},
        {"artistid": 456, "artistname": "Bob"},
        {"artistid": 789, "artistname": "Charlie"},
    ]
    first = rows[0]
    assert isinstance(first, SqlRow)
    assert first["artistname"] == first.artistname == "Alice"
    assert dict(first) == {"artistid": 123, "artistname": "Alice"}
    assert list(first) == ["artistid", "artistname"]
    with pytest.raises(AttributeError):
        _ = first.missing


def test_to_array(artists: ObjectStorage) -> None:
    cursor = artists.sql.exec(SELECT_ALL)
    assert [row.artistid for row in cursor.toArray()] == [123, 456, 789]
    assert cursor.toArray() == []


def test_next_returns_done_and_value(artists: ObjectStorage) -> None:
    """workerd: ``cursor.next()`` is a JsDict ``{done, value}``; ``next(cursor)`` fails there
    (the cursor is iterable, not an iterator)."""
    cursor = artists.sql.exec(SELECT_ALL)
    first = cursor.next()
    assert first == {"done": False, "value": {"artistid": 123, "artistname": "Alice"}}
    assert first.done is False and first["value"]["artistname"] == "Alice"
    with pytest.raises(TypeError, match="not an iterator"):
        next(cursor)  # type: ignore[call-overload]
    assert next(iter(cursor)) == {"artistid": 456, "artistname": "Bob"}
    assert [row.artistname for row in cursor.toArray()] == ["Charlie"]
    assert cursor.next() == {"done": True, "value": None}


def test_lenient_next_returns_an_iterator_result(artists: ObjectStorage, lenient: None) -> None:
    cursor = artists.sql.exec(SELECT_ALL)
    first = cursor.next()
    assert isinstance(first, IteratorResult)
    assert first.done is False
    assert first.value == {"artistid": 123, "artistname": "Alice"}
    assert next(cursor) == {"artistid": 456, "artistname": "Bob"}
    assert cursor.next() == IteratorResult(False, {"artistid": 789, "artistname": "Charlie"})
    assert cursor.next() == IteratorResult(done=True, value=None)


def test_raw_shares_the_cursor_position(artists: ObjectStorage) -> None:
    cursor = artists.sql.exec(SELECT_ALL)
    raw = cursor.raw()
    assert raw.next() == IteratorResult(False, [123, "Alice"])
    assert [row.artistname for row in cursor.toArray()] == ["Bob", "Charlie"]
    assert raw.next().done is True
    assert artists.sql.exec(SELECT_ALL).raw().toArray() == [
        [123, "Alice"],
        [456, "Bob"],
        [789, "Charlie"],
    ]
    assert list(artists.sql.exec("SELECT 1 AS a, 2 AS b").raw()) == [[1, 2]]


def test_one(artists: ObjectStorage) -> None:
    row = artists.sql.exec("SELECT * FROM artist WHERE artistname = ?", "Alice").one()
    assert row.artistid == 123
    with pytest.raises(SqlError) as none:
        artists.sql.exec("SELECT * FROM artist WHERE artistname = ?", "Nobody").one()
    assert none.value.message == ONE_NONE
    with pytest.raises(SqlError) as many:
        artists.sql.exec(SELECT_ALL).one()
    assert many.value.message == ONE_MULTIPLE


def test_column_names(artists: ObjectStorage) -> None:
    assert artists.sql.exec(SELECT_ALL).columnNames == ["artistid", "artistname"]
    joined = artists.sql.exec("SELECT a.artistid, b.artistid FROM artist a, artist b LIMIT 1")
    assert joined.columnNames == ["artistid", "artistid"]
    assert artists.sql.exec("UPDATE artist SET artistname = artistname").columnNames == []
    empty = artists.sql.exec("SELECT * FROM artist WHERE 0")
    assert empty.columnNames == ["artistid", "artistname"]
    assert empty.toArray() == []


def test_rows_read_and_written(artists: ObjectStorage) -> None:
    cursor = artists.sql.exec("SELECT * FROM artist")
    assert cursor.rowsRead == 0
    cursor.next()
    assert cursor.rowsRead == 1
    cursor.toArray()
    assert cursor.rowsRead == 3
    assert cursor.rowsWritten == 0
    update = artists.sql.exec("UPDATE artist SET artistname = upper(artistname)")
    assert update.rowsWritten == 3
    returning = artists.sql.exec("DELETE FROM artist WHERE artistid > ? RETURNING artistid", 200)
    assert returning.rowsWritten == 2
    assert sorted(row.artistid for row in returning) == [456, 789]
    assert returning.rowsRead == 2


def test_writes_happen_even_if_the_cursor_is_not_consumed(artists: ObjectStorage) -> None:
    artists.sql.exec("INSERT INTO artist VALUES (1, 'Zed')")
    artists.sql.exec("INSERT INTO artist VALUES (2, 'Yan') RETURNING *")
    assert artists.sql.exec("SELECT count(*) AS n FROM artist").one().n == 5


def test_value_types(storage: ObjectStorage) -> None:
    """Observed on workerd (Pyodide): a bound int is a JavaScript number, stored as REAL; an
    integral REAL reads back as an ``int``, a BLOB as a ``memoryview``."""
    row = storage.sql.exec(
        "SELECT 1 AS i, 1.5 AS f, 2.0 AS whole, 'text' AS s, x'00ff' AS b, NULL AS n, "
        "? AS bound, typeof(?) AS bound_type, ? / 2 AS half",
        2**40,
        5,
        5,
    ).one()
    assert isinstance(row["b"], memoryview) and row["b"].tobytes() == b"\x00\xff"
    assert {k: v for k, v in row.items() if k != "b"} == {
        "i": 1,
        "f": 1.5,
        "whole": 2,
        "s": "text",
        "n": None,
        "bound": 2**40,
        "bound_type": "real",
        "half": 2.5,
    }
    assert type(row["whole"]) is int and type(row["bound"]) is int
    storage.sql.exec("CREATE TABLE n (i INTEGER, v)")
    storage.sql.exec("INSERT INTO n VALUES (?, ?)", 7, 7)
    assert storage.sql.exec("SELECT typeof(i) AS ti, typeof(v) AS tv FROM n").one() == {
        "ti": "integer",  # the column's affinity makes it an integer again
        "tv": "real",
    }


def test_lenient_value_types_are_sqlites(storage: ObjectStorage, lenient: None) -> None:
    row = storage.sql.exec(
        "SELECT 2.0 AS whole, x'00ff' AS b, ? AS big, typeof(?) AS t", 2**62, 5
    ).one()
    assert row == {"whole": 2.0, "b": b"\x00\xff", "big": 2**62, "t": "integer"}


def test_database_size(storage: ObjectStorage) -> None:
    before = storage.sql.databaseSize
    assert before > 0
    storage.sql.exec("CREATE TABLE big (x BLOB)")
    storage.sql.exec("INSERT INTO big VALUES (zeroblob(200000))")
    assert storage.sql.databaseSize > before + 150_000


# -- multi-statement queries ---------------------------------------------------------------------


def test_multi_statement_runs_all_and_returns_the_last_cursor(storage: ObjectStorage) -> None:
    cursor = storage.sql.exec(
        "CREATE TABLE t (a); INSERT INTO t VALUES (1); INSERT INTO t VALUES (2); "
        "SELECT a FROM t WHERE a > ?",
        1,
    )
    assert cursor.toArray() == [{"a": 2}]


def test_split_respects_strings_comments_and_trigger_bodies() -> None:
    sql = """
        -- leading comment; with a semicolon
        CREATE TABLE t (a TEXT);
        /* block; comment */
        CREATE TRIGGER tr AFTER INSERT ON t BEGIN
            INSERT INTO t SELECT 'x;y' WHERE 0;
        END;
        INSERT INTO t VALUES ('a;b'); -- trailing comment
        ;;
    """
    statements = split_statements(sql)
    assert len(statements) == 3
    assert statements[1].strip().startswith("/* block; comment */")
    assert split_statements("SELECT 1") == ["SELECT 1"]
    assert split_statements("  -- only a comment\n ; /* x */ ") == []


def test_multi_statement_with_trigger_and_strings(storage: ObjectStorage) -> None:
    storage.sql.exec(
        """
        CREATE TABLE t (a TEXT);
        CREATE TABLE log (a TEXT);
        CREATE TRIGGER tr AFTER INSERT ON t BEGIN
            INSERT INTO log VALUES (new.a || ';logged');
        END;
        INSERT INTO t VALUES ('x;y');
        """
    )
    assert storage.sql.exec("SELECT a FROM log").one().a == "x;y;logged"


def test_earlier_statement_error_keeps_previous_statements(storage: ObjectStorage) -> None:
    with pytest.raises(SqlError, match="no such table: missing: SQLITE_ERROR"):
        storage.sql.exec(
            "CREATE TABLE t (a); INSERT INTO missing VALUES (1); INSERT INTO t VALUES (1)"
        )
    assert storage.sql.exec("SELECT count(*) AS n FROM t").one().n == 0


def test_empty_query(storage: ObjectStorage) -> None:
    for query in ("", "  ", "-- nothing\n", ";"):
        with pytest.raises(SqlError) as info:
            storage.sql.exec(query)
        assert info.value.message == SQL_NO_STATEMENT


def test_query_must_be_a_string(storage: ObjectStorage) -> None:
    with pytest.raises(JsException, match="expects a string query"):
        storage.sql.exec(b"SELECT 1")  # type: ignore[arg-type]


# -- bindings ------------------------------------------------------------------------------------


def test_binding_count_mismatch(storage: ObjectStorage) -> None:
    for args in ((), (1, 2)):
        with pytest.raises(SqlError) as info:
            storage.sql.exec("SELECT ? AS a", *args)
        assert info.value.message == SQL_WRONG_BINDING_COUNT
    with pytest.raises(SqlError) as info:
        storage.sql.exec("SELECT 1", 1)
    assert info.value.message == SQL_WRONG_BINDING_COUNT


def test_bindings_only_on_the_last_statement(storage: ObjectStorage) -> None:
    storage.sql.exec("CREATE TABLE t (a)")
    with pytest.raises(SqlError) as info:
        storage.sql.exec("INSERT INTO t VALUES (?); SELECT * FROM t", 1)
    assert info.value.message == SQL_BINDINGS_ON_EARLIER_STATEMENT


class Level(enum.IntEnum):
    HIGH = 3


def test_binding_types(storage: ObjectStorage) -> None:
    row = storage.sql.exec(
        "SELECT ? AS n, ? AS t, ? AS f, ? AS i, ? AS r, ? AS s, ? AS b, ? AS ba, ? AS e",
        None,
        True,
        False,
        7,
        2.5,
        "str",
        b"\x01",
        bytearray(b"\x02"),
        Level.HIGH,
    ).one()
    assert row == {
        "n": None,
        "t": "true",  # a JavaScript boolean, as workerd stores it
        "f": "false",
        "i": 7,
        "r": 2.5,
        "s": "str",
        "b": b"\x01",
        "ba": b"\x02",
        "e": 3,
    }


@pytest.mark.parametrize("value", [[1], {"a": 1}, object(), 1j])
def test_unsupported_binding_type(storage: ObjectStorage, value: object) -> None:
    with pytest.raises(
        SqlError, match=f'SQL binding 1 has unsupported type "{type(value).__name__}"'
    ):
        storage.sql.exec("SELECT ?", value)


@pytest.mark.parametrize("value", [2**53 - 1, 2**53, 2**53 + 1, 2**63 - 1, -(2**53 - 1), 2**64])
def test_an_integer_beyond_javascript_numbers_cannot_be_bound(
    storage: ObjectStorage, value: int
) -> None:
    """workerd: ``TypeError: Cannot convert a BigInt value to a number`` (a JsException)."""
    with pytest.raises(JsException) as info:
        storage.sql.exec("SELECT ?", value)
    assert str(info.value).startswith("TypeError: Cannot convert a BigInt value to a number")
    # Pyodide's threshold is 2**53 - 1 itself (observed); one less is still a number.
    assert storage.sql.exec("SELECT ? AS x", 2**53 - 2).one()["x"] == 2**53 - 2


def test_an_integer_past_javascript_numbers_reads_back_as_a_float(storage: ObjectStorage) -> None:
    """workerd: 9007199254740993 stored in SQLite reads back as 9007199254740992.0."""
    value = storage.sql.exec("SELECT 9007199254740993 AS x").one()["x"]
    assert type(value) is float and value == 9007199254740992.0


def test_lenient_out_of_range_integer_binding(storage: ObjectStorage, lenient: None) -> None:
    with pytest.raises(SqlError, match="out of range"):
        storage.sql.exec("SELECT ?", 2**64)


# -- errors --------------------------------------------------------------------------------------


def test_sqlite_errors_use_workerds_format_and_keep_the_turn(storage: ObjectStorage) -> None:
    storage.sql.exec("CREATE TABLE t (a INTEGER PRIMARY KEY)")
    storage.sql.exec("INSERT INTO t VALUES (1)")
    with pytest.raises(SqlError) as info:
        storage.sql.exec("SELECT * FROM nope")
    assert info.value.message == "no such table: nope: SQLITE_ERROR"
    with pytest.raises(SqlError) as constraint:
        storage.sql.exec("INSERT INTO t VALUES (1)")
    assert constraint.value.message == (
        "UNIQUE constraint failed: t.a: SQLITE_CONSTRAINT (extended: SQLITE_CONSTRAINT_PRIMARYKEY)"
    )
    with pytest.raises(SqlError, match="syntax error"):
        storage.sql.exec("SELEC 1")
    assert storage.sql.exec("SELECT a FROM t").toArray() == [{"a": 1}]


def test_on_conflict_rollback_drops_the_turn_but_not_the_connection(
    storage: ObjectStorage, tmp_path: pathlib.Path
) -> None:
    storage.sql.exec("CREATE TABLE t (a INTEGER PRIMARY KEY ON CONFLICT ROLLBACK)")
    storage.commit()
    storage.sql.exec("INSERT INTO t VALUES (1)")
    with pytest.raises(SqlError, match="SQLITE_CONSTRAINT"):
        storage.sql.exec("INSERT INTO t VALUES (1)")
    storage.sql.exec("INSERT INTO t VALUES (2)")
    storage.commit()
    assert storage.sql.exec("SELECT a FROM t").toArray() == [{"a": 2}]


def test_sql_disabled_for_kv_backed_classes(open_storage: Callable[..., ObjectStorage]) -> None:
    storage = open_storage("kv.sqlite", sql_enabled=False)
    for attribute in ("sql", "kv"):
        with pytest.raises(StorageError) as info:
            getattr(storage, attribute)
        assert info.value.message == SQL_NOT_ENABLED
    storage.put("still", "works")
    assert settled(storage.get("still")) == "works"


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


# -- limits --------------------------------------------------------------------------------------


def test_production_limits_cap_sql_values(limited: ObjectStorage, storage: ObjectStorage) -> None:
    with pytest.raises(SqlError, match="SQLITE_TOOBIG"):
        limited.sql.exec("SELECT ? AS s", "x" * 2_100_000)
    with pytest.raises(SqlError, match="too many SQL variables"):
        limited.sql.exec("SELECT " + ", ".join("?" * 101), *range(101))
    assert len(storage.sql.exec("SELECT ? AS s", "x" * 2_100_000).one().s) == 2_100_000
