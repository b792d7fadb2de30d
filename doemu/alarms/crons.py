"""Cron triggers on the doemu clock: one timer for the Worker's ``[triggers] crons``.

Beside the alarm scheduler and like it, the cron schedule arms a single clock timer for the
earliest next run of any trigger; when it fires, every trigger due at that moment is handed to
``fire(cron, scheduled_ms)`` (which starts the Worker's ``scheduled()`` handler) and the timer is
armed again for the next one. Runs are never replayed: at start-up, and after a timer that fired
late (a blocked loop, a stopped process), the next run is the first one after *now*, as on
Cloudflare, where a Worker that was not running when a trigger came due does not get it later.
With a manual clock, a long ``advance`` passes through every run on the way, in order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ..clock import Clock, TimerHandle
from ..config.crons import CronExpression

__all__ = ["CronSchedule"]

_log = logging.getLogger("doemu.crons")


class CronSchedule:
    """The next run of every trigger, and one timer for the earliest (see the module docstring)."""

    def __init__(
        self, clock: Clock, crons: Sequence[str], fire: Callable[[str, float], None]
    ) -> None:
        self._clock = clock
        self._fire = fire
        self.expressions = [CronExpression(cron) for cron in dict.fromkeys(crons)]
        self._next: dict[str, float] = {}
        self._timer: TimerHandle | None = None
        self.running = False

    def start(self) -> None:
        """Schedule every trigger's first run after now (idempotent)."""
        if self.running or not self.expressions:
            return
        self.running = True
        now = self._clock.now()
        self._next = {e.text: e.next_after(now) for e in self.expressions}
        self._arm()

    def stop(self) -> None:
        self.running = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def next_runs(self) -> dict[str, float]:
        """Each trigger's next scheduled time (epoch ms); empty before :meth:`start`."""
        return dict(self._next)

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if not self.running or not self._next:
            self._timer = None
            return
        self._timer = self._clock.call_at(min(self._next.values()), self._due)

    def _due(self) -> None:
        self._timer = None
        if not self.running:
            return
        now = self._clock.now()
        by_text = {e.text: e for e in self.expressions}
        for cron, when in sorted(self._next.items(), key=lambda item: item[1]):
            if when > now:
                continue
            try:
                self._fire(cron, when)
            except Exception:  # the handler runs in its own task; this is only its start
                _log.exception("cron %r could not be started", cron)
            # Never replay: from the run just due, or from now if the timer fired late.
            self._next[cron] = by_text[cron].next_after(max(when, now))
        self._arm()
