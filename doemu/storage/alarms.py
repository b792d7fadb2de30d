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

Whether the handler "changed the alarm" is decided from what is stored, never from an in-memory
flag, so a ``setAlarm`` inside a ``transactionSync``/``transaction`` that rolls back does not
count: the alarm changed if its row no longer holds the delivered time, or if the handler called
``setAlarm``/``deleteAlarm`` and that write survived. The latter is recorded in a second
``_cf_METADATA`` row (:data:`_TOUCHED_KEY`) written next to the alarm row, so it is undone by
exactly the savepoints and rollbacks that undo the alarm write; ``end_delivery`` removes it. A
handler that sets the very time being delivered therefore keeps an alarm at that time, which fires
again, as a handler that re-arms itself expects.

The scheduler forgets an alarm when it fires it, so from ``begin_delivery`` on the last reported
value is unknown: the first committed value the handler leaves (or the runtime writes after it) is
reported even if it equals the delivered time. While the handler runs and has not changed the
alarm, nothing is reported: the runtime settles the delivered alarm itself (consumed or retried).
"""

from __future__ import annotations

import asyncio
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
#: Present while a delivery runs iff the handler set or deleted the alarm (survives only what the
#: alarm write survives). Left behind by a crash, it is cleared when the next delivery begins.
_TOUCHED_KEY = "alarm_set_during_delivery"
_UNKNOWN = object()
_GET = internal_sql("SELECT value FROM _cf_METADATA WHERE key = ?")
_SET = internal_sql("INSERT OR REPLACE INTO _cf_METADATA (key, value) VALUES (?, ?)")
_DELETE = internal_sql("DELETE FROM _cf_METADATA WHERE key = ?")


#: workerd's text for a ``setAlarm`` argument that is neither a number nor a Date.
SET_ALARM_NOT_A_DATE = (
    "Failed to execute 'setAlarm' on 'DurableObjectStorage': parameter 1 is not of type 'date'."
)


def to_epoch_ms(when: Any) -> float:
    """``setAlarm``'s argument as milliseconds since the epoch (a naive datetime is UTC)."""
    if isinstance(when, _dt.datetime):
        if when.tzinfo is None:
            when = when.replace(tzinfo=_dt.UTC)
        return float(when.timestamp()) * 1000.0
    if isinstance(when, (int, float)) and not isinstance(when, bool):
        return float(when)
    get_time = getattr(when, "getTime", None)  # a JavaScript Date (js.Date.new(...))
    if callable(get_time):
        return float(get_time())
    raise AlarmError(SET_ALARM_NOT_A_DATE)


class AlarmStore:
    """Reads and writes the alarm row and reports committed changes."""

    __slots__ = (
        "_clock",
        "_committed",
        "_conn",
        "_delivering",
        "_on_commit",
        "_on_prepare",
        "_prepared",
        "_prepared_value",
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
        on_alarm_prepare: Callable[[float | None], asyncio.Future[None] | None] | None = None,
    ) -> None:
        self._conn = conn
        self._clock = clock
        self.has_alarm_handler = has_alarm_handler
        self._on_commit = on_alarm_commit
        self._on_prepare = on_alarm_prepare
        #: An alarm time announced by before_commit for the commit under way, and its value.
        self._prepared = False
        self._prepared_value: float | None = None
        # A hint that the alarm may have changed since the last commit (may be stale after a
        # savepoint rollback: after_commit compares values anyway).
        self._touched = False
        self._delivering: float | None = None
        # The value the runtime was last told about; _UNKNOWN once a delivery has begun.
        self._committed: object = self.stored()

    def stored(self) -> float | None:
        """The alarm row (uncommitted changes included), whatever the delivery state."""
        row = self._conn.read(_GET, (_KEY,)).fetchone()
        return None if row is None else float(clone.decode(row[0]))

    def _marked(self) -> bool:
        return self._conn.read(_GET, (_TOUCHED_KEY,)).fetchone() is not None

    def _delivery_touched(self, scheduled: float) -> bool:
        """Whether the running handler changed the alarm, by what is stored now."""
        return self.stored() != scheduled or self._marked()

    def get(self) -> float | None:
        """``getAlarm()``: the alarm time in ms, or None (also while it is being delivered)."""
        scheduled = self._delivering
        if scheduled is not None and not self._delivery_touched(scheduled):
            return None
        return self.stored()

    def _changed(self) -> None:
        self._touched = True
        if self._delivering is not None:
            self._conn.write(_SET, (_TOUCHED_KEY, clone.encode(True)))

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
        """The alarm handler for the alarm due at ``scheduled`` starts.

        The scheduler has dropped the alarm, so whatever alarm is committed from now on is
        reported, even the delivered time itself.
        """
        if self._marked():  # left over by a crash during an earlier delivery
            self._conn.write(_DELETE, (_TOUCHED_KEY,))
        self._delivering = scheduled
        self._committed = _UNKNOWN

    def end_delivery(self, *, success: bool) -> bool:
        """The handler finished; True if it set or deleted the alarm itself.

        "Itself" means by a write that is still there: a ``setAlarm`` rolled back with its
        transaction does not count, and a ``setAlarm`` of the delivered time does (the alarm then
        fires again at that time). After a success that left the alarm alone, the delivered alarm
        is deleted (inside the implicit transaction: the caller commits). After a failure it is
        left for the retry.
        """
        scheduled = self._delivering
        self._delivering = None
        if scheduled is None:
            return False
        touched = self._delivery_touched(scheduled)
        if self._marked():
            self._conn.write(_DELETE, (_TOUCHED_KEY,))
        if success and not touched:
            self._conn.write(_DELETE, (_KEY,))
        # Whatever is stored now is reported at the next commit (the scheduler forgot it).
        self._touched = True
        return touched

    def before_commit(self) -> asyncio.Future[None] | None:
        """Called just before the implicit transaction commits: announce a new alarm time.

        Only a time is announced (a deletion is reported after the commit): the runtime's table
        then holds the alarm before the object's file does, so a crash between the two writes
        leaves at worst a table row for an alarm the object lacks, which fires once, finds
        nothing and is dropped, never an alarm that only a request to the object would find.
        Returns what the commit must wait for first (the table's fsync, at power-loss
        durability), or None.
        """
        if not self._touched or self._on_prepare is None:
            return None
        scheduled = self._delivering
        if scheduled is not None and not self._delivery_touched(scheduled):
            return None  # still the alarm being delivered: nothing new to announce
        current = self.stored()
        if current is None or current == self._committed:
            return None
        if self._prepared and current == self._prepared_value:
            return None  # announced already (the commit waited for it and runs now)
        self._prepared = True
        self._prepared_value = current
        return self._on_prepare(current)

    def after_commit(self) -> None:
        """Called once the implicit transaction committed: report a changed alarm, once."""
        self._prepared = False
        self._prepared_value = None
        if not self._touched:
            return
        scheduled = self._delivering
        if scheduled is not None and not self._delivery_touched(scheduled):
            # Still the alarm being delivered: end_delivery settles it. Keep the hint so the
            # outcome is reported by the commit that follows the delivery.
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
        if self._prepared:  # announced, then not committed: put the table back
            self._prepared = False
            self._prepared_value = None
            committed = self._committed
            if committed is _UNKNOWN and self._delivering is not None:
                committed = self._delivering  # during a delivery the table holds its time
            if self._on_prepare is not None and committed is not _UNKNOWN:
                self._on_prepare(committed if isinstance(committed, float) else None)
