"""Schedules: ``schedule``, ``schedule_every``, ``cancel_schedule``, ``get_schedule(s)``.

* ``scheduler`` — the feature: rows in ``cf_agents_schedules``, run from the agent's alarm.
* ``types`` — what a schedule is: the ``Schedule`` record, its row mapping, parsing ``when``.
* ``cron`` — five-field cron expressions, evaluated in UTC.
"""

from __future__ import annotations

__all__: list[str] = []
