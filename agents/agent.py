"""``Agent``: a Durable Object with state, schedules, keep-alive, durable fibers and a protocol.

The class is assembled from one mixin per feature (``state``, ``schedules``, ``queue``,
``keepalive``, ``fibers``, ``managed_fibers``, ``connections``, ``rpc``); this module holds only
what ties them together:

* **Activation.** The constructor runs :meth:`Agent._start` inside ``blockConcurrencyWhile``:
  the schema is ensured, the fiber-recovery scan runs, then ``on_start()``, then queued work left
  by an eviction is resumed — all before any other event is delivered.
* **One alarm for everything.** A Durable Object has a single alarm. :meth:`alarm` runs due
  schedules and housekeeping (fiber recovery), then :meth:`_schedule_next_alarm` sets the alarm
  to the earliest of the features' wake-ups (due schedules, the keep-alive heartbeat, pending
  fiber recovery) or deletes it when nothing is pending.
* ``self.sql(query, *params)``: the SDK's ``sql`` tag as a function returning ``list[dict]``.

It is a pure user of Cloudflare's Python Workers surface (``workers``, ``js``), so the same agent
runs on doemu and on Cloudflare.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from js import Date
from workers import DurableObject

from .core.connections import ConnectionsMixin
from .core.schema import ensure_schema
from .core.state import StateMixin
from .errors import SqlQueryError
from .fibers.managed import ManagedFibersMixin
from .fibers.managed_recovery import ManagedRecoveryMixin
from .fibers.runs import FibersMixin
from .keepalive import KeepAliveMixin
from .options import AgentOptions
from .queue import QueueMixin
from .rpc import RpcMixin
from .schedules.scheduler import SchedulesMixin

__all__ = ["Agent"]

_log = logging.getLogger("agents.agent")


class Agent(
    ConnectionsMixin,
    RpcMixin,
    StateMixin,
    SchedulesMixin,
    QueueMixin,
    ManagedFibersMixin,
    ManagedRecoveryMixin,
    FibersMixin,
    KeepAliveMixin,
    DurableObject,
):
    """Base class for durable agents; subclass it and override the ``on_*`` hooks."""

    options: ClassVar[AgentOptions] = AgentOptions()

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self._init_keepalive()
        self._init_state()
        self._init_schedules()
        self._init_queue()
        self._init_fibers()
        self._init_managed_fibers()
        self._init_connections()
        self._started = False
        ctx.blockConcurrencyWhile(self._start)

    # -- lifecycle ----------------------------------------------------------------------------
    async def _start(self) -> None:
        ensure_schema(self.sql, self._schema_statements())
        await self._check_run_fibers()
        await self.on_start()
        self._started = True
        await self._resume_queue()
        self._schedule_next_alarm()

    def _schema_statements(self) -> list[str]:
        from . import queue
        from .core import state
        from .fibers import managed as managed_fibers
        from .fibers import runs as fibers
        from .schedules import scheduler as schedules

        return [
            *state.SCHEMA,
            *schedules.SCHEMA,
            *queue.SCHEMA,
            *fibers.SCHEMA,
            *managed_fibers.SCHEMA,
        ]

    async def on_start(self) -> None:
        """Called once per activation, before any other event, after fiber recovery."""

    async def on_error(self, error: BaseException, context: Any = None) -> None:
        """Called when framework-run user code fails (schedules, queue, connections)."""
        _log.error("agent %s: %s (%s)", self.name, error, context, exc_info=error)

    @property
    def name(self) -> str:
        """The agent's instance name (the ``<name>`` in ``/agents/<class>/<name>``)."""
        # getattr: on Cloudflare an id without a name has the JS property undefined, which
        # Pyodide reports as AttributeError rather than None.
        name = getattr(self.ctx.id, "name", None)
        return str(name if name is not None else self.ctx.id)

    # -- SQL ----------------------------------------------------------------------------------
    def _exec(self, query: str, *params: Any) -> Any:
        return self.ctx.storage.sql.exec(query, *params)

    def sql(self, query: str, *params: Any) -> list[dict[str, Any]]:
        """Run ``query`` with ``params``; rows as plain dicts. Errors name the query.

        The one place where cursor rows become Python data (every module reads through it):
        on Cloudflare ``exec`` returns a JavaScript cursor whose rows are ``JsProxy`` objects,
        which neither ``dict(row)`` nor ``row["c"]`` handle, so the rows are taken with
        ``toArray()`` and converted with ``to_py()`` when the result has it (Pyodide); on doemu
        ``toArray()`` already gives dicts.
        """
        try:
            rows: Any = self.ctx.storage.sql.exec(query, *params).toArray()
            if hasattr(rows, "to_py"):
                rows = rows.to_py()
            return [dict(row) for row in rows]
        except Exception as exc:
            raise SqlQueryError(query, exc) from exc

    # -- the single alarm -----------------------------------------------------------------------
    async def alarm(self, alarm_info: Any = None) -> None:
        """Run everything that is due, then re-arm for the earliest pending wake-up.

        Re-armed only on success. If the framework's own work raises (an SQL error, say), the
        exception propagates so that the platform retries the alarm with back-off: re-arming
        here would replace that retry (a ``setAlarm`` in a failing handler cancels it) with an
        alarm due "now", and a persistent error would then spin in a tight loop.
        """
        now = float(Date.now())
        await self._run_due_schedules(now)
        await self._check_run_fibers()
        self._schedule_next_alarm()

    def _next_wakeups(self, now: float) -> list[float]:
        candidates = (
            self._next_schedule_ms(now),
            self._next_keepalive_ms(now),
            self._next_fiber_recovery_ms(now),
        )
        return [c for c in candidates if c is not None]

    def _schedule_next_alarm(self) -> None:
        """Set the alarm to the earliest wake-up, or delete it when nothing is pending.

        Synchronous on purpose: storage calls take effect when made (on Cloudflare too, where the
        returned promise runs without being awaited), so ``keep_alive()`` can re-arm in place.
        """
        now = float(Date.now())
        wakeups = self._next_wakeups(now)
        storage = self.ctx.storage
        if wakeups:
            storage.setAlarm(max(min(wakeups), now))
        else:
            storage.deleteAlarm()

    def _schedule_next_alarm_soon(self) -> None:
        """Recompute the alarm now if the agent has started (before that, ``_start`` does)."""
        if self._started:
            self._schedule_next_alarm()
