"""Each turn is one implicit transaction: its writes coalesce and commit together when it
yields (the output gate), rollback drops them, and deleteAll and metadata ride the same turn."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from doemu.errors import SqlNotAllowedError
from doemu.storage import ObjectStorage, Transaction

from .storage_helpers import NOW, committed_keys

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
