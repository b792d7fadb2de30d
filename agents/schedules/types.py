"""What a schedule *is*: the ``Schedule`` record, its row mapping, and parsing of ``when``.

Kept apart from :mod:`agents.schedules.scheduler` (which runs schedules on the alarm) so the data
model — the SDK's ``Schedule`` shape, its units (Unix seconds) and the rules for turning ``when``
into a row — reads on its own.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, cast

from ..errors import ScheduleError
from ..retry import retry_options_from_json, retry_options_to_json
from .cron import is_valid_cron, next_cron_time_s

__all__ = [
    "ONE_SHOT_TYPES",
    "SCHEDULE_TYPES",
    "Schedule",
    "ScheduleType",
    "Timing",
    "epoch_seconds",
    "interval_seconds_of",
    "row_to_schedule",
    "timing_for",
]

ScheduleType = Literal["scheduled", "delayed", "cron", "interval"]
SCHEDULE_TYPES: frozenset[str] = frozenset({"scheduled", "delayed", "cron", "interval"})
ONE_SHOT_TYPES: frozenset[str] = frozenset({"scheduled", "delayed"})


@dataclass(frozen=True)
class Schedule:
    """One ``cf_agents_schedules`` row as the SDK's ``Schedule`` (``to_dict()`` is its JSON)."""

    id: str
    callback: str
    payload: Any
    type: ScheduleType
    #: Next run, Unix seconds.
    time: int
    delay_in_seconds: float | None = None
    cron: str | None = None
    interval_seconds: float | None = None
    #: The retry fields given for this schedule (snake_case), or None for the agent's defaults.
    retry: Mapping[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The SDK's JSON shape: ``delayInSeconds`` / ``cron`` / ``intervalSeconds`` by type."""
        out: dict[str, Any] = {
            "id": self.id,
            "callback": self.callback,
            "payload": self.payload,
            "type": self.type,
            "time": self.time,
        }
        if self.type == "delayed":
            out["delayInSeconds"] = self.delay_in_seconds
        elif self.type == "cron":
            out["cron"] = self.cron
        elif self.type == "interval":
            out["intervalSeconds"] = self.interval_seconds
        if self.retry:
            out["retry"] = retry_options_to_json(self.retry)
        return out


def row_to_schedule(row: Mapping[str, Any]) -> Schedule:
    """Raises ``ValueError`` when the stored payload is not JSON."""
    raw = row.get("payload")
    payload = json.loads(raw) if raw is not None else None
    retry_raw = row.get("retry_options")
    retry_fields = None
    if isinstance(retry_raw, str):
        try:
            retry_fields = retry_options_from_json(json.loads(retry_raw))
        except ValueError:
            retry_fields = None
    kind = cast(ScheduleType, row["type"])
    return Schedule(
        id=str(row["id"]),
        callback=str(row["callback"]),
        payload=payload,
        type=kind,
        time=int(row["time"] or 0),
        delay_in_seconds=(row.get("delayInSeconds") or 0) if kind == "delayed" else None,
        cron=(row.get("cron") or "") if kind == "cron" else None,
        interval_seconds=(row.get("intervalSeconds") or 0) if kind == "interval" else None,
        retry=retry_fields,
    )


@dataclass(frozen=True)
class Timing:
    type: ScheduleType
    time: int
    delay_in_seconds: float | None = None
    cron: str | None = None
    interval_seconds: int | None = None


def _finite_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def timing_for(when: object, now_ms: float, callback: str) -> Timing:
    if isinstance(when, datetime):
        moment = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
        return Timing("scheduled", math.floor(moment.timestamp()))
    if isinstance(when, timedelta):
        when = when.total_seconds()
    if _finite_number(when):
        delay = cast(float, when)
        return Timing("delayed", math.floor(now_ms / 1000 + delay), delay_in_seconds=delay)
    if isinstance(when, str):
        if not is_valid_cron(when):
            raise ScheduleError(
                f"invalid cron expression {when!r} for {callback!r}: "
                "expected five fields (minute hour day-of-month month day-of-week)"
            )
        return Timing("cron", next_cron_time_s(when, now_ms), cron=when)
    raise ScheduleError(
        f"invalid schedule time {when!r} ({type(when).__name__}) for {callback!r}: expected "
        "seconds (int/float), a datetime, a timedelta or a five-field cron string"
    )


def interval_seconds_of(value: object) -> int:
    if not _finite_number(value) or cast(float, value) <= 0 or cast(float, value) % 1:
        raise ScheduleError(
            f"interval_seconds must be a positive whole number of seconds, got {value!r}"
        )
    return int(cast(float, value))


def epoch_seconds(value: object, label: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return math.floor(moment.timestamp())
    raise ScheduleError(f"time_range {label} must be a datetime or None, got {value!r}")
