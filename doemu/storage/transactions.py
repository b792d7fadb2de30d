"""``transactionSync(fn)`` and ``transaction(fn)``: savepoints inside the implicit transaction.

On a SQLite-backed object, Cloudflare implements both with savepoints (``api/actor-state.c++``):
the callback's writes are kept when it returns and undone when it raises, and the error
propagates. Nested calls nest savepoints. Because the turn's implicit transaction is still the
unit of durability, nothing is committed when a transaction ends; the turn's commit (or the output
gate) makes it durable, and a commit requested while a savepoint is open waits for it.

``transaction(fn)`` passes a :class:`Transaction` (``txn``) with the KV and alarm methods plus
``rollback()``. Writes through ``ctx.storage`` inside the callback are part of the transaction
too, as Cloudflare documents for SQLite-backed objects. Unlike a JavaScript promise,
``transaction()`` returns a coroutine: the callback runs when it is awaited.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from doemu.errors import StorageError
from doemu.storage import messages
from doemu.storage.alarms import AlarmStore
from doemu.storage.connection import Savepoint, StorageConnection
from doemu.storage.errors import StorageTypeError
from doemu.storage.kv import KvStore
from doemu.storage.operations import AsyncKvMethods

__all__ = ["Transaction", "run_transaction", "run_transaction_sync"]

T = TypeVar("T")


def _undo(conn: StorageConnection, point: Savepoint) -> None:
    """Roll back and drop the savepoint, unless a rollback or close already removed it."""
    if conn.is_open(point):
        conn.rollback_to(point)
        conn.release(point)


def run_transaction_sync(conn: StorageConnection, fn: Callable[[], T]) -> T:
    """``transactionSync(fn)``: run ``fn`` in a savepoint; undo its writes if it raises."""
    point = conn.savepoint()
    try:
        result = fn()
        if inspect.isawaitable(result):
            if inspect.iscoroutine(result):
                result.close()
            raise StorageTypeError(
                "transactionSync() callbacks must be synchronous; use "
                "`await storage.transaction(fn)` for an async callback"
            )
    except BaseException:
        _undo(conn, point)
        raise
    conn.release(point)
    return result


class Transaction(AsyncKvMethods):
    """``txn``: the transaction handle passed to ``transaction()``'s callback."""

    __slots__ = ("_alarms", "_conn", "_finished", "_kv", "_point", "_rolled_back")

    def __init__(
        self, conn: StorageConnection, point: Savepoint, kv: KvStore, alarms: AlarmStore
    ) -> None:
        self._conn = conn
        self._point = point
        self._kv = kv
        self._alarms = alarms
        self._rolled_back = False
        self._finished = False

    def _guard(self, op: str) -> None:
        if self._rolled_back:
            raise StorageError(messages.txn_rolled_back(op))
        if self._finished:
            raise StorageError(messages.txn_committed(op))
        self._conn.check_open()

    def rollback(self) -> None:
        """Undo the transaction's writes now; later calls on ``txn`` raise. Idempotent."""
        if self._rolled_back:
            return
        self._guard("rollback")
        self._conn.rollback_to(self._point)
        self._rolled_back = True

    def deleteAll(self, options: Any = None) -> None:
        """Not allowed inside a transaction, as on Cloudflare."""
        raise StorageError(messages.DELETE_ALL_IN_TXN)

    def _finish(self) -> None:
        self._finished = True


async def run_transaction(
    conn: StorageConnection,
    kv: KvStore,
    alarms: AlarmStore,
    closure: Callable[[Transaction], Any],
) -> Any:
    """``transaction(closure)``: run ``closure(txn)`` (sync or async) inside a savepoint."""
    point = conn.savepoint()
    txn = Transaction(conn, point, kv, alarms)
    try:
        result = closure(txn)
        if inspect.isawaitable(result):
            result = await result
    except BaseException:
        txn._finish()
        _undo(conn, point)
        raise
    txn._finish()
    conn.release(point)
    return result
