"""How durable a commit is before its output leaves: a process crash, or a power loss.

Two levels, chosen per runtime (``--durability``; storage is given a :class:`SyncPool` at the
power level and none at the process level):

* ``process`` — a commit survives the process being killed once ``COMMIT`` returns: SQLite in WAL
  mode with ``synchronous=NORMAL`` writes the WAL to the page cache and syncs it only at
  checkpoints. Nothing waits for the disk.
* ``power`` — a commit survives a power loss or an OS crash before anything that depends on it
  leaves the object, as workerd's local storage (``synchronous=FULL``) promises. Instead of
  fsyncing inside ``COMMIT`` on the event loop, as ``synchronous=FULL`` would, the object's WAL is
  fsynced by a pool of worker threads after the commit, while the output gate holds the object's
  output (its response, WebSocket frames, calls to other objects, stream chunks) until the fsync
  covering that commit returns. The loop keeps serving everything else; many objects' fsyncs run
  at once; and one fsync covers every commit made while the previous one was in flight. New
  files and the directory entries that name them are fsynced before their first use.

:class:`SyncTracker` is one file's part of that: which commit the last fsync covered, and a
future for "durable up to here".
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from collections.abc import Callable, Iterable

__all__ = ["SyncPool", "SyncTracker", "fsync_paths"]

#: fsyncs in flight at once (they wait on the disk, not on the GIL).
POOL_THREADS = 8


def fsync_paths(paths: Iterable[str]) -> None:
    """fsync each file or directory (a missing one is skipped: nothing of it to lose)."""
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class SyncPool:
    """The threads that run fsyncs for one runtime (started on first use)."""

    def __init__(self, threads: int = POOL_THREADS) -> None:
        self._threads = threads
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        #: fsyncs run so far (tests check where they happen).
        self.count = 0

    def sync(self, paths: tuple[str, ...]) -> asyncio.Future[None]:
        """fsync ``paths`` off the loop; the future settles on the loop when they are durable."""
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                self._threads, thread_name_prefix="doemu-fsync"
            )
        self.count += len(paths)
        return asyncio.get_running_loop().run_in_executor(self._executor, fsync_paths, paths)

    def close(self) -> None:
        """Wait for the fsyncs in flight and stop the threads."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None


class SyncTracker:
    """Durability of one file written by commits: what the last fsync covered, what waits.

    :meth:`written` is told after each commit that changed the file; it returns a future that
    settles once an fsync started after that commit has returned. While one fsync runs, later
    commits wait for the next, which then covers them all.
    """

    __slots__ = ("_extra", "_failed", "_inflight", "_on_error", "_paths", "_pool", "_requested",
                 "_synced", "_waiters")  # fmt: skip

    def __init__(
        self,
        pool: SyncPool,
        paths: tuple[str, ...],
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self._pool = pool
        self._paths = paths
        self._extra: set[str] = set()
        self._on_error = on_error
        self._requested = 0
        self._synced = 0
        self._inflight: asyncio.Future[None] | None = None
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._failed: BaseException | None = None

    def also(self, path: str) -> None:
        """Sync ``path`` too, once, with the next fsync (a new file's directory, say)."""
        self._extra.add(path)

    def written(self) -> asyncio.Future[None]:
        """A commit changed the file: a future that settles once that commit is durable."""
        self._requested += 1
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._failed is not None:
            future.set_exception(self._failed)
            return future
        self._waiters.append((self._requested, future))
        if self._inflight is None:
            self._start()
        return future

    def pending(self) -> asyncio.Future[None] | None:
        """A future for everything written so far, or None when it is all durable."""
        if self._synced >= self._requested and self._failed is None:
            return None
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._failed is not None:
            future.set_exception(self._failed)
        else:
            self._waiters.append((self._requested, future))
        return future

    def _start(self) -> None:
        covered = self._requested
        paths = (*self._extra, *self._paths)
        self._extra.clear()
        job = self._pool.sync(paths)
        self._inflight = job
        job.add_done_callback(lambda done: self._finished(done, covered))

    def _finished(self, job: asyncio.Future[None], covered: int) -> None:
        self._inflight = None
        error = job.exception() if not job.cancelled() else asyncio.CancelledError()
        if error is not None:
            self._failed = error
            waiters, self._waiters = self._waiters, []
            for _, future in waiters:
                if not future.done():
                    future.set_exception(error)
            if self._on_error is not None:
                self._on_error(error)
            return
        self._synced = covered
        still: list[tuple[int, asyncio.Future[None]]] = []
        for seq, future in self._waiters:
            if seq <= covered:
                if not future.done():
                    future.set_result(None)
            else:
                still.append((seq, future))
        self._waiters = still
        if self._requested > self._synced:
            self._start()
