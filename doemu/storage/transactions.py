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

An async callback may await, and the connection's savepoint stack is shared by everything that
writes while a savepoint is open. workerd therefore holds the object's input gate for the whole
``transaction()``: no other event runs until it ends. :class:`TransactionGate` does the same with
the ``exclusive`` runner the host supplies (its ``blockConcurrencyWhile``), and in any case
serializes transactions with locks so two of them never interleave their savepoints:

* a top-level ``transaction()`` waits for any other top-level one (of any event) to end;
* a ``transaction()`` started inside another one's callback (directly, or from a task the callback
  created) nests in it; concurrent nested ones wait for each other, and the outer one waits for
  the nested ones it started before it ends, so savepoints always close innermost first.

Without ``exclusive`` (storage used on its own), writes of other events made while an async
callback awaits still land in its savepoint; only transactions are kept apart.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any, TypeVar

from doemu.errors import StorageError
from doemu.storage import messages
from doemu.storage.alarms import AlarmStore
from doemu.storage.connection import Savepoint, StorageConnection
from doemu.storage.errors import StorageTypeError
from doemu.storage.kv import KvStore
from doemu.storage.operations import AsyncKvMethods

__all__ = ["Exclusive", "Transaction", "TransactionGate", "run_transaction", "run_transaction_sync"]

T = TypeVar("T")

#: Runs a coroutine function while no other event of the object may run (workerd's input gate
#: held), returning its result; the host's ``blockConcurrencyWhile``.
Exclusive = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]


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
        """Not allowed inside a transaction: workerd's ``DurableObjectTransaction::deleteAll``
        exists only to throw this error."""
        raise StorageError(messages.DELETE_ALL_IN_TXN)

    def _finish(self) -> None:
        self._finished = True


class _Scope:
    """One running ``transaction()`` (or the connection's top level) as a parent of others."""

    __slots__ = ("children", "closed", "parent")

    def __init__(self, parent: _Scope | None) -> None:
        self.parent = parent
        self.children = asyncio.Lock()  # held by the one nested transaction running in it
        self.closed = False


async def _close_scope(scope: _Scope | None) -> None:
    """Wait for the nested transactions running in ``scope`` to end, then let no new one in."""
    if scope is not None:
        async with scope.children:
            scope.closed = True


async def run_transaction(
    conn: StorageConnection,
    kv: KvStore,
    alarms: AlarmStore,
    closure: Callable[[Transaction], Any],
    scope: _Scope | None = None,
) -> Any:
    """``transaction(closure)``: run ``closure(txn)`` (sync or async) inside a savepoint.

    With a ``scope`` (see :class:`TransactionGate`), the nested transactions the callback started
    in other tasks are waited for before the savepoint is released or rolled back.
    """
    point = conn.savepoint()
    txn = Transaction(conn, point, kv, alarms)
    try:
        try:
            result = closure(txn)
            if inspect.isawaitable(result):
                result = await result
        except Exception:
            await _close_scope(scope)
            raise
        await _close_scope(scope)
    except BaseException:  # including a cancellation, which does not wait for nested ones
        if scope is not None:
            scope.closed = True
        txn._finish()
        _undo(conn, point)
        raise
    txn._finish()
    conn.release(point)
    return result


#: The innermost running transaction of each connection, as seen by the current task.
_SCOPES: ContextVar[Mapping[StorageConnection, _Scope]] = ContextVar(
    "doemu_storage_transactions", default=MappingProxyType({})
)


class _Failed:
    """An exception carried out of ``exclusive`` as a value (so a runner that treats a raising
    callback as fatal, as ``blockConcurrencyWhile`` does, does not reset the object)."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


_REROUTE = object()  # the parent transaction ended while this one waited to nest in it


class TransactionGate:
    """Runs ``transaction()`` calls of one connection one at a time (see the module docstring)."""

    __slots__ = ("_alarms", "_conn", "_exclusive", "_kv", "_root")

    def __init__(
        self,
        conn: StorageConnection,
        kv: KvStore,
        alarms: AlarmStore,
        exclusive: Exclusive | None,
    ) -> None:
        self._conn = conn
        self._kv = kv
        self._alarms = alarms
        self._exclusive = exclusive
        self._root = _Scope(None)

    def _parent(self) -> _Scope:
        """The innermost transaction still running in this task's context, or the top level."""
        scope = _SCOPES.get().get(self._conn)
        while scope is not None and scope.closed:  # started by a task that outlived it
            scope = scope.parent
        return self._root if scope is None else scope

    async def run(self, closure: Callable[[Transaction], Any]) -> Any:
        """``transaction(closure)``, exclusively (see the module docstring)."""

        async def exclusively() -> Any:
            try:
                return await self._run_in(self._root, closure)
            except Exception as exc:
                return _Failed(exc)

        while True:
            parent = self._parent()
            if parent is not self._root or self._exclusive is None:
                result = await self._run_in(parent, closure)  # nested: the gate is held already
            else:
                result = await self._exclusive(exclusively)
                if isinstance(result, _Failed):
                    raise result.error
            if result is not _REROUTE:
                return result

    async def _run_in(self, parent: _Scope, closure: Callable[[Transaction], Any]) -> Any:
        async with parent.children:
            if parent.closed:
                return _REROUTE
            self._conn.check_open()
            scope = _Scope(parent)
            token = _SCOPES.set(MappingProxyType({**_SCOPES.get(), self._conn: scope}))
            try:
                return await run_transaction(self._conn, self._kv, self._alarms, closure, scope)
            finally:
                scope.closed = True
                _SCOPES.reset(token)
