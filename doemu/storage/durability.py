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
import functools
import os
import queue
import threading
from collections.abc import Callable, Iterable

__all__ = ["SyncPool", "SyncTracker", "fsync_paths"]

#: fsyncs in flight at once (they wait on the disk, not on the GIL). The disk takes more at once
#: than it takes one after the other (the journal and the device's cache flush are shared): on this
#: project's machine 8 threads fdatasyncing 8 files reach ~10,000/s, 32 threads ~14,000/s, 64 no
#: more, and a c=32 load keeps up to 32 objects waiting (``bench/fsyncfloor.py`` measures it).
POOL_THREADS = 32


def fsync_paths(paths: Iterable[str], *, data_only: bool = False) -> None:
    """fsync each file or directory (a missing one is skipped: nothing of it to lose).

    ``data_only`` uses ``fdatasync``: the data and what is needed to read it back (the size),
    not the timestamps. That is what SQLite itself uses for a WAL on Linux, and it matters: a
    WAL rewritten in place after a checkpoint keeps its size, so ``fdatasync`` skips the
    file-system journal commit that the new modification time alone would cost ``fsync``
    (2-3x the rate on this project's ext4, see ``bench/fsyncfloor.py``). New files and
    directory entries always get a full ``fsync``.
    """
    sync = os.fdatasync if data_only else os.fsync
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            sync(fd)
        finally:
            os.close(fd)


class SyncPool:
    """The threads that run fsyncs for one runtime (started on first use).

    Cheap on the loop, because it runs once per commit: a job is a put on a C queue (no
    ``concurrent.futures`` future, no asyncio future), and the threads hand results back in
    batches, one loop wake-up for every job finished while the previous hand-back was pending.
    Each thread takes one job at a time, so fsyncs of different files run side by side (the
    filesystem's journal commits them together).
    """

    def __init__(self, threads: int = POOL_THREADS) -> None:
        self._size = threads
        self._threads: list[threading.Thread] = []
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._finished: list[tuple[Callable[[BaseException | None], None], BaseException | None]]
        self._finished = []
        self._handing_back = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._busy = 0
        #: fsyncs run so far (tests check where they happen).
        self.count = 0

    def sync(
        self,
        paths: tuple[str, ...],
        done: Callable[[BaseException | None], None],
        *,
        data_only: bool = False,
    ) -> None:
        """fsync ``paths`` off the loop; ``done(error or None)`` runs on the loop afterwards.

        ``data_only``: ``fdatasync`` rather than ``fsync`` (see :func:`fsync_paths`)."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        self.count += len(paths)
        self._busy += 1
        if len(self._threads) < min(self._busy, self._size):
            thread = threading.Thread(target=self._work, name="doemu-fsync", daemon=True)
            self._threads.append(thread)
            thread.start()
        self._jobs.put((paths, done, data_only))

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            paths, done, data_only = job
            error: BaseException | None = None
            try:
                fsync_paths(paths, data_only=data_only)
            except Exception as exc:  # any failure must reach its waiter: a job whose thread
                error = exc  # died would leave its commit waiting forever
            with self._lock:
                self._finished.append((done, error))
                if self._handing_back:
                    continue
                self._handing_back = True
            loop = self._loop
            assert loop is not None
            try:
                loop.call_soon_threadsafe(self._hand_back)
            except RuntimeError:  # the loop is closed: nobody is waiting any more
                return

    def _hand_back(self) -> None:
        with self._lock:
            finished, self._finished = self._finished, []
            self._handing_back = False
        self._busy -= len(finished)
        for done, error in finished:
            done(error)

    def close(self) -> None:
        """Wait for the fsyncs in flight and stop the threads."""
        threads, self._threads = self._threads, []
        for _ in threads:
            self._jobs.put(None)
        for thread in threads:
            thread.join()


_Job = tuple[tuple[str, ...], Callable[[BaseException | None], None], bool]


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
        self._inflight = False
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
        if not self._inflight:
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
        done = functools.partial(self._finished, covered)
        self._inflight = True
        if not self._extra:
            self._pool.sync(self._paths, done, data_only=True)
            return
        # A new file: its name and data too. One job per path, side by side (the journal commits
        # them together), rather than one after the other on one thread. The new files and
        # directories get a full fsync, the written files (the WAL) fdatasync.
        extra = tuple(self._extra)
        paths = (*extra, *self._paths)
        self._extra.clear()
        left = len(paths)
        failure: BaseException | None = None

        def one_done(error: BaseException | None) -> None:
            nonlocal left, failure
            left -= 1
            failure = failure or error
            if left == 0:
                done(failure)

        for path in extra:
            self._pool.sync((path,), one_done)
        for path in self._paths:
            self._pool.sync((path,), one_done, data_only=True)

    def _finished(self, covered: int, error: BaseException | None) -> None:
        self._inflight = False
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
