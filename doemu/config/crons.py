"""Cloudflare's cron dialect, on croniter: when a ``[triggers] crons`` expression next comes due.

Cloudflare takes five fields in UTC with Quartz-like extensions: weekdays are ``1``–``7`` with
``1`` = Sunday (or ``SUN``–``SAT``), ``L`` and ``#`` in the weekday field (``6L`` / ``friL``: the
last Friday of the month; ``6#2``: the second Friday), ``L`` and ``W`` in the day-of-month field
(``LW``: the last weekday of the month). croniter, the well-kept parser used here, numbers
weekdays from ``0`` = Sunday and spells "last Friday" ``L5``, so :class:`CronExpression`
translates the weekday field, and finds ``LW`` itself (croniter has no ``W``) by asking croniter
about one month at a time with that month's last weekday written in.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re

__all__ = ["CronExpression"]

_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_LAST = re.compile(r"^(?P<day>[1-7]|[a-z]{3})l$")
_NTH = re.compile(r"^(?P<day>[1-7])#(?P<n>[1-5])$")
_NUMBER = re.compile(r"(?<![#\w/])([1-7])(?![#\w])")
#: Months croniter is asked about before ``LW`` is declared impossible (it never is).
_LW_MONTHS = 48


def _weekday_field(field: str) -> str:
    """Cloudflare's weekday field in croniter's numbering (see the module docstring)."""
    field = field.lower()
    parts = []
    for part in field.split(","):
        last = _LAST.match(part)
        if last is not None:
            day = last["day"]
            number = _DAYS.index(day) if day in _DAYS else int(day) - 1
            parts.append(f"L{number}")
            continue
        nth = _NTH.match(part)
        if nth is not None:
            parts.append(f"{int(nth['day']) - 1}#{nth['n']}")
            continue
        if "/" in part:
            head, step = part.split("/", 1)
            parts.append(_NUMBER.sub(lambda m: str(int(m.group(1)) - 1), head) + "/" + step)
        else:
            parts.append(_NUMBER.sub(lambda m: str(int(m.group(1)) - 1), part))
    return ",".join(parts)


class CronExpression:
    """One cron trigger; raises ``ValueError`` naming the problem when it is not valid."""

    __slots__ = ("_fields", "_last_weekday", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        fields = text.split()
        if len(fields) != 5:
            raise ValueError(
                f"{text!r} has {len(fields)} fields; a cron trigger has five (minute hour "
                "day-of-month month day-of-week, in UTC)"
            )
        fields[4] = _weekday_field(fields[4])
        self._last_weekday = fields[2].upper() == "LW"
        self._fields = fields
        from croniter import croniter  # imported by the first trigger, not by every start-up

        probe = self._with_day("28") if self._last_weekday else " ".join(fields)
        if not croniter.is_valid(probe):
            raise ValueError(f"{text!r} is not a valid cron expression")

    def _with_day(self, day: str) -> str:
        return " ".join([*self._fields[:2], day, *self._fields[3:]])

    def next_after(self, ms: float) -> float:
        """The first time (epoch ms) strictly after ``ms`` at which this trigger fires."""
        from croniter import croniter

        start = dt.datetime.fromtimestamp(ms / 1000.0, dt.UTC)
        if not self._last_weekday:
            return float(croniter(" ".join(self._fields), start).get_next(float)) * 1000.0
        month = start.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        for _ in range(_LW_MONTHS):
            last = calendar.monthrange(month.year, month.month)[1]
            day = dt.date(month.year, month.month, last)
            while day.weekday() >= 5:  # Saturday, Sunday
                day -= dt.timedelta(days=1)
            expression = self._with_day(str(day.day))
            found = croniter(expression, max(start, month - dt.timedelta(seconds=1))).get_next(
                dt.datetime
            )
            if (found.year, found.month) == (month.year, month.month) and found > start:
                return found.timestamp() * 1000.0
            month = (month + dt.timedelta(days=32)).replace(day=1)
        raise ValueError(f"{self.text!r} never comes due")  # pragma: no cover

    def __repr__(self) -> str:
        return f"CronExpression({self.text!r})"
