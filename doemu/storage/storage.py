"""``ObjectStorage``: one Durable Object's storage, as the runtime holds it.

It implements Cloudflare's surface, spelled as on Cloudflare in camelCase (``sql``, ``kv``,
``get``/``put``/``delete``/``list``/``deleteAll``, ``getAlarm``/``setAlarm``/``deleteAlarm``,
``transaction``, ``transactionSync``, ``sync``), and the runtime drives the object's lifecycle
through snake_case methods that are *not* part of it: ``commit`` (the output gate), ``rollback``
(``ctx.abort``), ``close``, ``get_meta``/``set_meta`` and the alarm-delivery hooks. User code never
holds this object: its ``ctx.storage`` is a :class:`~doemu.storage.api.DurableObjectStorage` over
it, with Cloudflare's names only.

No storage call ever yields to the event loop. The async methods finish their work before
returning an already-settled awaitable, so read-modify-write sequences between two real awaits
are atomic, which is the guarantee Cloudflare's input gate gives.
"""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from doemu import clone
from doemu.clock import Clock
from doemu.errors import StorageError
from doemu.storage import messages
from doemu.storage.alarms import AlarmStore
from doemu.storage.connection import StorageConnection, internal_sql
from doemu.storage.durability import SyncPool
from doemu.storage.files import ObjectFiles
from doemu.storage.kv import KvStore
from doemu.storage.limits import StorageLimits
from doemu.storage.operations import AsyncKvMethods, check_options
from doemu.storage.resolved import Resolved, rejected
from doemu.storage.sql import SqlStorage
from doemu.storage.sync_kv import SyncKvStorage
from doemu.storage.transactions import (
    Exclusive,
    Transaction,
    TransactionGate,
    run_transaction_sync,
)
from doemu.storage.wipe import drop_user_schema

__all__ = ["ObjectStorage"]

T = TypeVar("T")

_DELETE_ALL = frozenset({"allowConcurrency", "allowUnconfirmed", "noCache"})
_GET_META = internal_sql("SELECT value FROM _cf_METADATA WHERE key = ?")
_SET_META = internal_sql("INSERT OR REPLACE INTO _cf_METADATA (key, value) VALUES (?, ?)")


class ObjectStorage(AsyncKvMethods):
    """The storage of one object, backed by one SQLite file at ``path``.

    ``limits=None`` enforces no size limits (as local workerd); pass
    :meth:`StorageLimits.production` for Cloudflare's. ``on_alarm_commit`` is called with the new
    alarm time (or None) each time a transaction that changed the alarm commits;
    ``on_alarm_prepare`` with a new alarm time just *before* such a commit (the runtime's alarm
    table learns of an alarm before the object's file holds it, so a crash between the two writes
    never leaves an alarm that only a request could find; a future it returns is what the
    commit waits for first). ``sync_pool`` selects power-loss
    durability; ``on_commit_failed`` is told when a commit at the end of a turn (or its fsync)
    fails, so the object can be reset loudly.

    ``exclusive(fn)``, when given, must run the coroutine function ``fn`` while no other event of
    the object runs (the host passes its ``blockConcurrencyWhile``; it must allow nesting, since a
    ``transaction()`` may start inside a ``blockConcurrencyWhile`` callback) and return its
    result. ``transaction()`` runs its whole body through it, as workerd holds the input gate for
    a transaction; ``fn`` never raises (the callback's error is re-raised outside), so the runner
    need not tell a failed transaction from a broken object. Nested transactions do not call it
    again. With or without it, transactions never interleave (see
    :mod:`doemu.storage.transactions`).
    """

    def __init__(
        self,
        path: pathlib.Path,
        *,
        clock: Clock,
        sql_enabled: bool = True,
        limits: StorageLimits | None = None,
        has_alarm_handler: bool = True,
        on_alarm_commit: Callable[[float | None], None] | None = None,
        on_alarm_prepare: Callable[[float | None], asyncio.Future[None] | None] | None = None,
        exclusive: Exclusive | None = None,
        files: ObjectFiles | None = None,
        sync_pool: SyncPool | None = None,
        on_commit_failed: Callable[[BaseException], None] | None = None,
    ) -> None:
        self._path = pathlib.Path(path)
        self._sql_enabled = sql_enabled
        self._conn = StorageConnection(
            self._path,
            limits=limits,
            on_commit=self._after_commit,
            on_rollback=self._after_rollback,
            files=files,
            sync_pool=sync_pool,
            before_commit=self._before_commit,
            on_commit_failed=on_commit_failed,
        )
        self._kv = KvStore(self._conn, limits)
        self._alarms = AlarmStore(
            self._conn,
            clock,
            has_alarm_handler=has_alarm_handler,
            on_alarm_commit=on_alarm_commit,
            on_alarm_prepare=on_alarm_prepare,
        )
        self._sql = SqlStorage(self._conn)
        self._sync_kv = SyncKvStorage(self._conn, self._kv)
        self._transactions = TransactionGate(self._conn, self._kv, self._alarms, exclusive)

    def _before_commit(self) -> asyncio.Future[None] | None:
        return self._alarms.before_commit()

    def _after_commit(self) -> None:
        self._alarms.after_commit()

    def _after_rollback(self) -> None:
        self._alarms.after_rollback()

    def _guard(self, op: str) -> None:
        self._conn.check_open()

    # -- Cloudflare surface ---------------------------------------------------------------------

    @property
    def sql(self) -> SqlStorage:
        """The SQL API (only for classes created with ``new_sqlite_classes``)."""
        if not self._sql_enabled:
            raise StorageError(messages.SQL_NOT_ENABLED)
        return self._sql

    @property
    def kv(self) -> SyncKvStorage:
        """The synchronous KV API (SQLite-backed classes only, like ``sql``)."""
        if not self._sql_enabled:
            raise StorageError(messages.SQL_NOT_ENABLED)
        return self._sync_kv

    def deleteAll(
        self, options: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> Resolved[None]:
        """Delete all SQL tables, all KV data and the alarm, atomically with the turn."""
        try:
            self._conn.check_open()
            check_options("deleteAll", _DELETE_ALL, options, kwargs)
            if self._conn.in_savepoint:
                # workerd: inside transaction()/transactionSync(), ctx.storage is part of the
                # transaction, and deleteAll() fails there as txn.deleteAll() does.
                raise StorageError(messages.DELETE_ALL_IN_TXN)
            drop_user_schema(self._conn)
            self._kv.clear()
            self._alarms.delete()
            return Resolved(None)
        except Exception as exc:
            return rejected(exc)

    async def transaction(
        self, closure: Callable[[Transaction], Any], options: Mapping[str, Any] | None = None
    ) -> Any:
        """Run ``closure(txn)`` (sync or async) atomically; it rolls back if ``closure`` raises.

        No other event runs meanwhile when the storage was given ``exclusive``; in any case a
        concurrent ``transaction()`` waits for this one (a nested one nests in it).
        """
        self._conn.check_open()
        return await self._transactions.run(closure)

    def transactionSync(self, closure: Callable[[], T]) -> T:
        """Run ``closure()`` atomically and return its result; roll back if it raises."""
        self._conn.check_open()
        return run_transaction_sync(self._conn, closure)

    def sync(self) -> Resolved[None]:
        """Make every write so far durable now (normally done when the turn ends)."""
        try:
            self._conn.check_open()
            self._conn.commit()
            return Resolved(None)
        except Exception as exc:
            return rejected(exc)

    # -- runtime-facing (not part of the Cloudflare surface) ------------------------------------

    def commit(self) -> None:
        """The output gate: commit the implicit transaction now (no-op if nothing is pending).

        While a ``transaction()``/``transactionSync()`` savepoint is open, the commit happens as
        soon as it is released. Raises :class:`StorageError` (after rolling back) if the
        transaction cannot be committed.
        """
        self._conn.commit()

    def barrier(self, *, hold: bool = True) -> asyncio.Future[None] | None:
        """What output leaving the object now must await (None: nothing); call after
        :meth:`commit`. See :meth:`StorageConnection.barrier` for ``hold``."""
        return self._conn.barrier(hold=hold)

    def rollback(self) -> None:
        """Drop every uncommitted write (``ctx.abort``), open savepoints included."""
        self._conn.rollback()

    def close(self) -> None:
        """Commit what is pending and close the connection. Idempotent."""
        self._conn.close()

    @property
    def closed(self) -> bool:
        return self._conn.closed

    @property
    def database_path(self) -> pathlib.Path:
        return self._path

    @property
    def has_alarm_handler(self) -> bool:
        """Whether ``setAlarm`` is allowed (the class defines ``alarm``)."""
        return self._alarms.has_alarm_handler

    @has_alarm_handler.setter
    def has_alarm_handler(self, value: bool) -> None:
        self._alarms.has_alarm_handler = value

    def alarm_time(self) -> float | None:
        """The stored alarm time (uncommitted changes included), even while it is delivered."""
        return self._alarms.stored()

    def set_alarm_internal(self, when: float | None) -> None:
        """Write the alarm for the runtime (retry time, drop, run-now) without ``setAlarm``'s
        validation or clamping; reported through ``on_alarm_commit`` once committed."""
        self._alarms.set_internal(when)

    def begin_alarm_delivery(self, scheduled: float) -> None:
        """The ``alarm`` handler for the alarm due at ``scheduled`` starts: from now on
        ``getAlarm()`` returns None unless the handler sets a new alarm."""
        self._alarms.begin_delivery(scheduled)

    def end_alarm_delivery(self, *, success: bool) -> bool:
        """The handler finished. Returns True if it set or deleted the alarm itself (which
        cancels a retry): judged from what is stored, so a ``setAlarm`` that was rolled back with
        its transaction does not count, while setting the delivered time again does (the alarm
        is then reported through ``on_alarm_commit`` and fires again). After a success that left
        the alarm alone, the delivered alarm is deleted in the implicit transaction; commit to
        make that durable. Whatever alarm is committed after ``begin_alarm_delivery`` is reported
        through ``on_alarm_commit``, even the delivered time (the scheduler dropped it)."""
        return self._alarms.end_delivery(success=success)

    @property
    def commit_count(self) -> int:
        """How many implicit transactions this storage has committed (diagnostics, tests)."""
        return self._conn.commit_count

    def get_meta(self, key: str) -> Any | None:
        """An internal ``_cf_METADATA`` value (uncommitted writes included), or None."""
        row = self._conn.read(_GET_META, (key,)).fetchone()
        return None if row is None else clone.decode(row[0])

    def set_meta(self, key: str, value: Any) -> None:
        """Write an internal ``_cf_METADATA`` value inside the implicit transaction."""
        self._conn.write(_SET_META, (key, clone.encode(value)))

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<ObjectStorage {self._path} {state}>"
