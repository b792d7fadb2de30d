"""Explicit transactions: ``transactionSync`` and ``transaction`` commit, roll back, nest, refuse
what Cloudflare refuses (deleteAll inside, ``txn`` after its closure), and survive an abort."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from doemu.errors import StorageError
from doemu.storage import ObjectStorage, StorageTypeError, Transaction

from .settled import settled
from .storage_helpers import Boom, committed_keys

# The error texts spelled out (golden), not imported from doemu: a drift in doemu's copy of
# Cloudflare's wording must fail a test.
DELETE_ALL_IN_TXN = "Cannot call deleteAll() within a transaction"


def txn_committed(op: str) -> str:
    return (
        f"Cannot call {op} on transaction that has already committed: did you move `txn` "
        "outside of the closure?"
    )


def txn_rolled_back(op: str) -> str:
    return f"Cannot {op} on rolled back transaction"


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
