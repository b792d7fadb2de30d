"""Transactions, write coalescing and the output gate, alarms, deleteAll and metadata."""

from __future__ import annotations

import asyncio
import datetime as dt
import pathlib
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest

from doemu.clock import ManualClock
from doemu.errors import AlarmError, SqlNotAllowedError, StorageError
from doemu.storage import ObjectStorage, StorageTypeError, Transaction

from .settled import settled
from .storage_helpers import NOW

# The error texts spelled out (golden), not imported from doemu: a drift in doemu's copy of
# Cloudflare's wording must fail a test.
DELETE_ALL_IN_TXN = "Cannot call deleteAll() within a transaction"
SET_ALARM_NO_HANDLER = (
    "Your Durable Object class must have an alarm() handler in order to call setAlarm()"
)
SET_ALARM_NOT_POSITIVE = "setAlarm() cannot be called with an alarm time <= 0"


def txn_committed(op: str) -> str:
    return (
        f"Cannot call {op} on transaction that has already committed: did you move `txn` "
        "outside of the closure?"
    )


def txn_rolled_back(op: str) -> str:
    return f"Cannot {op} on rolled back transaction"


class Boom(Exception):
    pass


def committed_keys(path: pathlib.Path) -> list[str]:
    """What an independent connection sees: only committed data."""
    conn = sqlite3.connect(path)
    try:
        return [row[0] for row in conn.execute("SELECT key FROM _cf_KV ORDER BY key")]
    finally:
        conn.close()


# -- write coalescing and the output gate --------------------------------------------------------


async def test_a_turns_writes_commit_together_when_it_yields(storage: ObjectStorage) -> None:
    path = storage.database_path
    before = storage.commit_count
    await storage.put("a", 1)
    await storage.put({"b": 2, "c": 3})
    storage.kv.put("d", 4)
    storage.sql.exec("CREATE TABLE t (x); INSERT INTO t VALUES (1)")
    await storage.delete("c")
    assert committed_keys(path) == []  # awaiting storage never yields: nothing committed yet
    await asyncio.sleep(0)  # the turn ends
    assert committed_keys(path) == ["a", "b", "d"]
    assert storage.commit_count == before + 1


async def test_awaiting_storage_never_yields_to_other_tasks(storage: ObjectStorage) -> None:
    """The input gate: read-modify-write between two real awaits cannot interleave."""
    interleaved: list[str] = []

    async def other() -> None:
        interleaved.append("other ran")

    task = asyncio.create_task(other())
    await storage.put("n", 0)
    for _ in range(20):
        await storage.put("n", await storage.get("n") + 1)
        await storage.list()
        await storage.getAlarm()
        await storage.sync()
        await storage.transaction(lambda txn: txn.get("n"))
    assert interleaved == []
    await task
    assert interleaved == ["other ran"]
    assert await storage.get("n") == 20


async def test_each_turn_is_its_own_transaction(storage: ObjectStorage) -> None:
    before = storage.commit_count
    for i in range(3):
        await storage.put(f"k{i}", i)
        await asyncio.sleep(0)
    assert storage.commit_count == before + 3
    await asyncio.sleep(0)  # a turn without writes commits nothing
    assert storage.commit_count == before + 3


async def test_sync_commits_now(storage: ObjectStorage) -> None:
    await storage.put("a", 1)
    await storage.sync()
    assert committed_keys(storage.database_path) == ["a"]
    assert await storage.sync() is None  # nothing pending: already resolved


def test_without_an_event_loop_commit_is_explicit(
    open_storage: Callable[..., ObjectStorage],
) -> None:
    storage = open_storage("sync.sqlite")
    storage.put("a", 1)
    assert committed_keys(storage.database_path) == []
    storage.commit()
    assert committed_keys(storage.database_path) == ["a"]
    storage.put("b", 2)
    storage.close()  # close commits
    assert committed_keys(storage.database_path) == ["a", "b"]


async def test_rollback_drops_uncommitted_writes(storage: ObjectStorage) -> None:
    await storage.put("kept", 1)
    storage.commit()
    await storage.put("dropped", 2)
    storage.sql.exec("CREATE TABLE gone (x)")
    storage.rollback()
    assert await storage.list() == {"kept": 1}
    assert storage.sql.exec("SELECT name FROM sqlite_master WHERE name = 'gone'").toArray() == []
    await storage.put("after", 3)  # storage stays usable
    await asyncio.sleep(0)
    assert committed_keys(storage.database_path) == ["after", "kept"]


async def test_commit_waits_for_an_open_transaction(storage: ObjectStorage) -> None:
    path = storage.database_path
    inside = asyncio.Event()
    release = asyncio.Event()

    async def closure(txn: Transaction) -> str:
        await txn.put("in-txn", 1)
        inside.set()
        await release.wait()  # the turn yields with the savepoint still open
        return "done"

    task = asyncio.create_task(storage.transaction(closure))
    await inside.wait()  # the transaction's turn ended: its implicit commit was deferred
    await storage.put("during", 0)
    storage.commit()  # the output gate: deferred too while the savepoint is open
    await asyncio.sleep(0)
    assert committed_keys(path) == []
    release.set()
    assert await task == "done"
    assert committed_keys(path) == ["during", "in-txn"]  # committed on release


async def test_commit_of_nothing_is_a_no_op(storage: ObjectStorage) -> None:
    before = storage.commit_count
    storage.commit()
    storage.commit()
    assert storage.commit_count == before


# -- transactionSync -----------------------------------------------------------------------------


async def test_transaction_sync_returns_and_keeps_writes(storage: ObjectStorage) -> None:
    def body() -> int:
        storage.sql.exec("CREATE TABLE t (x)")
        storage.sql.exec("INSERT INTO t VALUES (1)")
        storage.kv.put("k", 1)
        return 42

    assert storage.transactionSync(body) == 42
    assert storage.sql.exec("SELECT count(*) AS n FROM t").one().n == 1
    assert await storage.get("k") == 1


async def test_transaction_sync_rolls_back_on_error(storage: ObjectStorage) -> None:
    await storage.put("before", 1)

    def body() -> None:
        storage.kv.put("inside", 2)
        storage.kv.delete("before")
        raise Boom

    with pytest.raises(Boom):
        storage.transactionSync(body)
    assert await storage.list() == {"before": 1}  # the turn's earlier write is untouched


async def test_nested_transaction_sync(storage: ObjectStorage) -> None:
    def inner() -> None:
        storage.kv.put("inner", 1)
        raise Boom

    def outer() -> None:
        storage.kv.put("outer", 1)
        with pytest.raises(Boom):
            storage.transactionSync(inner)
        storage.kv.put("outer2", 2)

    storage.transactionSync(outer)
    assert await storage.list() == {"outer": 1, "outer2": 2}


async def test_transaction_sync_refuses_async_callbacks(storage: ObjectStorage) -> None:
    async def body() -> None:
        storage.kv.put("never", 1)

    with pytest.raises(StorageTypeError, match="must be synchronous"):
        storage.transactionSync(body)
    assert await storage.list() == {}


# -- transaction ---------------------------------------------------------------------------------


async def test_transaction_commits(storage: ObjectStorage) -> None:
    async def closure(txn: Transaction) -> Any:
        await txn.put("a", 1)
        await txn.put({"b": 2})
        assert await txn.get("a") == 1
        assert await txn.get(["a", "b"]) == {"a": 1, "b": 2}
        assert await txn.list(prefix="a") == {"a": 1}
        assert await txn.delete("b") is True
        await asyncio.sleep(0)  # real awaits inside a transaction are fine
        storage.sql.exec("CREATE TABLE t (x)")  # ctx.storage writes are part of it too
        return "result"

    assert await storage.transaction(closure) == "result"
    assert await storage.list() == {"a": 1}
    await asyncio.sleep(0)
    assert committed_keys(storage.database_path) == ["a"]


async def test_transaction_accepts_a_sync_closure(storage: ObjectStorage) -> None:
    assert await storage.transaction(lambda txn: txn.put("a", 1) and "ok") == "ok"
    assert await storage.get("a") == 1


async def test_transaction_rolls_back_on_exception(storage: ObjectStorage) -> None:
    await storage.put("before", 0)

    async def closure(txn: Transaction) -> None:
        await txn.put("a", 1)
        storage.sql.exec("CREATE TABLE t (x)")
        await asyncio.sleep(0)
        raise Boom

    with pytest.raises(Boom):
        await storage.transaction(closure)
    assert await storage.list() == {"before": 0}
    assert storage.sql.exec("SELECT name FROM sqlite_master WHERE name = 't'").toArray() == []


async def test_txn_rollback_marks_and_undoes(storage: ObjectStorage) -> None:
    seen: dict[str, Any] = {}

    async def closure(txn: Transaction) -> str:
        await txn.put("a", 1)
        txn.rollback()
        txn.rollback()  # idempotent
        with pytest.raises(StorageError) as info:
            await txn.get("a")
        seen["get"] = info.value.message
        with pytest.raises(StorageError) as put_info:
            await txn.put("b", 2)
        seen["put"] = put_info.value.message
        return "no error"

    assert await storage.transaction(closure) == "no error"
    assert seen == {"get": txn_rolled_back("get"), "put": txn_rolled_back("put")}
    assert await storage.list() == {}


async def test_txn_used_after_the_closure(storage: ObjectStorage) -> None:
    kept: list[Transaction] = []
    await storage.transaction(lambda txn: kept.append(txn))
    with pytest.raises(StorageError) as info:
        await kept[0].put("late", 1)
    assert info.value.message == txn_committed("put")


async def test_txn_delete_all_is_refused(storage: ObjectStorage) -> None:
    def closure(txn: Transaction) -> str:
        with pytest.raises(StorageError) as info:
            txn.deleteAll()
        return info.value.message

    assert await storage.transaction(closure) == DELETE_ALL_IN_TXN


async def test_storage_delete_all_inside_a_transaction_is_refused(storage: ObjectStorage) -> None:
    """workerd: inside a transaction ``ctx.storage`` is part of it, so deleteAll() fails there
    too, with the same text, and nothing is deleted."""
    await storage.put("kept", 1)

    async def closure(txn: Transaction) -> str:
        with pytest.raises(StorageError) as info:
            await storage.deleteAll()
        return info.value.message

    assert await storage.transaction(closure) == DELETE_ALL_IN_TXN

    def sync_closure() -> str:
        with pytest.raises(StorageError) as info:
            settled(storage.deleteAll())
        return info.value.message

    assert storage.transactionSync(sync_closure) == DELETE_ALL_IN_TXN
    assert await storage.get("kept") == 1
    await storage.deleteAll()  # outside a transaction it works
    assert await storage.get("kept") is None


async def test_nested_transactions(storage: ObjectStorage) -> None:
    async def inner(txn: Transaction) -> None:
        await txn.put("inner", 1)
        raise Boom

    async def outer(txn: Transaction) -> None:
        await txn.put("outer", 1)
        with pytest.raises(Boom):
            await storage.transaction(inner)
        assert await storage.transaction(lambda t: t.put("inner-ok", 1)) is None
        storage.transactionSync(lambda: storage.kv.put("sync", 1))

    await storage.transaction(outer)
    assert list(await storage.list()) == ["inner-ok", "outer", "sync"]


async def test_abort_during_a_transaction(storage: ObjectStorage) -> None:
    async def closure(txn: Transaction) -> None:
        await txn.put("a", 1)
        storage.rollback()  # ctx.abort() while the transaction is open
        raise Boom

    with pytest.raises(Boom):
        await storage.transaction(closure)
    assert await storage.list() == {}
    await storage.put("b", 1)
    await asyncio.sleep(0)
    assert committed_keys(storage.database_path) == ["b"]


# -- alarms --------------------------------------------------------------------------------------


async def test_alarm_get_set_delete(storage: ObjectStorage) -> None:
    assert await storage.getAlarm() is None
    await storage.setAlarm(NOW + 5000)
    assert await storage.getAlarm() == NOW + 5000
    await storage.setAlarm(NOW + 1234.9)  # whole milliseconds, as JavaScript dates
    assert await storage.getAlarm() == NOW + 1234
    await storage.deleteAlarm()
    assert await storage.getAlarm() is None
    await storage.deleteAlarm()  # no alarm: no-op


async def test_alarm_accepts_datetimes(storage: ObjectStorage) -> None:
    when = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    await storage.setAlarm(when)
    assert await storage.getAlarm() == when.timestamp() * 1000
    await storage.setAlarm(dt.datetime(2030, 1, 1))  # naive means UTC
    assert await storage.getAlarm() == when.timestamp() * 1000
    await storage.setAlarm(dt.datetime(2030, 1, 1, 2, tzinfo=dt.timezone(dt.timedelta(hours=2))))
    assert await storage.getAlarm() == when.timestamp() * 1000


async def test_past_alarms_clamp_to_now(storage: ObjectStorage, storage_clock: ManualClock) -> None:
    await storage.setAlarm(1)
    assert await storage.getAlarm() == NOW
    storage_clock.advance(10_000)
    await storage.setAlarm(dt.datetime(2000, 1, 1))
    assert await storage.getAlarm() == NOW + 10_000


@pytest.mark.parametrize("when", [0, -5, 0.5, dt.datetime(1969, 12, 31, tzinfo=dt.UTC)])
async def test_alarm_time_must_be_positive(storage: ObjectStorage, when: Any) -> None:
    with pytest.raises(AlarmError) as info:
        await storage.setAlarm(when)
    assert info.value.message == SET_ALARM_NOT_POSITIVE
    assert info.value.name == "TypeError" and not isinstance(info.value, TypeError)


@pytest.mark.parametrize("when", ["tomorrow", None, True, float("nan"), float("inf")])
async def test_alarm_time_must_be_a_time(storage: ObjectStorage, when: Any) -> None:
    with pytest.raises(AlarmError):
        await storage.setAlarm(when)


async def test_alarm_needs_a_handler(open_storage: Callable[..., ObjectStorage]) -> None:
    storage = open_storage("h.sqlite", has_alarm_handler=False)
    with pytest.raises(AlarmError) as info:
        await storage.setAlarm(NOW + 1)
    assert info.value.message == SET_ALARM_NO_HANDLER
    assert await storage.getAlarm() is None
    await storage.deleteAlarm()  # allowed without a handler
    storage.has_alarm_handler = True
    await storage.setAlarm(NOW + 1)
    assert await storage.getAlarm() == NOW + 1


async def test_on_alarm_commit_reports_durable_changes_once(
    storage: ObjectStorage, alarm_commits: list[float | None]
) -> None:
    await storage.setAlarm(NOW + 1)
    await storage.setAlarm(NOW + 2)
    assert alarm_commits == []  # not durable yet
    await asyncio.sleep(0)
    assert alarm_commits == [NOW + 2]  # the final value, once
    await storage.put("unrelated", 1)
    await asyncio.sleep(0)
    await storage.setAlarm(NOW + 2)  # unchanged value
    await asyncio.sleep(0)
    assert alarm_commits == [NOW + 2]
    await storage.deleteAlarm()
    await storage.sync()
    assert alarm_commits == [NOW + 2, None]


async def test_on_alarm_commit_not_called_on_rollback(
    storage: ObjectStorage, alarm_commits: list[float | None]
) -> None:
    await storage.setAlarm(NOW + 1)
    storage.rollback()
    await asyncio.sleep(0)
    assert alarm_commits == []

    async def closure(txn: Transaction) -> None:
        await txn.setAlarm(NOW + 5)
        assert await txn.getAlarm() == NOW + 5
        txn.rollback()

    def failing() -> None:
        storage.setAlarm(NOW + 7)
        raise Boom

    await storage.transaction(closure)
    with pytest.raises(Boom):
        storage.transactionSync(failing)
    await asyncio.sleep(0)
    assert alarm_commits == []
    assert await storage.getAlarm() is None


async def test_alarm_set_and_deleted_in_one_turn_reports_nothing(
    storage: ObjectStorage, alarm_commits: list[float | None]
) -> None:
    await storage.setAlarm(NOW + 1)
    await storage.deleteAlarm()
    await asyncio.sleep(0)
    assert alarm_commits == []


async def test_alarm_survives_reopen(open_storage: Callable[..., ObjectStorage]) -> None:
    first = open_storage("reopen.sqlite")
    await first.setAlarm(NOW + 60_000)
    first.close()
    reports: list[float | None] = []
    second = open_storage("reopen.sqlite", on_alarm_commit=reports.append)
    assert await second.getAlarm() == NOW + 60_000
    await second.setAlarm(NOW + 60_000)
    await second.sync()
    assert reports == []  # already the committed value


# -- alarm delivery (runtime-facing) -------------------------------------------------------------


async def test_successful_delivery_consumes_the_alarm(
    storage: ObjectStorage, alarm_commits: list[float | None]
) -> None:
    await storage.setAlarm(NOW + 10)
    await storage.sync()
    storage.begin_alarm_delivery(NOW + 10)
    assert await storage.getAlarm() is None  # started: not "set" any more
    assert storage.alarm_time() == NOW + 10
    assert storage.end_alarm_delivery(success=True) is False
    assert storage.alarm_time() is None
    storage.commit()
    assert alarm_commits == [NOW + 10, None]


async def test_failed_delivery_keeps_the_alarm_for_the_retry(
    storage: ObjectStorage, alarm_commits: list[float | None]
) -> None:
    await storage.setAlarm(NOW + 10)
    await storage.sync()
    storage.begin_alarm_delivery(NOW + 10)
    assert storage.end_alarm_delivery(success=False) is False
    assert await storage.getAlarm() == NOW + 10
    storage.set_alarm_internal(NOW + 2010)  # the runtime's retry time
    storage.commit()
    assert await storage.getAlarm() == NOW + 2010
    assert alarm_commits == [NOW + 10, NOW + 2010]
    storage.set_alarm_internal(None)  # dropped after the last retry
    storage.commit()
    assert alarm_commits == [NOW + 10, NOW + 2010, None]


@pytest.mark.parametrize("success", [True, False])
async def test_a_handler_that_sets_the_alarm_keeps_it(
    storage: ObjectStorage, alarm_commits: list[float | None], success: bool
) -> None:
    await storage.setAlarm(NOW + 10)
    await storage.sync()
    storage.begin_alarm_delivery(NOW + 10)
    await storage.setAlarm(NOW + 60_000)
    assert await storage.getAlarm() == NOW + 60_000
    assert storage.end_alarm_delivery(success=success) is True
    await storage.sync()
    assert await storage.getAlarm() == NOW + 60_000
    assert alarm_commits == [NOW + 10, NOW + 60_000]


async def test_set_alarm_internal_skips_validation(
    open_storage: Callable[..., ObjectStorage],
) -> None:
    storage = open_storage("i.sqlite", has_alarm_handler=False)
    storage.set_alarm_internal(5.0)  # no handler check, no clamping
    assert await storage.getAlarm() == 5.0


# -- deleteAll and metadata ----------------------------------------------------------------------


async def test_delete_all_wipes_sql_kv_and_alarm(
    storage: ObjectStorage, alarm_commits: list[float | None]
) -> None:
    storage.sql.exec(
        '''
        CREATE TABLE parent (id INTEGER PRIMARY KEY);
        CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES parent(id));
        CREATE INDEX child_parent ON child (parent);
        CREATE VIEW v AS SELECT * FROM child;
        CREATE TRIGGER tr AFTER INSERT ON parent BEGIN SELECT 1; END;
        CREATE TABLE "odd ""name""" (x);
        CREATE TABLE auto (id INTEGER PRIMARY KEY AUTOINCREMENT);
        INSERT INTO parent VALUES (1);
        INSERT INTO child VALUES (1, 1);
        INSERT INTO auto DEFAULT VALUES;
        '''
    )
    await storage.put({"a": 1, "b": 2})
    await storage.setAlarm(NOW + 1000)
    storage.set_meta("name", "kept")
    await storage.sync()
    assert alarm_commits == [NOW + 1000]

    await storage.deleteAll()
    await storage.sync()
    names = storage.sql.exec("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite%'")
    assert sorted(row.name for row in names) == ["_cf_KV", "_cf_METADATA"]
    assert await storage.list() == {}
    assert await storage.getAlarm() is None
    assert alarm_commits == [NOW + 1000, None]
    assert storage.get_meta("name") == "kept"
    storage.sql.exec("CREATE TABLE parent (id)")  # the names are free again


async def test_delete_all_rolls_back_with_the_turn(storage: ObjectStorage) -> None:
    storage.sql.exec("CREATE TABLE t (x)")
    await storage.put("a", 1)
    storage.commit()
    await storage.deleteAll()
    storage.rollback()
    assert await storage.get("a") == 1
    assert storage.sql.exec("SELECT count(*) AS n FROM t").one().n == 0


async def test_metadata(storage: ObjectStorage) -> None:
    assert storage.get_meta("name") is None
    storage.set_meta("name", {"id": "abc", "n": [1]})
    assert storage.get_meta("name") == {"id": "abc", "n": [1]}
    storage.rollback()
    assert storage.get_meta("name") is None  # written inside the implicit transaction
    storage.set_meta("name", "x")
    await asyncio.sleep(0)
    assert storage.get_meta("name") == "x"
    with pytest.raises(SqlNotAllowedError):
        storage.sql.exec("SELECT * FROM _cf_METADATA")
