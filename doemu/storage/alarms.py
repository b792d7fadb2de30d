"""Storing an object's alarm time; the scheduler that fires it lives in the runtime.

The alarm is one row of ``_cf_METADATA`` (key ``"alarm"``), written inside the turn's implicit
transaction like any other write, so ``setAlarm`` followed by a crash before the commit leaves no
alarm, and ``getAlarm`` sees the uncommitted value. The runtime's scheduler and the namespace's
alarm table must only learn of a change once it is durable: :class:`AlarmStore` reports the final
value of each committed change, once, through ``on_alarm_commit`` (not on rollback, not when the
value ends up unchanged).
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable
from typing import Any

from doemu import clone
from doemu.clock import Clock
from doemu.errors import AlarmError
from doemu.storage import messages
from doemu.storage.connection import StorageConnection, internal_sql

__all__ = ["AlarmStore", "to_epoch_ms"]

_KEY = "alarm"
_GET = internal_sql("SELECT value FROM _cf_METADATA WHERE key = ?")
_SET = internal_sql("INSERT OR REPLACE INTO _cf_METADATA (key, value) VALUES (?, ?)")
_DELETE = internal_sql("DELETE FROM _cf_METADATA WHERE key = ?")


def to_epoch_ms(when: Any) -> float:
    """``setAlarm``'s argument as milliseconds since the epoch (a naive datetime is UTC)."""
    if isinstance(when, _dt.datetime):
        if when.tzinfo is None:
            when = when.replace(tzinfo=_dt.UTC)
        return float(when.timestamp()) * 1000.0
    if isinstance(when, (int, float)) and not isinstance(when, bool):
        return float(when)
    raise AlarmError(
        "setAlarm() expects milliseconds since the epoch (int or float) or a datetime, "
        f'got "{type(when).__name__}"'
    )


class AlarmStore:
    """Reads and writes the alarm row and reports committed changes."""

    __slots__ = ("_clock", "_committed", "_conn", "_on_commit", "_touched", "has_alarm_handler")

    def __init__(
        self,
        conn: StorageConnection,
        clock: Clock,
        *,
        has_alarm_handler: bool,
        on_alarm_commit: Callable[[float | None], None] | None,
    ) -> None:
        self._conn = conn
        self._clock = clock
        self.has_alarm_handler = has_alarm_handler
        self._on_commit = on_alarm_commit
        self._touched = False
        self._committed = self.get()

    def get(self) -> float | None:
        """The alarm time in ms, including an uncommitted change; None if no alarm is set."""
        row = self._conn.read(_GET, (_KEY,)).fetchone()
        return None if row is None else float(clone.decode(row[0]))

    def set(self, when: Any) -> None:
        """``setAlarm(when)``: validate as workerd does, clamp the past to now, store."""
        ms = to_epoch_ms(when)
        if not math.isfinite(ms):
            raise AlarmError(f"setAlarm() requires a finite alarm time, got {ms}")
        scheduled = int(ms)  # JavaScript dates have whole milliseconds
        if scheduled <= 0:
            raise AlarmError(messages.SET_ALARM_NOT_POSITIVE)
        if not self.has_alarm_handler:
            raise AlarmError(messages.SET_ALARM_NO_HANDLER)
        # workerd moves times in the past to "now" so they fire promptly and stay unique.
        scheduled = max(scheduled, int(self._clock.now()))
        self._conn.write(_SET, (_KEY, clone.encode(float(scheduled))))
        self._touched = True

    def delete(self) -> None:
        """``deleteAlarm()``: a no-op when no alarm is set."""
        self._conn.write(_DELETE, (_KEY,))
        self._touched = True

    def after_commit(self) -> None:
        """Called once the implicit transaction committed: report a changed alarm, once."""
        if not self._touched:
            return
        self._touched = False
        current = self.get()
        if current != self._committed:
            self._committed = current
            if self._on_commit is not None:
                self._on_commit(current)

    def after_rollback(self) -> None:
        """The transaction was dropped, and any alarm change with it."""
        self._touched = False
