"""Object files: a new object's database without stalling the loop, and closes moved off it.

A fresh SQLite database in WAL mode is expensive to make where it matters, on the event-loop
thread that serves every object: three files are created (the database, its ``-wal`` and its
``-shm``; on ext4 each creation costs 0.3–0.5 ms), switching to WAL rewrites the header with an
fsync, and the first frame of a new WAL syncs the WAL header. Closing the last connection is
expensive too: SQLite checkpoints the WAL into the database (fsyncs) and unlinks ``-wal`` and
``-shm``. A cold object used to cost several milliseconds of loop time that every other object
waited through, and start-up with thousands of overdue alarms (each activation evicting another
object) spent most of its time in ``close()``.

:class:`ObjectFiles` takes that work off the loop:

* **A template.** An empty object database in WAL mode whose schema is committed *in the WAL*,
  built once per process. Because its WAL already holds frames, the object's first write appends
  to it instead of starting a new WAL, so no header is rewritten and nothing is synced.
* **Spares.** A worker thread keeps a few copies of the template (database, ``-wal``, empty
  ``-shm``) ready in ``<namespace dir>/.spare/``; a new object takes one with three renames (tens
  of microseconds). When none is ready the template is written in place, still without an fsync.
* **Deferred close.** :meth:`ObjectFiles.close_later` hands a connection with nothing uncommitted
  to the same worker thread. An object activated again before that close has run takes its
  connection back (:meth:`ObjectFiles.reclaim`): no close, no open, no checkpoint. One activated
  while the worker is closing its file waits for that close, off the loop: the checkpoint holds
  the file's lock, and a connection opened meanwhile would sleep in SQLite's busy handler *on the
  loop thread*. :meth:`ObjectFiles.reclaim` raises :class:`FileClosing` instead of waiting, and
  the activation awaits :meth:`FileClosing.wait` and tries again.

Durability: at the process level (WAL with ``synchronous=NORMAL``) a commit survives the process
being killed once ``COMMIT`` returns; the template files are ordinary writes in the page cache,
like any commit, and any prefix of them is a valid (empty) database. At the power level
(``durable=True``) :meth:`ObjectFiles.create` returns what the new object's first commit must
fsync besides its WAL: the database file and the directory entry that names it (and, once per
directory, the entry naming the directory itself). Those fsyncs run in the commit's own job, off
the loop; the worker making spares does none, so it keeps up with a burst of new objects (when it
fsynced each spare, a burst ran it dry and new files were written on the loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import itertools
import logging
import os
import queue
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from .trim import trim_freed_memory

__all__ = ["SPARE_DIR", "FileClosing", "ObjectFiles", "template", "write_template"]

_log = logging.getLogger("doemu.storage")

#: Where each namespace directory keeps its ready-made object files.
SPARE_DIR = ".spare"

#: Ready spares per namespace directory; the worker tops the pool up after every take.
DEFAULT_SPARES = 16

#: Connections waiting for the worker to close them, at most. Each holds three descriptors, and
#: under heavy churn (thousands of overdue alarms at start-up, each activation evicting another
#: object) closes would pile up faster than the worker's fsyncs retire them: past this bound the
#: caller closes inline, which is the back-pressure.
MAX_PENDING_CLOSES = 32


#: Seconds without file jobs after closes before freed memory goes back to the OS (see
#: :mod:`doemu.storage.trim`): once a burst of evictions is over, not during it.
TRIM_AFTER_IDLE_S = 0.5
#: Closes it takes to be worth that: a garbage collection on the loop, then ``malloc_trim``.
TRIM_MIN_CLOSES = 64

_SUFFIXES = ("-wal", "-shm", "")  # the database itself last: its appearance makes the object


@functools.cache
def template(schema: tuple[str, ...]) -> tuple[bytes, bytes]:
    """``(database bytes, WAL bytes)`` of an empty object database with ``schema`` in its WAL.

    The bytes are copied while the building connection is still open, before any checkpoint, so
    the pair is a consistent snapshot: the database file holds the WAL-mode header and the WAL
    the committed schema.
    """
    with tempfile.TemporaryDirectory(prefix="doemu-template-") as tmp:
        path = Path(tmp) / "template.sqlite"
        db = sqlite3.connect(path, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL").fetchall()
            db.execute("BEGIN")
            for statement in schema:
                db.execute(statement)
            db.execute("COMMIT")
            data = path.read_bytes()
            wal = Path(f"{path}-wal").read_bytes()
        finally:
            db.close()
    return data, wal


def write_template(path: Path, schema: Sequence[str]) -> None:
    """Create ``path`` (which must not exist) as a copy of the template; no fsync."""
    data, wal = template(tuple(schema))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    # The database alone is already valid (empty, in WAL mode); the WAL adds the schema.
    with open(f"{path}-wal", "wb") as f:
        f.write(wal)


class FileClosing(Exception):
    """The worker is closing the file an activation wants (see :meth:`ObjectFiles.reclaim`).

    Internal to doemu: the host catches it, awaits :meth:`wait` and activates again.
    """

    def __init__(self, path: Path, done: threading.Event) -> None:
        super().__init__(f"{path} is being closed")
        self._done = done

    async def wait(self) -> None:
        """Until the close is over, without blocking the event loop."""
        if not self._done.is_set():
            await asyncio.to_thread(self._done.wait)


class ObjectFiles:
    """Creates object databases from spares and closes connections on one worker thread.

    One instance per runtime. The worker thread starts on first use and stops in :meth:`close`,
    which also removes the unused spares.
    """

    def __init__(self, *, spares: int = DEFAULT_SPARES, durable: bool = False) -> None:
        self._target = spares
        #: Power-loss durability: spares are fsynced, new files' entries reported (see above).
        self.durable = durable
        self._named: set[Path] = set()
        self._lock = threading.Lock()
        self._ready: dict[Path, list[Path]] = {}
        self._filling: set[Path] = set()
        self._swept: set[Path] = set()
        self._pending_closes = 0
        #: Connections waiting for a deferred close, by file, that an activation may take back.
        self._closing: dict[str, sqlite3.Connection] = {}
        #: Files whose connection the worker is closing right now, set when it is closed.
        self._in_close: dict[str, threading.Event] = {}
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._seq = itertools.count()
        self._closed = False
        #: Connections closed since the last trim (the worker trims once it has been idle).
        self._closes_since_trim = 0
        #: Trims run so far (tests read it).
        self.trims = 0
        #: The loop connections are closed from (the collection before a trim runs there).
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- the loop side --------------------------------------------------------------------------

    def create(self, path: Path, schema: Sequence[str]) -> tuple[str, ...]:
        """Make ``path`` a new, empty object database (the caller saw that it does not exist).

        Returns the paths to fsync before the object's first output (none unless durable).
        """
        directory = path.parent
        spare = self._take(directory)
        if spare is not None:
            try:
                for suffix in _SUFFIXES:
                    os.replace(f"{spare}{suffix}", f"{path}{suffix}")
            except OSError as exc:  # a spare removed behind our back: make the file here
                _log.debug("spare %s unusable: %s", spare, exc)
                spare = None
        if spare is None:
            write_template(path, schema)
        self._top_up(directory, schema)
        if not self.durable:
            return ()
        unsynced: tuple[str, ...] = (str(path),)
        if directory not in self._named:  # the directory's own entry, once per process
            self._named.add(directory)
            unsynced += (str(directory.parent),)
        return (*unsynced, str(directory))

    def close_later(
        self, db: sqlite3.Connection, path: Path | None = None, *, reusable: bool = True
    ) -> None:
        """Close ``db`` (nothing uncommitted) on the worker thread; at once when closed.

        ``path`` is the file ``db`` is open on: an activation of that file waits while the
        close runs, and, if ``reusable``, can take the connection back until it starts.
        """
        key = None if path is None else str(path)
        if self._loop is None:
            with contextlib.suppress(RuntimeError):  # no loop (a synchronous caller): none
                self._loop = asyncio.get_running_loop()
        with self._lock:
            inline = self._closed or self._pending_closes >= MAX_PENDING_CLOSES
            if not inline:
                self._pending_closes += 1
                if key is not None and reusable:
                    self._closing[key] = db
        if inline:
            db.close()
            with self._lock:
                self._closes_since_trim += 1
                wake = self._closes_since_trim == TRIM_MIN_CLOSES and not self._closed
            if wake:  # the worker may be waiting without a timeout: let it start counting
                self._submit(_nothing)
        else:
            self._submit(functools.partial(self._close, db, key, reusable))

    def reclaim(self, path: Path) -> sqlite3.Connection | None:
        """The connection to ``path`` waiting for a deferred close, taken back; or ``None``.

        Raises :class:`FileClosing` while the worker is closing that file (well under a
        millisecond, or the fsyncs of a checkpoint): opened during it, a new connection would
        find the file locked by the checkpoint and SQLite's busy handler would sleep on the loop
        thread. The caller awaits the close instead, and never blocks the loop.
        """
        key = str(path)
        with self._lock:
            db = self._closing.pop(key, None)
            closing = self._in_close.get(key) if db is None else None
        if closing is not None and not closing.is_set():
            raise FileClosing(path, closing)
        return db

    def _close(self, db: sqlite3.Connection, key: str | None, reusable: bool) -> None:
        done: threading.Event | None = None
        try:
            with self._lock:
                if key is not None:
                    if reusable:
                        if self._closing.get(key) is not db:
                            return  # reclaimed: the object is live again on this connection
                        del self._closing[key]
                    done = self._in_close[key] = threading.Event()
            db.close()
        finally:
            with self._lock:
                self._closes_since_trim += 1
                self._pending_closes -= 1
                if key is not None and done is not None:
                    if self._in_close.get(key) is done:
                        del self._in_close[key]
                    done.set()

    def close(self) -> None:
        """Run every queued job, stop the worker and remove unused spares (blocking; idempotent)."""
        if self._closed:
            return
        self._closed = True
        thread = self._thread
        if thread is not None:
            self._jobs.put(None)
            thread.join()
        while True:  # jobs queued after the stop marker (none expected), run here
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                self._run(job)
        with self._lock:
            ready, self._ready = self._ready, {}
        for spares in ready.values():
            for spare in spares:
                _remove_set(spare)
        for directory in self._swept:
            with contextlib.suppress(OSError):  # not empty: someone else's files; leave them
                (directory / SPARE_DIR).rmdir()

    # -- spares ----------------------------------------------------------------------------------

    def _take(self, directory: Path) -> Path | None:
        with self._lock:
            spares = self._ready.get(directory)
            return spares.pop() if spares else None

    def _top_up(self, directory: Path, schema: Sequence[str]) -> None:
        if self._closed or self._target <= 0:
            return
        with self._lock:
            if directory in self._filling:
                return
            self._filling.add(directory)
        self._submit(functools.partial(self._fill, directory, tuple(schema)))

    def _fill(self, directory: Path, schema: tuple[str, ...]) -> None:
        """Worker: make one spare, then queue the next, so closes interleave with filling."""
        spare_dir = directory / SPARE_DIR
        if directory not in self._swept:  # once per process: spares a killed process left
            self._swept.add(directory)
            spare_dir.mkdir(exist_ok=True)
            for stale in spare_dir.iterdir():
                stale.unlink(missing_ok=True)
        with self._lock:
            short = len(self._ready.get(directory, ())) < self._target and not self._closed
            if not short:
                self._filling.discard(directory)
                return
        spare = spare_dir / f"{os.getpid()}-{next(self._seq)}.sqlite"
        write_template(spare, schema)
        Path(f"{spare}-shm").touch()
        with self._lock:
            self._ready.setdefault(directory, []).append(spare)
        self._submit(functools.partial(self._fill, directory, schema))

    # -- the worker thread -----------------------------------------------------------------------

    def _submit(self, job: Callable[[], None]) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="doemu-files", daemon=True)
            self._thread.start()
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            if self._closes_since_trim >= TRIM_MIN_CLOSES:
                try:
                    job = self._jobs.get(timeout=TRIM_AFTER_IDLE_S)
                except queue.Empty:
                    self._idle_after_closes()
                    continue
            else:
                job = self._jobs.get()
            if job is None:
                return
            self._run(job)

    def _idle_after_closes(self) -> None:
        """Many closes, then a quiet moment: collect on the loop, then trim here.

        The objects of evicted instances are mostly in reference cycles, so their memory is
        free only after a collection; the trim then hands it back.
        """
        with self._lock:
            self._closes_since_trim = 0
        loop = self._loop
        try:
            if loop is None:
                raise RuntimeError("no loop")
            loop.call_soon_threadsafe(self._collect)
        except RuntimeError:  # the loop is gone: trim what is free already
            self._trim()

    def _collect(self) -> None:
        gc.collect()
        if not self._closed:
            self._submit(self._trim)

    def _trim(self) -> None:
        try:
            trim_freed_memory()
        except Exception:  # never worth failing the worker for
            _log.exception("returning freed memory to the OS failed")
        self.trims += 1

    def _run(self, job: Callable[[], None]) -> None:
        try:
            job()
        except Exception:
            _log.exception("object-file job failed")
            if isinstance(job, functools.partial) and job.func == self._fill:
                with self._lock:
                    self._filling.discard(job.args[0])


def _nothing() -> None:
    return None


def _remove_set(spare: Path) -> None:
    for suffix in _SUFFIXES:
        with contextlib.suppress(OSError):
            os.unlink(f"{spare}{suffix}")
