"""The alarm service: every decision about an object's alarm, in one place.

An alarm's life crosses three parts of doemu: the object's storage (``setAlarm`` writes a row in
the object's file, committed with the turn), the namespace's alarm table (what start-up reads)
and the scheduler (when to fire). :class:`AlarmService` is the only code that moves an alarm
between them:

* **Commit mirroring.** When a transaction that changed an alarm commits, the object's storage
  reports the new time (:meth:`AlarmService.committed`); the service writes it to the table and
  the scheduler, so neither ever learns of an alarm that is not durable.
* **Delivery and retries.** A due alarm is delivered as an event of its object (through
  :class:`AlarmTarget`, which the object host implements): the handler gets Cloudflare's
  ``alarm_info``; a handler that raises is retried after 2, 4, 8, 16, 32, 64 s (+0–25 % jitter),
  then dropped; a handler that sets or deletes the alarm itself cancels the retry. As in workerd,
  the stored alarm keeps its original time while retries are pending (``getAlarm()`` returns
  it, and every retry's ``alarm_info.scheduledTime`` is it): only the scheduler knows when the
  next attempt runs. Retry state lives here, in memory, as on Cloudflare, so after a restart
  the overdue original alarm simply fires again.
* **Run now** (:meth:`run_now`) for the admin API, the CLI and tests, and **start-up**: every
  persisted alarm is loaded (:meth:`restore`) and armed (:meth:`release`), so overdue ones fire
  with no incoming request.
* :meth:`pending` is the one answer to "which alarm is pending for this object": what the
  scheduler holds, else what start-up loaded and has not armed yet, else, while a delivery
  runs, the delivered alarm (it stays pending until its handler succeeds).
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..clock import Clock
from ..compat import call_relaxed
from ..errors import DoemuError
from ..faults import crash_point
from ..ids import DurableObjectId, is_hex_id
from ..jsboundary import JsException
from ..persist import metadata_file
from ..storage import ObjectStorage
from ..storage.durability import SyncPool, fsync_paths
from ..tracebacks import user_traceback
from .scheduler import AlarmKey, AlarmScheduler
from .table import AlarmTable

__all__ = [
    "MAX_ALARM_RETRIES",
    "AlarmInfo",
    "AlarmService",
    "AlarmTarget",
    "retry_delay_ms",
]

_log = logging.getLogger("doemu.alarms")

#: A failing alarm handler is retried at most this many times, then the alarm is dropped.
MAX_ALARM_RETRIES = 6


@dataclass(frozen=True, slots=True)
class AlarmInfo:
    """What ``alarm(alarm_info)`` receives, with Cloudflare's field names."""

    retryCount: int
    isRetry: bool
    scheduledTime: float


def retry_delay_ms(retry_count: int, rng: random.Random) -> float:
    """Back-off before retry ``retry_count + 1``: 2, 4, 8, 16, 32, 64 s plus 0–25 % jitter."""
    base = 2000.0 * float(2**retry_count)
    return base * (1.0 + 0.25 * rng.random())


class AlarmTarget(Protocol):
    """What the service needs of an object to deliver its alarm (the object host)."""

    @property
    def id(self) -> DurableObjectId: ...

    @property
    def storage(self) -> ObjectStorage | None:
        """The object's storage while it is live (the runtime's handle), else None."""

    async def call(self, kind: str, fn: Callable[[Any], Any]) -> Any:
        """Run ``fn(instance)`` as an event of the object, under its gates."""


#: Finds the object an alarm belongs to (None: its namespace is gone).
Resolve = Callable[[AlarmKey], AlarmTarget | None]
#: Emits a lifecycle event (``EventBus.emit``).
Emit = Callable[..., None]


@dataclass(frozen=True, slots=True)
class _Namespace:
    table: AlarmTable
    binding: str


@dataclass(frozen=True, slots=True)
class _Retry:
    at: float
    count: int
    scheduled: float


class AlarmService:
    """Owns the scheduler, the alarm tables and the retry state; see the module docstring."""

    def __init__(
        self,
        clock: Clock,
        rng: random.Random,
        emit: Emit,
        resolve: Resolve,
        *,
        sync_pool: SyncPool | None = None,
    ) -> None:
        self._clock = clock
        #: Power-loss durability: the pool that fsyncs new alarm times.
        self._sync_pool = sync_pool
        #: Alarm times written to a table ahead of their object's commit (see :meth:`prepared`).
        self._prepared: dict[AlarmKey, float] = {}
        self._rng = rng
        self._emit = emit
        self._resolve = resolve
        self._scheduler = AlarmScheduler(clock, self._deliver)
        self._namespaces: dict[str, _Namespace] = {}
        #: Retries in flight: when the next attempt runs, its retry count, the original time.
        self._retries: dict[AlarmKey, _Retry] = {}
        #: Alarms restore() loaded and release() has not armed yet.
        self._held: dict[AlarmKey, float] = {}

    def add_namespace(self, unique_key: str, directory: Path, binding: str) -> None:
        """Open the alarm table of a namespace (``directory`` is its persist directory)."""
        path = metadata_file(directory)
        created = self._sync_pool is not None and not path.exists()
        table = AlarmTable(path, sync_pool=self._sync_pool)
        if created:  # the new file's directory entry, before any alarm relies on it
            fsync_paths((str(path), str(directory), str(directory.parent)))
        self._namespaces[unique_key] = _Namespace(table, binding)

    # -- queries ----------------------------------------------------------------------------------
    def pending(self, key: AlarmKey) -> float | None:
        """The time of ``key``'s pending alarm, or None (see the module docstring)."""
        when = self._scheduler.get(key)
        if when is None:
            when = self._held.get(key)
        if when is None and self._scheduler.running_task(key) is not None:
            namespace = self._namespaces.get(key[0])
            when = None if namespace is None else namespace.table.get(key[1])
        return when

    def __len__(self) -> int:
        """How many alarms are pending (armed or waiting for :meth:`release`)."""
        return len(self._scheduler) + len(self._held)

    def preempting(self) -> bool:
        """Whether an event about to start should first let due alarms begin (see the scheduler)."""
        return self._scheduler.preempting()

    # -- commit mirroring --------------------------------------------------------------------------
    def prepared(
        self, key: AlarmKey, when: float | None, name: str | None
    ) -> asyncio.Future[None] | None:
        """``key``'s object is about to commit alarm time ``when``: the table holds it first.

        So a crash after the object's commit still leaves the alarm where start-up looks; a
        crash before it leaves a row the object lacks, which fires once and is dropped (see
        :meth:`_deliver`). ``None`` puts back a deletion after a failed commit. Returns what
        the object's commit must wait for: the row's fsync, at power-loss durability.
        """
        table = self._namespaces[key[0]].table
        if when is None:
            self._prepared.pop(key, None)
            table.delete(key[1])
            return None
        synced = table.set(key[1], when, name)
        self._prepared[key] = when
        crash_point("alarm-prepared")
        return synced

    def committed(self, key: AlarmKey, when: float | None, name: str | None) -> None:
        """A transaction that changed ``key``'s alarm is durable: mirror it and schedule it.

        A new time was written to the table by :meth:`prepared` before the commit; a deletion
        is mirrored here, after it.
        """
        prepared = self._prepared.pop(key, None)
        self._held.pop(key, None)  # restored, not yet armed, and changed since: this wins
        if when is not None:
            crash_point("alarm-committed")
        table = self._namespaces[key[0]].table
        if when is None:
            table.delete(key[1])
            self._scheduler.cancel(key)
            self._retries.pop(key, None)
            return
        if prepared != when:  # set by the runtime itself, or an older storage without prepare
            table.set(key[1], when, name)
        retry = self._retries.get(key)
        if retry is not None and retry.scheduled == when:
            return  # the alarm being retried, unchanged: its next attempt stays scheduled
        self._retries.pop(key, None)  # moved by the object itself: not a retry any more
        self._scheduler.set(key, when)

    # -- start-up ----------------------------------------------------------------------------------
    async def restore(self) -> int:
        """Load every persisted alarm; :meth:`release` arms them. Returns how many."""
        for unique_key, namespace in self._namespaces.items():
            for actor_id, when, _name in await namespace.table.load_all():
                if is_hex_id(actor_id):
                    self._held[(unique_key, actor_id.lower())] = when
        if self._held:
            _log.info("restored %d persisted alarm(s)", len(self._held))
        return len(self._held)

    def release(self) -> None:
        """Arm the alarms :meth:`restore` loaded (idempotent); overdue ones fire at once."""
        held, self._held = self._held, {}
        if held:
            self._scheduler.load([*held.items(), *self._scheduler.pending().items()])

    # -- delivery ----------------------------------------------------------------------------------
    async def _deliver(self, key: AlarmKey, scheduled: float) -> None:
        """Run the ``alarm`` handler of ``key``'s object for the alarm due at ``scheduled``."""
        target = self._resolve(key)
        if target is None:
            return
        retry = self._retries.get(key)
        if retry is not None and retry.at == scheduled:
            retry_count, scheduled = retry.count, retry.scheduled
        else:
            retry_count = 0
        info = AlarmInfo(retry_count, retry_count > 0, scheduled)
        outcome: dict[str, Any] = {}

        def handler(instance: Any) -> Any:
            storage = target.storage
            assert storage is not None  # the event activated the object
            stored = storage.alarm_time()
            if stored is None:
                # Deleted since it was scheduled, or a row whose object commit never happened
                # (a crash between the two writes, see prepared()): the table forgets it too.
                outcome["skipped"] = True
                self._forget(key)
                return None
            if stored > self._clock.now():
                # Moved later (or the clock stepped back): keep it scheduled, never drop it.
                outcome["skipped"] = True
                self._scheduler.set(key, stored)
                return None
            storage.begin_alarm_delivery(stored)
            outcome["storage"] = storage
            method = getattr(instance, "alarm", None)
            if method is None:
                # The SDK's wrapper forwards alarm() to the Python class (workerd's text).
                raise JsException("TypeError", "Method alarm does not exist")
            return call_relaxed(method, info)  # alarm() without alarm_info is fine too

        try:
            await target.call("alarm", handler)
        except Exception as exc:
            # A reset of the object (or an error from an object it called) is a failed delivery
            # like any other: the alarm is retried, never silently dropped.
            self._failed(key, target, info, exc, outcome.get("storage"))
            return
        if outcome.get("skipped"):
            return
        storage = target.storage
        delivered: ObjectStorage | None = outcome.get("storage")
        if storage is not None and storage is delivered:
            if not storage.end_alarm_delivery(success=True):
                storage.commit()
        self._retries.pop(key, None)
        self._emit("alarm.fired", binding=self._binding(key), id=key[1], retryCount=retry_count)

    def _failed(
        self,
        key: AlarmKey,
        target: AlarmTarget,
        info: AlarmInfo,
        exc: BaseException,
        delivered_on: ObjectStorage | None,
    ) -> None:
        storage = target.storage
        if storage is not None and storage is delivered_on:
            if storage.end_alarm_delivery(success=False):
                self._retries.pop(key, None)  # setAlarm inside the handler cancels the retry
                return
        # else: the constructor failed, or the object was reset mid-handler: retry as failed.
        binding = self._binding(key)
        who = _object_label(binding, key[1], target)
        if info.retryCount >= MAX_ALARM_RETRIES:
            _log.error(
                "alarm of %s raised %s: %s; failed after %d retries, dropped\n%s",
                who,
                type(exc).__name__,
                exc,
                info.retryCount,
                user_traceback(exc),
            )
            self._write(key, target, None)
            self._emit("alarm.dropped", binding=binding, id=key[1], error=str(exc))
            return
        # Whole milliseconds, as every stored alarm time is (the alarm table stores integers).
        now = self._clock.now()
        retry_at = float(math.ceil(now + retry_delay_ms(info.retryCount, self._rng)))
        _log.warning(
            "alarm of %s raised %s: %s; retry %d in %.1f s\n%s",
            who,
            type(exc).__name__,
            exc,
            info.retryCount + 1,
            (retry_at - now) / 1000,
            user_traceback(exc),
        )
        self._retries[key] = _Retry(retry_at, info.retryCount + 1, info.scheduledTime)
        self._scheduler.set(key, retry_at)  # the stored alarm keeps its original time
        self._emit(
            "alarm.retried",
            binding=binding,
            id=key[1],
            retryCount=info.retryCount + 1,
            retryAt=retry_at,
            error=str(exc),
        )

    def _write(self, key: AlarmKey, target: AlarmTarget, when: float | None) -> None:
        """Store the service's own decision (dropping an alarm) durably, then schedule it.

        Through the object's storage when it is live, so the object's own row and the table stay
        one fact (the commit reports back through :meth:`committed`); straight to the table when
        the object is gone (a reset, a failing constructor).
        """
        if when is None:
            self._retries.pop(key, None)
        storage = target.storage
        if storage is not None:
            try:
                storage.set_alarm_internal(when)
                storage.commit()
                return
            except DoemuError:
                _log.exception("could not store the alarm of %s; scheduling it anyway", key[1])
        table = self._namespaces[key[0]].table
        if when is None:
            table.delete(key[1])
            self._scheduler.cancel(key)
        else:
            table.set(key[1], when, target.id.name)
            self._scheduler.set(key, when)

    def _forget(self, key: AlarmKey) -> None:
        """Drop ``key``'s table row when it holds no alarm the object still has."""
        namespace = self._namespaces.get(key[0])
        if namespace is not None and key not in self._prepared:
            namespace.table.delete(key[1])

    def _binding(self, key: AlarmKey) -> str:
        namespace = self._namespaces.get(key[0])
        return namespace.binding if namespace is not None else key[0]

    async def run_now(self, key: AlarmKey) -> bool:
        """Deliver ``key``'s pending alarm now; False when it has none."""
        running = self._scheduler.running_task(key)
        if running is not None:  # never run the handler twice at once: let this one finish
            await asyncio.gather(running, return_exceptions=True)
        pending = self.pending(key)
        target = self._resolve(key)
        if pending is None or target is None:
            return False
        self._scheduler.cancel(key)
        self._held.pop(key, None)
        now = self._clock.now()
        if pending > now:
            # Bring the stored time forward so that the delivery sees a due alarm.
            def bring_forward(_instance: Any) -> None:
                storage = target.storage
                assert storage is not None
                storage.set_alarm_internal(now)

            await target.call("admin", bring_forward)
            pending = now
        await self._scheduler.start_now(key, pending)
        return True

    # -- lifecycle ---------------------------------------------------------------------------------
    def running(self) -> list[asyncio.Task[None]]:
        """Deliveries in progress."""
        return self._scheduler.running()

    async def idle(self) -> None:
        """Wait until no delivery runs (tests settle a manual clock with it)."""
        await self._scheduler.idle()

    def stop(self) -> list[asyncio.Task[None]]:
        """Stop the timer and cancel the deliveries in flight; returns them, to be awaited."""
        running = self._scheduler.running()
        self._scheduler.close()
        return running

    def close(self) -> None:
        """Close the alarm tables (after every object has committed its last writes)."""
        for namespace in self._namespaces.values():
            namespace.table.close()


def _object_label(binding: str | None, hex_id: str, target: AlarmTarget) -> str:
    """``COUNTER 'alice' (8d8d52167eba…)``: what the log names an object by."""
    name = getattr(target.id, "name", None)
    named = f" {name!r}" if name is not None else ""
    return f"{binding or '?'}{named} ({hex_id[:12]}…)"
