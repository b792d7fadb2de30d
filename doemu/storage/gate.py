"""The output gate's view of one connection: what output must wait for before it leaves.

Output (a response, a WebSocket frame, a call to another object, a stream chunk) may leave an
object only once the writes made before it are durable. The connection commits at the gate; what
can still stand between that commit and the output is:

* **a commit held back by a savepoint** — inside an async ``transaction()`` callback (or while a
  transaction the handler did not await is open) the commit waits for the outermost savepoint to
  be released, so the output waits too (:meth:`CommitGate.barrier` gives a future that settles
  when that commit has happened, or the transaction was rolled back: then there is nothing to
  wait for);
* **an fsync**, at power-loss durability (see :mod:`doemu.storage.durability`): the future settles
  once the WAL is on disk.

At process durability with no savepoint open there is nothing to wait for, and the gate costs a
comparison.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable

from doemu.storage.durability import SyncPool, SyncTracker

__all__ = ["CommitGate"]


class CommitGate:
    """One connection's outstanding reasons for output to wait (see the module docstring)."""

    __slots__ = ("_deferred", "_sync", "_wal", "_wal_mark")

    def __init__(
        self,
        wal_path: str,
        pool: SyncPool | None,
        created: tuple[str, ...] = (),
        *,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self._wal = wal_path
        self._deferred: list[asyncio.Future[None]] = []
        self._sync: SyncTracker | None = None
        self._wal_mark: tuple[int, int] | None = None
        if pool is not None:
            self._sync = SyncTracker(pool, (wal_path,), on_error)
            for path in created:  # a new file and its directory entry: durable before first use
                self._sync.also(path)
            self._wal_mark = self._stat()

    @property
    def durable(self) -> bool:
        """Whether commits are fsynced before output (power-loss durability)."""
        return self._sync is not None

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self._wal)
        except OSError:
            return None
        return (st.st_size, st.st_mtime_ns)

    def new_wal(self, directory: str) -> None:
        """The WAL file is about to be created: its directory entry must become durable too."""
        if self._sync is not None:
            self._sync.also(directory)

    # -- events from the connection ----------------------------------------------------------------
    def committed(self) -> None:
        """A commit happened: start its fsync if it wrote, then release deferred output."""
        pending: asyncio.Future[None] | None = None
        sync = self._sync
        if sync is not None:
            mark = self._stat()
            if mark != self._wal_mark:  # the WAL changed: this commit wrote something
                self._wal_mark = mark
                sync.written()
            pending = sync.pending()
        waiters, self._deferred = self._deferred, []
        for waiter in waiters:
            if waiter.done():
                continue
            if pending is None:
                waiter.set_result(None)
            else:
                pending.add_done_callback(functools.partial(_settle, waiter))

    def dropped(self) -> None:
        """The held-back transaction was rolled back: output has nothing left to wait for."""
        waiters, self._deferred = self._deferred, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def failed(self, error: BaseException) -> None:
        """The held-back commit failed: the output waiting for it fails with ``error``."""
        waiters, self._deferred = self._deferred, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(error)

    # -- the output side ---------------------------------------------------------------------------
    def barrier(self, commit_held: bool) -> asyncio.Future[None] | None:
        """What output must await now (None: nothing); ``commit_held`` when a savepoint holds
        the commit back."""
        if commit_held:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._deferred.append(future)
            return future
        return None if self._sync is None else self._sync.pending()


def _settle(waiter: asyncio.Future[None], done: asyncio.Future[None]) -> None:
    if waiter.done():
        return
    error = done.exception() if not done.cancelled() else asyncio.CancelledError()
    if error is not None:
        waiter.set_exception(error)
    else:
        waiter.set_result(None)
