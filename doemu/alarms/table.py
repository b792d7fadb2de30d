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

import sqlite3
from pathlib import Path
from urllib.parse import quote

__all__ = ["AlarmTable", "StoredAlarm", "load_alarms"]

#: ``(actor_id, scheduled_ms, actor_name)``: one row of the table.
StoredAlarm = tuple[str, float, str | None]

_SELECT_ALL = "SELECT actor_id, scheduled_time, actor_name FROM _cf_ALARM"


async def load_alarms(path: Path, *, read_only: bool = False) -> list[StoredAlarm]:
    """Every alarm stored in the table at ``path`` (off the loop: start-up may read thousands).

    ``read_only`` opens the file with ``mode=ro`` and reads nothing when the file or the table
    does not exist yet, so a reader never creates or writes a server's files.
    """
    import aiosqlite  # only this scan needs it: importing the module does not pay for it

    if read_only:
        target, uri = f"file:{quote(str(path), safe='/')}?mode=ro", True
    else:
        target, uri = str(path), False
    try:
        async with aiosqlite.connect(target, uri=uri) as db:
            cursor = await db.execute(_SELECT_ALL)
            rows = await cursor.fetchall()
    except sqlite3.OperationalError:
        if read_only:
            return []  # no file or no table yet: nothing was ever scheduled
        raise
    return [(str(r[0]), float(r[1]), None if r[2] is None else str(r[2])) for r in rows]


class AlarmTable:
    """``_cf_ALARM`` in one namespace's ``metadata.sqlite``, open for the runtime.

    Writes are synchronous and tiny (one row) because they happen on the commit path of the
    object's own transaction, before any output leaves the object; the start-up scan, which may
    read thousands of rows, goes through aiosqlite so the loop stays responsive.
    """

    def __init__(self, path: Path, *, durable: bool = False) -> None:
        self.path = path
        #: Power-loss durability: a new alarm time is fsynced before it is written to the object
        #: (see :meth:`set`); a deletion need not be (a stale row only wakes an object once).
        self.durable = durable
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS _cf_ALARM ("
            "actor_id TEXT PRIMARY KEY, scheduled_time INTEGER NOT NULL, actor_name TEXT)"
        )

    def set(self, actor_id: str, scheduled_ms: float, actor_name: str | None) -> None:
        """Store an alarm time; at power-loss durability it is on disk when this returns.

        The runtime calls it *before* the object's own commit of that alarm, so the row must not
        be able to reach the disk after the object's file: that order is what lets a restart find
        every alarm an object holds. An fsync on the loop, but only when an alarm time changes.
        """
        if self.durable:
            self._conn.execute("PRAGMA synchronous=FULL")
            try:
                self._upsert(actor_id, scheduled_ms, actor_name)
            finally:
                self._conn.execute("PRAGMA synchronous=NORMAL")
            return
        self._upsert(actor_id, scheduled_ms, actor_name)

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
        """Every persisted alarm as ``(actor_id, scheduled_ms, actor_name)``."""
        return await load_alarms(self.path)

    def close(self) -> None:
        self._conn.close()
