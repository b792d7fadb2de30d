"""Storing an object's alarm time; the scheduler that fires it lives in the runtime.

The alarm is one row of ``_cf_METADATA`` (key ``"alarm"``), written inside the turn's implicit
transaction like any other write, so ``setAlarm`` followed by a crash before the commit leaves no
alarm, and ``getAlarm`` sees the uncommitted value. The runtime's scheduler and the namespace's
alarm table must only learn of a change once it is durable: :class:`AlarmStore` reports the final
value of each committed change, once, through ``on_alarm_commit`` (not on rollback, not when the
value ends up unchanged).

While the runtime delivers an alarm (between :meth:`AlarmStore.begin_delivery` and
:meth:`AlarmStore.end_delivery`), the alarm counts as started: ``getAlarm()`` returns None unless
the handler sets a new one, as on Cloudflare. ``end_delivery`` tells the runtime whether the
handler changed the alarm (which cancels a retry) and consumes the alarm after a success.
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

    __slots__ = (
        "_clock",
        "_committed",
        "_conn",
        "_delivering",
        "_delivery_touched",
        "_on_commit",
        "_touched",
        "has_alarm_handler",
    )

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
        self._delivering: float | None = None
        self._delivery_touched = False
        self._committed = self.stored()

    def stored(self) -> float | None:
        """The alarm row (uncommitted changes included), whatever the delivery state."""
        row = self._conn.read(_GET, (_KEY,)).fetchone()
        return None if row is None else float(clone.decode(row[0]))

    def get(self) -> float | None:
        """``getAlarm()``: the alarm time in ms, or None (also while it is being delivered)."""
        if self._delivering is not None and not self._delivery_touched:
            return None
        return self.stored()

    def _changed(self) -> None:
        self._touched = True
        if self._delivering is not None:
            self._delivery_touched = True

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
        self._changed()

    def delete(self) -> None:
        """``deleteAlarm()``: a no-op when no alarm is set."""
        self._conn.write(_DELETE, (_KEY,))
        self._changed()

    def set_internal(self, when: float | None) -> None:
        """The runtime's own write (retry times, dropping, run-now): no validation, no clamping."""
        if when is None:
            self._conn.write(_DELETE, (_KEY,))
        else:
            self._conn.write(_SET, (_KEY, clone.encode(float(when))))
        self._touched = True

    def begin_delivery(self, scheduled: float) -> None:
        """The alarm handler for the alarm due at ``scheduled`` starts."""
        self._delivering = scheduled
        self._delivery_touched = False

    def end_delivery(self, *, success: bool) -> bool:
        """The handler finished; True if it set or deleted the alarm itself.

        After a success that left the alarm alone, the delivered alarm is deleted (inside the
        implicit transaction: the caller commits). After a failure it is left for the retry.
        """
        scheduled, touched = self._delivering, self._delivery_touched
        self._delivering = None
        self._delivery_touched = False
        if success and not touched and scheduled is not None and self.stored() == scheduled:
            self._conn.write(_DELETE, (_KEY,))
            self._touched = True
        return touched

    def after_commit(self) -> None:
        """Called once the implicit transaction committed: report a changed alarm, once."""
        if not self._touched:
            return
        self._touched = False
        current = self.stored()
        if current != self._committed:
            self._committed = current
            if self._on_commit is not None:
                self._on_commit(current)

    def after_rollback(self) -> None:
        """The transaction was dropped, and any alarm change with it."""
        self._touched = False
