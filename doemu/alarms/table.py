"""``_cf_ALARM``: the per-namespace alarm table in ``metadata.sqlite``.

Each object's alarm lives twice: in the object's own file (what ``getAlarm()`` reads) and in the
namespace's ``_cf_ALARM(actor_id, scheduled_time, actor_name)``, which is what start-up reads.
Reading one small table instead of opening every object file is what lets a runtime with 100,000
objects find its pending alarms in well under a second, and it is why an alarm set before a
SIGKILL fires after the restart with no request to its object. This module is the only one that
spells the table's SQL; readers that must not write (the CLI with no server running) use
:func:`load_alarms` with ``read_only=True``.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..storage.durability import SyncPool, SyncTracker

__all__ = ["AlarmTable", "StoredAlarm", "load_alarms"]

#: ``(actor_id, scheduled_ms, actor_name)``: one row of the table.
StoredAlarm = tuple[str, float, str | None]

_SELECT_ALL = "SELECT actor_id, scheduled_time, actor_name FROM _cf_ALARM"

#: Rows the runtime's start-up scan reads between two turns of the loop.
SCAN_CHUNK = 1000


async def load_alarms(path: Path, *, read_only: bool = False) -> list[StoredAlarm]:
    """Every alarm stored in the table at ``path``, read by a worker thread with its own
    connection (the readers of a persist dir; a runtime reads its open table with
    :meth:`AlarmTable.load_all`). Plain ``sqlite3``, not aiosqlite: it is one query.

    ``read_only`` opens the file with ``mode=ro`` and reads nothing when the file or the table
    does not exist yet, so a reader never creates or writes a server's files.
    """
    return await asyncio.to_thread(_read_alarms, path, read_only)


def _read_alarms(path: Path, read_only: bool) -> list[StoredAlarm]:
    if read_only:
        target, uri = f"file:{quote(str(path), safe='/')}?mode=ro", True
    else:
        target, uri = str(path), False
    try:
        db = sqlite3.connect(target, uri=uri)
        try:
            rows = db.execute(_SELECT_ALL).fetchall()
        finally:
            db.close()
    except sqlite3.OperationalError:
        if read_only:
            return []  # no file or no table yet: nothing was ever scheduled
        raise
    return [_stored(row) for row in rows]


def _stored(row: tuple[Any, Any, Any]) -> StoredAlarm:
    actor_id, scheduled, name = row
    return str(actor_id), float(scheduled), None if name is None else str(name)


class AlarmTable:
    """``_cf_ALARM`` in one namespace's ``metadata.sqlite``, open for the runtime.

    Writes are synchronous and tiny (one row) because they happen on the commit path of the
    object's own transaction, before any output leaves the object; the start-up scan, which may
    read thousands of rows, gives the loop a turn between chunks (:meth:`load_all`).
    """

    def __init__(self, path: Path, *, sync_pool: SyncPool | None = None) -> None:
        self.path = path
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS _cf_ALARM ("
            "actor_id TEXT PRIMARY KEY, scheduled_time INTEGER NOT NULL, actor_name TEXT)"
        )
        #: Power-loss durability: new alarm times are fsynced off the loop (see :meth:`set`).
        self._sync = None if sync_pool is None else SyncTracker(sync_pool, (f"{path}-wal",))

    def set(
        self, actor_id: str, scheduled_ms: float, actor_name: str | None
    ) -> asyncio.Future[None] | None:
        """Store an alarm time; at power-loss durability, returns the future of its fsync.

        The runtime calls it *before* the object's own commit of that alarm, and the object's
        commit waits for that future (see ``StorageConnection``): the row must not be able to
        reach the disk after the object's file, or a power cut could leave an alarm only a
        request to its object would find. The fsync runs off the loop; one covers every alarm
        set while the previous one ran.
        """
        self._upsert(actor_id, scheduled_ms, actor_name)
        return None if self._sync is None else self._sync.written()

    def _upsert(self, actor_id: str, scheduled_ms: float, actor_name: str | None) -> None:
        self._conn.execute(
            "INSERT INTO _cf_ALARM(actor_id, scheduled_time, actor_name) VALUES (?, ?, ?) "
            "ON CONFLICT(actor_id) DO UPDATE SET scheduled_time = excluded.scheduled_time, "
            "actor_name = coalesce(excluded.actor_name, _cf_ALARM.actor_name)",
            (actor_id, round(scheduled_ms), actor_name),
        )

    def delete(self, actor_id: str) -> None:
        self._conn.execute("DELETE FROM _cf_ALARM WHERE actor_id = ?", (actor_id,))

    def get(self, actor_id: str) -> float | None:
        row = self._conn.execute(
            "SELECT scheduled_time FROM _cf_ALARM WHERE actor_id = ?", (actor_id,)
        ).fetchone()
        return None if row is None else float(row[0])

    async def load_all(self) -> list[StoredAlarm]:
        """Every persisted alarm as ``(actor_id, scheduled_ms, actor_name)``.

        Read with the table's own connection, on the loop, :data:`SCAN_CHUNK` rows at a time:
        no worker thread to start and no second connection to open (a restart's table usually
        holds a handful of rows, read in tens of microseconds instead of most of a
        millisecond), while a table of thousands still lets the loop run between chunks. A
        write on this connection between two chunks commits at once (a pending read does not
        hold it back); the scan may or may not see it.
        """
        cursor = self._conn.execute(_SELECT_ALL)
        alarms: list[StoredAlarm] = []
        try:
            while True:
                rows = cursor.fetchmany(SCAN_CHUNK)
                alarms.extend(_stored(row) for row in rows)
                if len(rows) < SCAN_CHUNK:
                    return alarms
                await asyncio.sleep(0)
        finally:
            cursor.close()

    def close(self) -> None:
        self._conn.close()
