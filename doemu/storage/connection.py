"""One object's SQLite connection: the implicit transaction, savepoints and the output gate.

Cloudflare coalesces every write of one turn (the code that runs between two real awaits) into one
atomic transaction, and lets nothing leave the object until it is durable. doemu gets the same
with a single stdlib ``sqlite3`` connection in autocommit mode, driven by hand:

* the first statement of a turn issues ``BEGIN`` and schedules ``commit`` with
  ``loop.call_soon``, so the transaction commits when the turn yields to the event loop;
* the runtime calls :meth:`StorageConnection.commit` before any output leaves the object (the
  output gate) and :meth:`StorageConnection.rollback` when the object is aborted;
* ``transaction()``/``transactionSync()`` are savepoints inside the implicit transaction; a commit
  requested while one is open waits until the outermost one is released.

WAL with ``synchronous=NORMAL`` makes a committed transaction survive the process being killed.
At power-loss durability the connection is given a :class:`~doemu.storage.durability.SyncPool`
and its :class:`~doemu.storage.gate.CommitGate` fsyncs the WAL off the loop after each commit
that wrote; output asks :meth:`StorageConnection.barrier` what it must wait for first.

A commit that fails is never swallowed: the writes are rolled back, output waiting for them
fails, and ``on_commit_failed`` is told (the host resets the object, as workerd breaks the output
gate), so no caller is told that writes which are gone succeeded.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pathlib
import secrets
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from doemu.errors import StorageError
from doemu.storage import messages
from doemu.storage.authorizer import Authorizer
from doemu.storage.durability import SyncPool
from doemu.storage.files import ObjectFiles, write_template
from doemu.storage.gate import CommitGate
from doemu.storage.limits import StorageLimits, apply_workerd_limits

__all__ = ["Savepoint", "StorageConnection", "internal_sql"]

_log = logging.getLogger("doemu.storage")

# Python's sqlite3 caches prepared statements by SQL text, and the authorizer only runs when a
# statement is prepared. Tagging the storage layer's own SQL with a per-process secret keeps user
# SQL from ever reusing a statement that was prepared (and authorized) in trusted mode.
_TAG = f"/* doemu:{secrets.token_hex(8)} */ "


def internal_sql(sql: str) -> str:
    """Mark ``sql`` as the storage layer's own (see the note on statement caching above)."""
    return _TAG + sql


_BEGIN = internal_sql("BEGIN")
_COMMIT = internal_sql("COMMIT")
_SYNC_NORMAL = internal_sql("PRAGMA synchronous=NORMAL")
_AUTOCHECKPOINT = internal_sql("PRAGMA wal_autocheckpoint=1000")
_ROLLBACK = internal_sql("ROLLBACK")
_SCHEMA = [
    internal_sql(
        "CREATE TABLE IF NOT EXISTS _cf_KV (key TEXT PRIMARY KEY, value BLOB) WITHOUT ROWID"
    ),
    internal_sql("CREATE TABLE IF NOT EXISTS _cf_METADATA (key TEXT PRIMARY KEY, value BLOB)"),
]


class Savepoint:
    """A handle on one open savepoint; names are reused by depth so statements stay cached."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class StorageConnection:
    """The connection plus the state of its implicit transaction and savepoint stack."""

    def __init__(
        self,
        path: pathlib.Path,
        *,
        limits: StorageLimits | None,
        on_commit: Callable[[], None],
        on_rollback: Callable[[], None],
        files: ObjectFiles | None = None,
        sync_pool: SyncPool | None = None,
        before_commit: Callable[[], asyncio.Future[None] | None] | None = None,
        on_commit_failed: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.path = path
        self._files = files
        self.authorizer = Authorizer()
        self._on_commit = on_commit
        self._on_rollback = on_rollback
        self._before_commit = before_commit
        self._on_commit_failed = on_commit_failed
        self._txn_open = False
        self._commit_scheduled = False
        self._commit_wanted = False
        #: What the next COMMIT waits for (the alarm table's fsync of a new alarm time).
        self._prerequisite: asyncio.Future[None] | None = None
        self._savepoints: list[Savepoint] = []
        self.commit_count = 0
        self.closed = False
        self._closing = False
        self._wal_path = f"{path}-wal"
        reclaimed = files.reclaim(path) if files is not None else None
        if reclaimed is not None:
            self._fresh_wal = False
            self.gate = CommitGate(self._wal_path, sync_pool, on_error=self._sync_failed)
            self.db = self._reuse(reclaimed, limits)
            return
        # A file made here is the template: doemu's schema is in it and its WAL exists.
        created = not path.exists()
        unsynced: tuple[str, ...] = ()
        if created:
            if files is not None:
                unsynced = files.create(path, _SCHEMA)
            else:
                write_template(path, _SCHEMA)
                unsynced = (str(path), str(path.parent))
        self.gate = CommitGate(self._wal_path, sync_pool, unsynced, on_error=self._sync_failed)
        # No WAL file: the last close checkpointed and removed it, and the first write will
        # start a new one. SQLite fsyncs a new WAL's header (and its directory) on that first
        # commit, ~2 ms of loop time for every object woken from eviction that writes. Until a
        # write has landed, run with synchronous=OFF and no auto-checkpoint: the database file
        # was synced by the checkpoint that removed the WAL, so a power cut can only lose the
        # new WAL (recent commits, as with NORMAL), and no checkpoint runs unsynced.
        self._fresh_wal = not created and not os.path.exists(self._wal_path)
        if self._fresh_wal:
            self.gate.new_wal(str(path.parent))  # the new WAL's directory entry, at power level
        db = sqlite3.connect(
            str(path),
            isolation_level=None,
            check_same_thread=False,
            cached_statements=256,
            timeout=5.0,
        )
        try:
            db.execute("PRAGMA journal_mode=WAL").fetchall()
            if self._fresh_wal:
                db.execute("PRAGMA synchronous=OFF")
                db.execute("PRAGMA wal_autocheckpoint=0")
            else:
                db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            if not created:  # a file from elsewhere (an older doemu, a copy) may lack it
                for statement in _SCHEMA:
                    db.execute(statement)
            apply_workerd_limits(db)
            if limits is not None:
                limits.apply_sqlite_limits(db)
            db.set_authorizer(self.authorizer)
        except BaseException:
            db.close()
            raise
        self.db = db

    def _reuse(self, db: sqlite3.Connection, limits: StorageLimits | None) -> sqlite3.Connection:
        """Take back a connection an eviction handed to the deferred close.

        Nothing of the old instance survives that user code could see: its transaction was
        committed before the close was deferred, its savepoints are gone, connection pragmas
        are doemu's own (a connection whose user SQL set one is never handed back, see
        :meth:`close`), and this connection's authorizer replaces the old one. What is kept is
        what costs: the open file, the WAL index and the cached statements.
        """
        try:
            if os.path.getsize(self._wal_path) == 0:
                # The old connection never wrote: it still runs as a fresh WAL (see __init__).
                self._fresh_wal = True
        except OSError:
            pass
        if limits is not None:
            limits.apply_sqlite_limits(db)
        db.set_authorizer(self.authorizer)
        return db

    # -- running statements -------------------------------------------------------------------

    def check_open(self) -> None:
        if self.closed:
            raise StorageError(messages.STORAGE_CLOSED)

    def read(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> sqlite3.Cursor:
        """Run one of the storage layer's own statements without opening a transaction."""
        self.check_open()
        auth = self.authorizer
        auth.trusted = True
        try:
            return self.db.execute(sql, params)
        finally:
            auth.trusted = False

    def write(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> sqlite3.Cursor:
        """Run one of the storage layer's own statements inside the implicit transaction."""
        self.begin()
        return self.read(sql, params)

    def write_many(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        self.begin()
        auth = self.authorizer
        auth.trusted = True
        try:
            self.db.executemany(sql, rows)
        finally:
            auth.trusted = False

    @contextmanager
    def user_statement(self) -> Iterator[None]:
        """Bracket user SQL: open the implicit transaction, notice if SQLite dropped it."""
        self.begin()
        self.authorizer.denial = None
        try:
            yield
        except BaseException:
            if self._txn_open and not self.db.in_transaction:
                # Some errors (ON CONFLICT ROLLBACK, SQLITE_FULL…) end the whole transaction.
                self._lost()
            raise

    # -- the implicit transaction ---------------------------------------------------------------

    def begin(self) -> None:
        """Open the turn's transaction if needed and arrange for it to commit when the turn ends."""
        if self._txn_open:
            return
        self.check_open()
        self.read(_BEGIN)
        self._txn_open = True
        if not self._commit_scheduled:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # no event loop: the next explicit commit() or close() commits
            loop.call_soon(self._auto_commit)
            self._commit_scheduled = True

    def _auto_commit(self) -> None:
        self._commit_scheduled = False
        if self.closed:
            return
        try:
            self.commit()
        except Exception:
            # commit() told on_commit_failed (the host resets the object): nobody else to tell.
            _log.error("implicit commit of %s failed; its writes were rolled back", self.path)

    @property
    def pending(self) -> bool:
        """True while a transaction is open (even a read-only one)."""
        return self._txn_open

    def commit(self) -> None:
        """Commit the implicit transaction now, or as soon as the open savepoints are released."""
        if self._savepoints:
            self._commit_wanted = True
            return
        if self._prerequisite is not None and not self._closing:
            self._commit_wanted = True  # _prerequisite_done commits
            return
        self._commit_wanted = False
        if not self._txn_open or self.closed:
            return
        if self._before_commit is not None:
            prerequisite = self._before_commit()
            if prerequisite is not None and not self._closing:
                # Not yet: what this commit needs durable first is being fsynced off the loop.
                # The transaction stays open (later writes join it) and output waits for it.
                self._prerequisite = prerequisite
                self._commit_wanted = True
                prerequisite.add_done_callback(self._prerequisite_done)
                return
        try:
            self.read(_COMMIT)
        except sqlite3.Error as exc:
            # The transaction cannot become durable (e.g. a deferred foreign key is violated):
            # as on Cloudflare, where a failed flush breaks the output gate, the writes are lost.
            error = StorageError(f"Could not commit storage writes: {exc}")
            self.gate.failed(error)  # output held for this commit fails with it
            self.rollback()
            if self._on_commit_failed is not None and not self._closing:
                self._on_commit_failed(error)  # loudly: the object is reset
            raise error from exc
        self._txn_open = False
        self.commit_count += 1
        if self._fresh_wal:
            self._settle_wal()
        self.gate.committed()
        self._on_commit()

    def barrier(self, *, hold: bool = True) -> asyncio.Future[None] | None:
        """What output leaving now must await first; None when nothing (the common case).

        Call after :meth:`commit`. With ``hold``, output made while a savepoint holds the commit
        back waits for that commit; without it (a call to another object, whose answer the
        transaction may itself be waiting for) it waits only for what is committed. A commit
        waiting for its prerequisite is always waited for: nothing of user code holds it.
        """
        held = (hold and bool(self._savepoints)) or self._prerequisite is not None
        return self.gate.barrier(held)

    def _prerequisite_done(self, prerequisite: asyncio.Future[None]) -> None:
        """The fsync the pending commit waited for returned: commit now (or fail loudly)."""
        if self._prerequisite is not prerequisite:
            return
        self._prerequisite = None
        error = (
            prerequisite.exception() if not prerequisite.cancelled() else asyncio.CancelledError()
        )
        if self.closed or not self._txn_open:
            return
        if error is not None:
            failure = StorageError(f"Could not make storage writes durable: {error}")
            self.gate.failed(failure)
            self.rollback()
            if self._on_commit_failed is not None:
                self._on_commit_failed(failure)
            return
        if self._commit_wanted and not self._savepoints:
            try:
                self.commit()
            except StorageError:
                _log.error("deferred commit of %s failed; its writes were rolled back", self.path)

    def _sync_failed(self, error: BaseException) -> None:
        """An fsync of this file failed: its recent commits may not be durable."""
        _log.error("fsync of %s failed: %s", self.path, error)
        if self._on_commit_failed is not None and not self.closed:
            self._on_commit_failed(StorageError(f"Could not make storage writes durable: {error}"))

    def _settle_wal(self) -> None:
        """Back to ``synchronous=NORMAL`` once a commit has written the new WAL's header."""
        try:
            if os.path.getsize(self._wal_path) == 0:
                return  # a read-only transaction: the WAL exists but holds nothing yet
        except OSError:
            return
        self.read(_SYNC_NORMAL)
        self.read(_AUTOCHECKPOINT)
        self._fresh_wal = False

    def rollback(self) -> None:
        """Drop every uncommitted write, including open savepoints."""
        if self.closed:
            return
        if self._txn_open:
            try:
                self.read(_ROLLBACK)
            except sqlite3.Error:  # SQLite had already rolled back by itself
                pass
        self._lost()

    def _lost(self) -> None:
        self._txn_open = False
        self._savepoints.clear()
        self._commit_wanted = False
        self.gate.dropped()
        self._on_rollback()

    # -- savepoints -----------------------------------------------------------------------------

    def savepoint(self) -> Savepoint:
        """Open a savepoint inside the implicit transaction."""
        self.begin()
        point = Savepoint(f"_cf_savepoint_{len(self._savepoints)}")
        self.read(internal_sql(f"SAVEPOINT {point.name}"))
        self._savepoints.append(point)
        return point

    def release(self, point: Savepoint) -> None:
        """Keep the savepoint's writes; commit if a commit was waiting for it."""
        if point not in self._savepoints:  # already gone with an outer release or a rollback
            return
        self.read(internal_sql(f"RELEASE {point.name}"))
        del self._savepoints[self._savepoints.index(point) :]
        if not self._savepoints and self._commit_wanted:
            self.commit()

    def rollback_to(self, point: Savepoint) -> None:
        """Undo the writes made since the savepoint; it stays open until released."""
        if point not in self._savepoints:
            return
        self.read(internal_sql(f"ROLLBACK TO {point.name}"))
        del self._savepoints[self._savepoints.index(point) + 1 :]

    def is_open(self, point: Savepoint) -> bool:
        return point in self._savepoints

    @property
    def in_savepoint(self) -> bool:
        """True while a ``transaction()``/``transactionSync()`` is open."""
        return bool(self._savepoints)

    # -- lifetime -------------------------------------------------------------------------------

    def close(self) -> None:
        """Commit whatever is pending (open savepoints included) and close; idempotent."""
        if self.closed:
            return
        self._closing = True  # a failure here reaches the closer; no reset from inside it
        try:
            self._savepoints.clear()
            self.commit()
        finally:
            self.closed = True
            if self._files is not None:
                # A connection whose pragmas user SQL changed must not serve the next instance.
                reusable = not self.authorizer.pragma_set and not self.db.in_transaction
                self._files.close_later(self.db, self.path, reusable=reusable)
            else:
                self.db.close()
