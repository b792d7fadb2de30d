"""ctx.storage.sql's parameter bindings: their count, their types, integers beyond JavaScript's
numbers, and the production limits on values."""

from __future__ import annotations

import enum

import pytest

from doemu.errors import SqlError
from doemu.jsboundary import JsException
from doemu.storage import ObjectStorage

# The error texts spelled out (golden), not imported from doemu: a drift in doemu's copy of
# Cloudflare's wording must fail a test.
SQL_BINDINGS_ON_EARLIER_STATEMENT = (
    "When executing multiple SQL statements in a single call, only the last statement can "
    "have parameters."
)


SQL_WRONG_BINDING_COUNT = "Wrong number of parameter bindings for SQL query."


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


# -- limits --------------------------------------------------------------------------------------


def test_production_limits_cap_sql_values(limited: ObjectStorage, storage: ObjectStorage) -> None:
    with pytest.raises(SqlError, match="SQLITE_TOOBIG"):
        limited.sql.exec("SELECT ? AS s", "x" * 2_100_000)
    with pytest.raises(SqlError, match="too many SQL variables"):
        limited.sql.exec("SELECT " + ", ".join("?" * 101), *range(101))
    assert len(storage.sql.exec("SELECT ? AS s", "x" * 2_100_000).one().s) == 2_100_000
