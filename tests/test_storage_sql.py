"""ctx.storage.sql: exec and its cursors, value types, multi-statement queries, and SQLite's
errors in workerd's format."""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import pytest

from doemu.errors import SqlError, StorageError
from doemu.jsboundary import JsException
from doemu.storage import IteratorResult, ObjectStorage, SqlRow
from doemu.storage.sql import split_statements

from .settled import settled

# The error texts spelled out (golden), not imported from doemu: a drift in doemu's copy of
# Cloudflare's wording must fail a test.
ONE_MULTIPLE = "Expected exactly one result from SQL query, but got multiple results."
ONE_NONE = "Expected exactly one result from SQL query, but got no results."


SQL_NO_STATEMENT = "SQL code did not contain a statement."
SQL_NOT_ENABLED = "SQL is not enabled for this Durable Object class."


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
