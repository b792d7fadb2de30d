"""Behaviours checked against real workerd (2026-11-17, the same scenario on both).

Each test carries workerd's observed value: nested ``blockConcurrencyWhile``, what an alarm retry
reports, the SQL authorizer on a rename, the pragma and limit rules, constraint error texts,
booleans bound to SQL, and the text for SQL on a class without SQLite storage.
"""

from __future__ import annotations

from typing import Any

import pytest
from workers import DurableObject

from doemu.errors import ObjectResetError, SqlError, SqlNotAllowedError, StorageError
from doemu.runtime import ClassSpec
from doemu.storage import ObjectStorage
from doemu.testing.plugin import HarnessFactory


class Nesting(DurableObject):
    async def nest(self, depth: int) -> int:
        async def level(n: int) -> int:
            if n == depth:
                return n
            result: int = await self.ctx.blockConcurrencyWhile(lambda: level(n + 1))
            return result

        reached: int = await self.ctx.blockConcurrencyWhile(lambda: level(1))
        return reached

    async def ping(self) -> str:
        return "pong"


async def test_nested_block_concurrency_while_runs_up_to_workerds_limit(
    doemu_harness: HarnessFactory,
) -> None:
    """workerd: depth 10 returns normally; past 64 the call fails and the object is reset."""
    h = await doemu_harness({"NEST": Nesting})
    stub = h.env.NEST.getByName("n")
    assert await stub.nest(10) == 10
    assert await stub.nest(64) == 64
    with pytest.raises(ObjectResetError) as info:
        await stub.nest(65)
    assert str(info.value) == "blockConcurrencyWhile() calls are nested too deeply."
    assert await stub.ping() == "pong"  # a fresh instance answers after the reset


ATTEMPTS: list[dict[str, Any]] = []


class Flaky(DurableObject):
    async def arm(self, at: float) -> None:
        await self.ctx.storage.setAlarm(at)

    async def stored(self) -> float | None:
        result: float | None = await self.ctx.storage.getAlarm()
        return result

    async def alarm(self, info: Any) -> None:
        ATTEMPTS.append({"retry": info.retryCount, "scheduled": info.scheduledTime})
        if len(ATTEMPTS) < 3:
            raise RuntimeError("not yet")


async def test_alarm_retries_report_the_original_time(doemu_harness: HarnessFactory) -> None:
    """workerd: scheduledTime stays the original on every retry; getAlarm() returns it between
    a failure and its retry, then None after success."""
    ATTEMPTS.clear()
    h = await doemu_harness({"FLAKY": Flaky})
    stub = h.env.FLAKY.getByName("f")
    at = h.clock.now() + 1_000
    await stub.arm(at)
    await h.advance(1_000)
    assert ATTEMPTS == [{"retry": 0, "scheduled": at}]
    assert await stub.stored() == at  # between the failure and its retry
    await h.advance(2_600)  # first retry after 2 s (+ up to 25 %)
    assert ATTEMPTS[-1] == {"retry": 1, "scheduled": at}
    assert await stub.stored() == at
    await h.advance(5_100)
    assert ATTEMPTS[-1] == {"retry": 2, "scheduled": at}
    assert len(ATTEMPTS) == 3
    assert await stub.stored() is None  # the successful attempt consumed it
    assert await h.get_alarm("FLAKY", "f") is None


def test_renaming_a_table_to_a_reserved_name_is_refused(storage: ObjectStorage) -> None:
    storage.sql.exec("CREATE TABLE t (a)")
    for query in ("ALTER TABLE t RENAME TO _cf_x", 'alter table t rename to "_CF_y"'):
        with pytest.raises(SqlNotAllowedError) as info:
            storage.sql.exec(query)
        assert info.value.message == "not authorized: SQLITE_AUTH"
    assert storage.sql.exec("SELECT name FROM sqlite_master WHERE name = 't'").toArray()
    storage.sql.exec("ALTER TABLE t RENAME COLUMN a TO _cf_column")  # only table names


def test_reading_page_size_is_allowed_and_setting_it_is_not(storage: ObjectStorage) -> None:
    assert storage.sql.exec("PRAGMA page_size").one()["page_size"] == 4096
    with pytest.raises(SqlNotAllowedError):
        storage.sql.exec("PRAGMA page_size = 8192")


def test_workerds_sqlite_limits(storage: ObjectStorage) -> None:
    params = ",".join("?" for _ in range(101))
    with pytest.raises(SqlError) as info:
        storage.sql.exec(f"SELECT {params}", *range(101))
    assert info.value.message == "too many SQL variables: SQLITE_ERROR"
    assert len(storage.sql.exec(f"SELECT {params[2:]}", *range(100)).raw().toArray()[0]) == 100
    compound = " UNION ALL ".join("SELECT 1" for _ in range(6))
    with pytest.raises(SqlError) as info:
        storage.sql.exec(compound)
    assert info.value.message == "too many terms in compound SELECT: SQLITE_ERROR"
    columns = ", ".join(f"c{i}" for i in range(101))
    with pytest.raises(SqlError) as info:
        storage.sql.exec(f"CREATE TABLE wide ({columns})")
    assert info.value.message == "too many columns on wide: SQLITE_ERROR"
    with pytest.raises(SqlError) as info:
        storage.sql.exec("SELECT 'a' LIKE ?", "%" * 51)
    assert info.value.message == "LIKE or GLOB pattern too complex: SQLITE_ERROR"


@pytest.mark.parametrize(
    ("setup", "query", "extended"),
    [
        (
            "CREATE TABLE p (id INTEGER PRIMARY KEY); CREATE TABLE c (p INTEGER REFERENCES p(id))",
            "INSERT INTO c VALUES (7)",
            "FOREIGN KEY constraint failed: SQLITE_CONSTRAINT (extended: "
            "SQLITE_CONSTRAINT_FOREIGNKEY)",
        ),
        (
            "CREATE TABLE k (id INTEGER PRIMARY KEY); INSERT INTO k VALUES (1)",
            "INSERT INTO k VALUES (1)",
            "UNIQUE constraint failed: k.id: SQLITE_CONSTRAINT (extended: "
            "SQLITE_CONSTRAINT_PRIMARYKEY)",
        ),
        (
            "CREATE TABLE ch (n CHECK (n > 0))",
            "INSERT INTO ch VALUES (0)",
            "CHECK constraint failed: n > 0: SQLITE_CONSTRAINT (extended: SQLITE_CONSTRAINT_CHECK)",
        ),
        (
            "CREATE TABLE nn (n NOT NULL)",
            "INSERT INTO nn VALUES (NULL)",
            "NOT NULL constraint failed: nn.n: SQLITE_CONSTRAINT (extended: "
            "SQLITE_CONSTRAINT_NOTNULL)",
        ),
        (
            "CREATE TABLE u (n UNIQUE); INSERT INTO u VALUES (1)",
            "INSERT INTO u VALUES (1)",
            "UNIQUE constraint failed: u.n: SQLITE_CONSTRAINT (extended: SQLITE_CONSTRAINT_UNIQUE)",
        ),
    ],
)
def test_constraint_errors_name_the_extended_code(
    storage: ObjectStorage, setup: str, query: str, extended: str
) -> None:
    storage.sql.exec(setup)
    with pytest.raises(SqlError) as info:
        storage.sql.exec(query)
    assert info.value.message == extended


def test_booleans_are_stored_as_javascript_booleans_become(storage: ObjectStorage) -> None:
    storage.sql.exec("CREATE TABLE b (v)")
    storage.sql.exec("INSERT INTO b VALUES (?), (?)", True, False)
    rows = storage.sql.exec("SELECT v, typeof(v) AS t FROM b").toArray()
    assert [(r["v"], r["t"]) for r in rows] == [("true", "text"), ("false", "text")]


class KvOnly(DurableObject):
    async def try_sql(self) -> str:
        try:
            self.ctx.storage.sql.exec("SELECT 1")
        except StorageError as exc:
            return exc.message
        return "no error"


async def test_sql_on_a_class_without_sqlite_storage(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"KV": ClassSpec(KvOnly, sql=False)})
    assert await h.env.KV.getByName("k").try_sql() == (
        "SQL is not enabled for this Durable Object class."
    )
