"""The contract between the :class:`~agents.agent.Agent` façade and the features it owns.

An Agent is composed of feature objects (state, connections, schedules, queue, keep-alive,
fibers, RPC), and no feature imports ``agents.agent``. Each feature is built with:

* a :class:`Core`, the plumbing all features share: SQL, the clock, ``waitUntil``, error
  reporting and the object's single alarm. The Agent builds one :class:`AgentCore` per instance.
* the agent itself, typed as a protocol naming only what that feature may call:
  :class:`AgentHost` (name, options, ``sql``, ``on_error``), or the feature's extension of it
  listing the user hooks it runs (``StateHooks``, ``ConnectionHooks``, ``FiberHooks``, next to
  the code that calls them). Users override hooks on their Agent subclass; features reach them
  only this way.

Why the plumbing is a separate object and not more methods on the Agent: every public method of
a Durable Object is callable over RPC by any other object holding a stub, so ``exec`` or
``schedule_next_alarm`` must not become public names of every agent.

**One alarm for everything.** A Durable Object has a single alarm. The features that need it
are registered with the core as :class:`WakeupSource` objects;
:meth:`AgentCore.schedule_next_alarm` sets the alarm to the earliest of their wake-ups (never in
the past) or deletes it when none has one. It is synchronous on purpose: storage calls take
effect when made (on Cloudflare too, where the returned promise runs without being awaited), so
``keep_alive()`` can re-arm in place.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any, Protocol

from js import Date

from ..options import AgentOptions
from .portable import settle_in_background, wait_until
from .sql import execute

__all__ = ["AgentCore", "AgentHost", "Core", "WakeupSource"]

_log = logging.getLogger("agents.agent")


class AgentHost(Protocol):
    """The agent as every feature sees it: identity, options, ``sql`` and the error hook."""

    @property
    def name(self) -> str: ...

    @property
    def options(self) -> AgentOptions: ...

    def sql(self, query: str, *params: Any) -> list[dict[str, Any]]: ...

    def on_error(self, error: BaseException, context: Any = None) -> Any: ...

    def _emit(self, event_type: str, payload: dict[str, Any] | None = None) -> None: ...


class WakeupSource(Protocol):
    """A feature with work on the alarm: when does it next need the object awake?"""

    def next_wakeup(self, now: float) -> float | None:
        """The earliest time (ms since the epoch) this feature needs the alarm, or None."""
        ...


class Core(Protocol):
    """What every feature is given besides the agent: storage, clock, errors and the alarm."""

    @property
    def ctx(self) -> Any:
        """The Durable Object's ``ctx`` (sockets, storage)."""
        ...

    @property
    def started(self) -> bool:
        """Whether this activation finished ``on_start`` (before that, ``_start`` re-arms)."""
        ...

    def sql(self, query: str, *params: Any) -> list[dict[str, Any]]:
        """Rows as dicts, through the agent's own ``sql`` (an override sees these reads too)."""
        ...

    def exec(self, query: str, *params: Any) -> None:
        """A write whose rows nobody reads, in the current turn's transaction."""
        ...

    def now(self) -> float:
        """``Date.now()``: ms since the epoch, the clock every feature uses."""
        ...

    def wait_until(self, task: asyncio.Future[Any]) -> None:
        """Keep the object alive for background ``task`` (``ctx.waitUntil``)."""
        ...

    async def report(self, error: BaseException, context: Any) -> None:
        """Hand a failure to the agent's ``on_error``; an ``on_error`` that raises is logged."""
        ...

    def schedule_next_alarm(self) -> None:
        """Set the alarm to the earliest wake-up now, or delete it when nothing is pending."""
        ...

    def emit(self, event_type: str, payload: dict[str, Any] | None = None) -> None:
        """An observability event of the agent's (``fiber:run:started``…; see
        :mod:`agents.observability`)."""
        ...

    def schedule_next_alarm_soon(self) -> None:
        """:meth:`schedule_next_alarm` once the agent has started (before that, ``_start`` does)."""
        ...


class AgentCore:
    """The :class:`Core` an Agent gives its features (see the module docstring)."""

    __slots__ = ("_ctx", "_host", "_sources", "started")

    def __init__(self, ctx: Any, host: AgentHost) -> None:
        self._ctx = ctx
        self._host = host
        self._sources: tuple[WakeupSource, ...] = ()
        self.started = False

    @property
    def ctx(self) -> Any:
        return self._ctx

    def sql(self, query: str, *params: Any) -> list[dict[str, Any]]:
        return self._host.sql(query, *params)

    def exec(self, query: str, *params: Any) -> None:
        execute(self._ctx.storage.sql, query, *params)

    def now(self) -> float:
        return float(Date.now())

    def wait_until(self, task: asyncio.Future[Any]) -> None:
        wait_until(self._ctx, task)

    def emit(self, event_type: str, payload: dict[str, Any] | None = None) -> None:
        self._host._emit(event_type, payload)

    async def report(self, error: BaseException, context: Any) -> None:
        """As the SDK does: a broken error hook must not stop the queue, schedules or sockets."""
        try:
            result = self._host.on_error(error, context)
            if inspect.isawaitable(result):
                await result
        except Exception:
            _log.exception("agent %s: on_error raised while reporting %r", self._host.name, error)

    # -- the single alarm ---------------------------------------------------------------------
    def add_wakeup_sources(self, *sources: WakeupSource) -> None:
        """Register the features whose wake-ups share the object's single alarm."""
        self._sources += sources

    def next_wakeup(self, now: float) -> float | None:
        """The earliest of the features' wake-ups, or None when none needs the alarm."""
        wakeups = [w for w in (s.next_wakeup(now) for s in self._sources) if w is not None]
        return min(wakeups) if wakeups else None

    def schedule_next_alarm(self) -> None:
        now = self.now()
        wakeup = self.next_wakeup(now)
        storage = self._ctx.storage
        if wakeup is not None:
            settle_in_background(storage.setAlarm(max(wakeup, now)), "setAlarm")
        else:
            settle_in_background(storage.deleteAlarm(), "deleteAlarm")

    def schedule_next_alarm_soon(self) -> None:
        if self.started:
            self.schedule_next_alarm()
