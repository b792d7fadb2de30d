"""Cron triggers: ``scheduled(controller, env, ctx)`` on the entry Worker at the crons' times.

:class:`~doemu.alarms.crons.CronSchedule` says when; :class:`CronService` runs the Worker's
``Default(ctx, env).scheduled(controller, env, ctx)`` then, in a task of its own that the runtime
keeps (so a manual clock's ``advance`` runs it to its end), and records the outcome: the last
100 runs, as Cloudflare's *Cron Events* keeps them. The same call runs on demand from
``GET /__scheduled?cron=…`` (``wrangler dev --test-scheduled``'s route), the admin API and the
test harness.

What the handler receives is what workerd-Python hands a ``WorkerEntrypoint`` (checked on it):
``controller`` has ``cron``, ``scheduledTime`` (epoch ms, an ``int``) and ``noRetry()``; ``env``
and ``ctx`` arrive as ``None`` there, because a class entrypoint has them as ``self.env`` and
``self.ctx``, so doemu passes ``None`` too (the real ones with ``--lenient``), and code that uses
the parameters fails here as it would once deployed. A handler that raises is logged and
recorded; it is not retried (Cloudflare does not retry cron events).
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
import traceback
from collections.abc import Sequence
from typing import Any

from ..alarms.crons import CronSchedule
from ..clock import Clock
from ..compat import call_relaxed
from ..jsboundary import is_strict
from .entry import EntryHost, ExecutionContext

__all__ = ["CronService", "NoScheduledHandler", "ScheduledController"]

_log = logging.getLogger("doemu.crons")

#: Runs kept for inspection (Cloudflare's Cron Events keeps the 100 most recent).
HISTORY = 100


class NoScheduledHandler(LookupError):
    """The Worker has no ``Default`` entrypoint with a ``scheduled`` method."""


class ScheduledController:
    """The controller a ``scheduled`` handler receives: ``cron``, ``scheduledTime``,
    ``noRetry()``."""

    __slots__ = ("_no_retry", "cron", "scheduledTime")

    def __init__(self, cron: str, scheduled_time: int) -> None:
        self.cron = cron
        self.scheduledTime = scheduled_time
        self._no_retry = False

    def noRetry(self) -> None:
        """Ask the runtime not to retry this event (cron events are not retried anyway)."""
        self._no_retry = True

    def __repr__(self) -> str:
        return f"ScheduledController(cron={self.cron!r}, scheduledTime={self.scheduledTime})"


class CronService:
    """The Worker's cron triggers, run on the doemu clock (see the module docstring)."""

    def __init__(
        self, host: EntryHost, clock: Clock, crons: Sequence[str], entry: type | None
    ) -> None:
        self._host = host
        self._clock = clock
        self.crons = list(dict.fromkeys(crons))
        self.entry = entry
        self.schedule = CronSchedule(clock, self.crons, self._fire)
        self.history: collections.deque[dict[str, Any]] = collections.deque(maxlen=HISTORY)
        self._warned = False

    @property
    def handler_present(self) -> bool:
        return self.entry is not None and callable(getattr(self.entry, "scheduled", None))

    def start(self) -> None:
        """Arm the triggers: the first run of each is its next time after now."""
        if not self.crons:
            return
        if not self.handler_present:
            _log.warning(
                "[triggers] crons are set but the Worker has no Default.scheduled() handler; "
                "they are not scheduled"
            )
            return
        self.schedule.start()

    def stop(self) -> None:
        self.schedule.stop()

    def _fire(self, cron: str, when: float) -> None:
        self._host.track(asyncio.ensure_future(self._run_logged(cron, when)))

    async def _run_logged(self, cron: str, when: float) -> None:
        await self.run(cron, when)

    async def run(self, cron: str, scheduled_time: float | None = None) -> dict[str, Any]:
        """Run the ``scheduled`` handler now for ``cron``; returns the recorded outcome.

        Raises :class:`NoScheduledHandler` when there is no handler to run.
        """
        entry = self.entry
        if entry is None or not callable(getattr(entry, "scheduled", None)):
            raise NoScheduledHandler(
                "the Worker has no scheduled() handler: define `async def scheduled(self, "
                "controller, env, ctx)` on Default(WorkerEntrypoint) in the main module"
            )
        when = int(self._clock.now() if scheduled_time is None else scheduled_time)
        controller = ScheduledController(cron, when)
        ctx = ExecutionContext(self._host.track)
        outcome: dict[str, Any] = {"cron": cron, "scheduledTime": when, "outcome": "ok"}
        try:
            instance = entry(ctx, self._host.env)
            with self._host.entry_scope(ctx.waitUntil):
                # workerd-Python hands a class entrypoint None for both (--lenient: the real ones).
                env, context = (None, None) if is_strict() else (self._host.env, ctx)
                result = call_relaxed(instance.scheduled, controller, env, context)
                if inspect.isawaitable(result):
                    await result
        except Exception as exc:
            _log.error(
                "scheduled() raised for cron %r:\n%s",
                cron,
                "".join(traceback.format_exception(exc)),
            )
            outcome["outcome"] = "exception"
            outcome["error"] = f"{type(exc).__name__}: {exc}"
        outcome["noRetry"] = controller._no_retry
        self.history.append(outcome)
        self._host.emit("cron.fired", **outcome)
        return outcome

    def describe(self) -> dict[str, Any]:
        """The admin API's view: triggers with their next time, and the recent runs."""
        next_runs = self.schedule.next_runs()
        return {
            "handler": self.handler_present,
            "crons": [{"cron": c, "next": next_runs.get(c)} for c in self.crons],
            "history": list(self.history),
        }
