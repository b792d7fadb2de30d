"""One SQLite file of a binding (a KV namespace, a D1 database, an R2 bucket's metadata).

Every binding keeps its state as an object does: SQLite in WAL mode with ``synchronous=NORMAL``,
so a committed write survives the process being killed. At power-loss durability
(``--durability power``, given as a :class:`~doemu.storage.durability.SyncPool`) each commit's
WAL is fsynced off the loop, and the binding's promise resolves only once that fsync returns
(:meth:`BindingFile.durable`): an acknowledged write then survives a power cut too. A file (and
the directories) made here are fsynced with the first commit, so the new name is durable as well.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ..storage.authorizer import Authorizer
from ..storage.connection import internal_sql
from ..storage.durability import SyncPool, SyncTracker

__all__ = ["BindingFile"]

_BEGIN = internal_sql("BEGIN IMMEDIATE")
_COMMIT = internal_sql("COMMIT")
_ROLLBACK = internal_sql("ROLLBACK")


class BindingFile:
    """An open SQLite file of one binding, used on the event loop (the statements are small).

    ``schema`` runs once at open. :meth:`write` is one transaction (``BEGIN IMMEDIATE`` …
    ``COMMIT``, rolled back if its body raises); :meth:`durable` is the future of the fsync that
    covers every commit so far, or ``None`` when nothing needs to wait (process durability).

    With an ``authorizer`` (D1: user SQL runs here), the file's own statements are marked and
    run trusted, as an object's connection does (see :func:`doemu.storage.connection.internal_sql`).
    """

    def __init__(
        self,
        path: Path,
        schema: Sequence[str],
        sync_pool: SyncPool | None,
        *,
        authorizer: Authorizer | None = None,
    ) -> None:
        self.path = path
        self.authorizer = authorizer
        made = _make_dirs(path.parent)
        created = not path.exists()
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        for statement in schema:
            self.conn.execute(statement)
        if authorizer is not None:
            self.conn.set_authorizer(authorizer)
        self._sync: SyncTracker | None = None
        if sync_pool is not None:
            self._sync = SyncTracker(sync_pool, (f"{path}-wal",))
            self._sync.also(str(path.parent))  # the WAL's (and a new file's) directory entry
            if created:
                self._sync.also(str(path))
            for directory in made:
                self._sync.also(str(directory.parent))
        self._depth = 0

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (nested calls join the outer one)."""
        if self._depth:
            self._depth += 1
            try:
                yield self.conn
            finally:
                self._depth -= 1
            return
        self.internal(_BEGIN)
        self._depth = 1
        try:
            yield self.conn
        except BaseException:
            self._depth = 0
            self.internal(_ROLLBACK)
            raise
        self._depth = 0
        try:
            self.internal(_COMMIT)
        except BaseException:
            self.internal(_ROLLBACK)
            raise

    def internal(self, sql: str, params: Sequence[object] = ()) -> sqlite3.Cursor:
        """Run one of the file's own statements (``sql`` from :func:`internal_sql`), trusted."""
        auth = self.authorizer
        if auth is None:
            return self.conn.execute(sql, params)
        auth.trusted = True
        try:
            return self.conn.execute(sql, params)
        finally:
            auth.trusted = False

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    def durable(self) -> asyncio.Future[None] | None:
        """After a commit: what its answer waits for (an fsync at power durability)."""
        return None if self._sync is None else self._sync.written()

    def close(self) -> None:
        self.conn.close()


def _make_dirs(directory: Path) -> list[Path]:
    """Create ``directory`` and its missing parents; returns the ones made, outermost first."""
    missing = []
    current = directory
    while not current.exists():
        missing.append(current)
        current = current.parent
    directory.mkdir(parents=True, exist_ok=True)
    return list(reversed(missing))
