"""Schedules: ``schedule``, ``schedule_every``, ``cancel_schedule``, ``get_schedule(s)``.

Rows live in the SDK's own ``cf_agents_schedules`` table with its columns and units (``time`` in
Unix **seconds**), so an agent's data reads the same to the TypeScript SDK. A schedule is one of:

* ``delayed``   — ``schedule(30, "cb")``: once, ``delayInSeconds`` after now;
* ``scheduled`` — ``schedule(datetime(...), "cb")``: once, at that moment (naive means UTC);
* ``cron``      — ``schedule("*/5 * * * *", "cb")``: at each match of a five-field UTC cron;
* ``interval``  — ``schedule_every(60, "cb")``: every ``intervalSeconds`` after each run.

Behaviour, as the SDK's ``Scheduler``:

* The callback is a *method name* (a function cannot be persisted); it is called as
  ``method(payload, schedule)`` — fewer parameters are fine — and retried with the row's
  ``retry_options`` (default: the agent's ``options.retry``) using :func:`agents.retry.retry`.
* Cron and interval schedules are idempotent by default (the same callback, payload and
  cron/interval returns the existing row); one-shots only with ``idempotent=True``. Every
  idempotent hit re-arms the alarm, so an overdue row whose alarm was lost fires at once.
* Due rows run in time order from the agent's single alarm. One-shots are deleted after they ran
  — even when every attempt failed, in which case the error reaches ``on_error(error, schedule)``;
  cron rows move to the next match, interval rows to ``now + interval``. A failing cron/interval
  callback is reported and stays scheduled.
* An interval row is marked ``running`` (with ``execution_started_at``) while it executes, so a
  slow run is not started twice; one still ``running`` after ``hung_schedule_timeout_seconds``
  (its process died mid-run) is reset and run again.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, ClassVar

from ..core.callbacks import callback_name, find_callback, new_id, to_json
from ..core.host import AgentHost, Core
from ..errors import RetryOptionsError, ScheduleError
from ..retry import (
    RetrySpec,
    resolve_retry_options,
    retry_options_from_json,
    retry_options_to_json,
    run_callback,
)
from .cron import next_cron_time_s
from .types import (
    ONE_SHOT_TYPES,
    SCHEDULE_TYPES,
    Schedule,
    Timing,
    epoch_seconds,
    interval_seconds_of,
    row_to_schedule,
    timing_for,
)

__all__ = ["SCHEMA", "Scheduler"]

_log = logging.getLogger("agents.schedules")

#: The SDK's DDL, column for column (``owner_path*`` serve its sub-agents; always NULL here).
SCHEMA: tuple[str, ...] = (
    """
    CREATE TABLE IF NOT EXISTS cf_agents_schedules (
      id TEXT PRIMARY KEY NOT NULL DEFAULT (randomblob(9)),
      callback TEXT,
      payload TEXT,
      type TEXT NOT NULL CHECK(type IN ('scheduled', 'delayed', 'cron', 'interval')),
      time INTEGER,
      delayInSeconds INTEGER,
      cron TEXT,
      intervalSeconds INTEGER,
      running INTEGER DEFAULT 0,
      created_at INTEGER DEFAULT (unixepoch()),
      execution_started_at INTEGER,
      retry_options TEXT,
      owner_path TEXT,
      owner_path_key TEXT
    )
    """,
)


class Scheduler:
    """Persistent schedules on the agent's single alarm (every fact lives in the table)."""

    __slots__ = ("_core", "_host")
    #: The tables this feature owns (the Agent ensures them at every activation).
    SCHEMA: ClassVar[tuple[str, ...]] = SCHEMA

    def __init__(self, core: Core, host: AgentHost) -> None:
        self._core = core
        self._host = host

    # -- creating ----------------------------------------------------------------------------------
    async def schedule(
        self,
        when: datetime | timedelta | float | str,
        callback: str | Callable[..., Any],
        payload: Any = None,
        *,
        retry: RetrySpec | None = None,
        idempotent: bool | None = None,
    ) -> Schedule:
        """Run ``callback`` once after ``when`` seconds / at a datetime, or on a cron string."""
        name = self._checked_callback(callback)
        timing = timing_for(when, self._core.now(), name)
        if timing.type in ONE_SHOT_TYPES and idempotent is None and not self._core.started:
            _log.warning(
                "schedule(%r) during startup without idempotent=True adds a row on every "
                "activation; pass idempotent=True or use schedule_every()",
                name,
            )
        return self._insert(timing, name, payload, retry, idempotent)

    async def schedule_every(
        self,
        interval_seconds: float,
        callback: str | Callable[..., Any],
        payload: Any = None,
        *,
        retry: RetrySpec | None = None,
        idempotent: bool | None = None,
    ) -> Schedule:
        """Run ``callback`` every ``interval_seconds`` (first run one interval from now)."""
        seconds = interval_seconds_of(interval_seconds)
        name = self._checked_callback(callback)
        now_s = self._core.now() / 1000
        timing = Timing("interval", math.floor(now_s + seconds), interval_seconds=seconds)
        return self._insert(timing, name, payload, retry, idempotent)

    def _checked_callback(self, callback: str | Callable[..., Any]) -> str:
        name = callback_name(self._host, callback)
        if name is None:
            shown = callback if isinstance(callback, str) else getattr(callback, "__name__", "?")
            raise ScheduleError(
                f"schedule callback {shown!r} is not a method of {type(self._host).__name__}"
            )
        return name

    def _insert(
        self,
        timing: Timing,
        callback: str,
        payload: Any,
        retry_spec: RetrySpec | None,
        idempotent: bool | None,
    ) -> Schedule:
        core = self._core
        try:
            payload_json = to_json(payload)
        except (TypeError, ValueError) as exc:
            raise ScheduleError(f"schedule payload is not JSON-serializable: {exc}") from exc
        try:
            resolve_retry_options(retry_spec, self._host.options.retry)
            retry_json = retry_options_to_json(retry_spec)
        except RetryOptionsError as exc:
            raise ScheduleError(str(exc)) from exc
        recurring = timing.type in ("cron", "interval")
        dedupe = idempotent is not False if recurring else bool(idempotent)
        if dedupe:
            existing = self._find_matching_row(timing, callback, payload_json)
            if existing is not None:
                core.schedule_next_alarm_soon()
                return row_to_schedule(existing)
        schedule_id = new_id()
        core.sql(
            "INSERT INTO cf_agents_schedules (id, callback, payload, type, time, delayInSeconds, "
            "cron, intervalSeconds, running, created_at, retry_options) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
            schedule_id,
            callback,
            payload_json,
            timing.type,
            timing.time,
            timing.delay_in_seconds,
            timing.cron,
            timing.interval_seconds,
            math.floor(core.now() / 1000),
            to_json(retry_json) if retry_json else None,
        )
        core.schedule_next_alarm_soon()
        core.emit("schedule:create", {"callback": callback, "id": schedule_id})
        return Schedule(
            id=schedule_id,
            callback=callback,
            payload=json.loads(payload_json),
            type=timing.type,
            time=timing.time,
            delay_in_seconds=timing.delay_in_seconds,
            cron=timing.cron,
            interval_seconds=timing.interval_seconds,
            retry=retry_options_from_json(retry_json),
        )

    def _find_matching_row(
        self, timing: Timing, callback: str, payload_json: str
    ) -> dict[str, Any] | None:
        query = (
            "SELECT * FROM cf_agents_schedules WHERE type = ? AND callback = ? "
            "AND payload IS ? AND owner_path_key IS NULL"
        )
        params: list[Any] = [timing.type, callback, payload_json]
        if timing.type == "cron":
            query += " AND cron = ?"
            params.append(timing.cron)
        elif timing.type == "interval":
            query += " AND intervalSeconds = ?"
            params.append(timing.interval_seconds)
        rows = self._core.sql(query + " ORDER BY time ASC LIMIT 1", *params)
        return rows[0] if rows else None

    # -- reading and cancelling --------------------------------------------------------------------
    def get_schedule(self, id: str) -> Schedule | None:
        """The schedule with this id, or None."""
        rows = self._core.sql("SELECT * FROM cf_agents_schedules WHERE id = ?", id)
        return _readable(rows[0]) if rows else None

    def get_schedules(
        self,
        criteria: Mapping[str, Any] | None = None,
        *,
        id: str | None = None,
        type: str | None = None,
        time_range: Mapping[str, Any] | tuple[Any, Any] | None = None,
    ) -> list[Schedule]:
        """Schedules matching every given filter, in time order.

        ``criteria`` is the SDK's shape ``{"id", "type", "timeRange": {"start", "end"}}``; the
        keyword arguments are the same filters. ``start``/``end`` are datetimes (either may be
        None) and bound ``time`` inclusively.
        """
        crit = dict(criteria or {})
        id = id if id is not None else crit.get("id")
        type = type if type is not None else crit.get("type")
        if time_range is None:
            time_range = crit.get("timeRange", crit.get("time_range"))
        query = "SELECT * FROM cf_agents_schedules WHERE owner_path_key IS NULL"
        params: list[Any] = []
        if id:
            query += " AND id = ?"
            params.append(id)
        if type:
            if type not in SCHEDULE_TYPES:
                raise ScheduleError(f"unknown schedule type {type!r}")
            query += " AND type = ?"
            params.append(type)
        if time_range is not None:
            if isinstance(time_range, Mapping):
                start, end = time_range.get("start"), time_range.get("end")
            else:
                start, end = time_range
            start_s = epoch_seconds(start, "start")
            end_s = epoch_seconds(end, "end")
            if start_s is not None:
                query += " AND time >= ?"
                params.append(start_s)
            if end_s is not None:  # no huge "no bound" number: it would be a BigInt on Cloudflare
                query += " AND time <= ?"
                params.append(end_s)
        rows = self._core.sql(query + " ORDER BY time ASC, rowid ASC", *params)
        return [s for s in (_readable(r) for r in rows) if s is not None]

    async def cancel_schedule(self, id: str) -> bool:
        """Delete the schedule; False when there was none. The alarm is recomputed."""
        core = self._core
        if not core.sql("SELECT id FROM cf_agents_schedules WHERE id = ?", id):
            return False
        core.sql("DELETE FROM cf_agents_schedules WHERE id = ?", id)
        core.schedule_next_alarm_soon()
        core.emit("schedule:cancel", {"id": id})
        return True

    # -- the alarm's share ------------------------------------------------------------------------
    def _hung_cutoff_s(self, now_ms: float) -> int:
        return math.floor(now_ms / 1000) - self._host.options.hung_schedule_timeout_seconds

    def next_wakeup(self, now: float) -> float | None:
        """Earliest wake-up for schedules (ms): a ready row, or a running interval turning hung.

        A running interval that is not hung yet is not "ready" (it would be skipped), but the
        moment it would count as hung is a wake-up, so a run lost to a crash is retried.
        """
        sql = self._core.sql
        cutoff = self._hung_cutoff_s(now)
        ready = sql(
            "SELECT MIN(time) AS t FROM cf_agents_schedules WHERE type != 'interval' "
            "OR running = 0 OR running IS NULL OR coalesce(execution_started_at, 0) <= ?",
            cutoff,
        )
        running = sql(
            "SELECT MIN(execution_started_at) AS t FROM cf_agents_schedules "
            "WHERE type = 'interval' AND running = 1 AND coalesce(execution_started_at, 0) > ?",
            cutoff,
        )
        candidates: list[float] = []
        if ready and ready[0]["t"] is not None:
            candidates.append(float(ready[0]["t"]) * 1000)
        if running and running[0]["t"] is not None:
            timeout = self._host.options.hung_schedule_timeout_seconds
            candidates.append((float(running[0]["t"]) + timeout) * 1000)
        return min(candidates) if candidates else None

    async def run_due(self, now: float) -> None:
        """Execute every row due at ``now`` (ms), in time order, then advance or delete it."""
        sql = self._core.sql
        timeout = self._host.options.hung_schedule_timeout_seconds
        now_s = math.floor(now / 1000)
        due = sql(
            "SELECT id FROM cf_agents_schedules WHERE time <= ? ORDER BY time ASC, rowid ASC",
            now_s,
        )
        for entry in due:
            rows = sql("SELECT * FROM cf_agents_schedules WHERE id = ?", entry["id"])
            if not rows or rows[0]["time"] is None or rows[0]["time"] > now_s:
                continue  # cancelled or moved by an earlier callback
            row = rows[0]
            if row["type"] == "interval" and row.get("running") == 1:
                elapsed = now_s - int(row.get("execution_started_at") or 0)
                if elapsed < timeout:
                    _log.warning("interval schedule %s is still running; skipped", row["id"])
                    continue
                _log.warning(
                    "interval schedule %s looks hung (started %ss ago); running it again",
                    row["id"],
                    elapsed,
                )
            if row["type"] == "interval":
                sql(
                    "UPDATE cf_agents_schedules SET running = 1, execution_started_at = ? "
                    "WHERE id = ?",
                    now_s,
                    row["id"],
                )
            await self._execute(row)
            self._advance(row)

    async def _execute(self, row: Mapping[str, Any]) -> None:
        """Run one row's callback with retries; a final failure goes to ``on_error``."""
        core, host = self._core, self._host
        try:
            schedule = row_to_schedule(row)
        except ValueError as exc:
            await core.report(
                ScheduleError(f"schedule {row['id']} has a corrupt payload: {exc}"), row
            )
            return
        method = find_callback(host, schedule.callback)
        if method is None:
            await core.report(
                ScheduleError(
                    f"schedule {schedule.id}: callback {schedule.callback!r} is not a method of "
                    f"{type(host).__name__}"
                ),
                schedule,
            )
            return
        core.emit("schedule:execute", {"callback": schedule.callback, "id": schedule.id})
        await run_callback(
            core,
            host,
            method,
            schedule,
            schedule.payload,
            schedule.retry,
            label=f"schedule {schedule.id} ({schedule.callback})",
        )

    def _advance(self, row: Mapping[str, Any]) -> None:
        """Cron → next match; interval → now + interval, no longer running; one-shot → deleted."""
        sql = self._core.sql
        now_ms = self._core.now()
        if row["type"] == "cron":
            try:
                nxt = next_cron_time_s(str(row["cron"]), now_ms)
            except Exception as exc:  # a stored expression croniter no longer accepts
                _log.error("schedule %s: bad cron %r (%s); deleted", row["id"], row["cron"], exc)
                sql("DELETE FROM cf_agents_schedules WHERE id = ?", row["id"])
                return
            sql("UPDATE cf_agents_schedules SET time = ? WHERE id = ?", nxt, row["id"])
        elif row["type"] == "interval":
            nxt = math.floor(now_ms / 1000) + int(row.get("intervalSeconds") or 0)
            sql(
                "UPDATE cf_agents_schedules SET running = 0, time = ? WHERE id = ?",
                nxt,
                row["id"],
            )
        else:
            sql("DELETE FROM cf_agents_schedules WHERE id = ?", row["id"])


def _readable(row: Mapping[str, Any]) -> Schedule | None:
    try:
        return row_to_schedule(row)
    except ValueError:
        _log.error("schedule %s has a corrupt payload; skipped", row.get("id"))
        return None
