"""The runtime: namespaces, stubs and RPC, ``env``, the clock, and start-up recovery.

One :class:`Runtime` hosts every object of one worker in one asyncio process. It owns the shared
machinery (clock, alarm scheduler, eviction manager, event bus) and one :class:`Namespace` per
Durable Object class. User code never sees these types directly: it sees ``env.BINDING`` (a
:class:`DurableObjectNamespace`) and the stubs it returns, with Cloudflare's method names.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .alarms import AlarmKey, AlarmScheduler, AlarmTable
from .clock import Clock, ManualClock, SystemClock
from .compat import js as compat_js
from .errors import DoemuError, InvalidIdError
from .events import EventBus
from .eviction import EvictionManager
from .host import ObjectHost
from .ids import DurableObjectId, IdFactory, is_hex_id
from .storage import StorageLimits
from .storage.files import ObjectFiles
from .stubs import DurableObjectNamespace

__all__ = ["ClassSpec", "Env", "Namespace", "Runtime"]

_log = logging.getLogger("doemu.runtime")

_KEY_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class ClassSpec:
    """A Durable Object class as the runtime needs it: the class and whether it has SQL."""

    cls: type
    sql: bool = True


class Env:
    """The ``env`` every object and the entry worker receive: bindings and ``[vars]``."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.__dict__.update(values)

    def __getitem__(self, name: str) -> Any:
        return self.__dict__[name]

    def __contains__(self, name: object) -> bool:
        return name in self.__dict__

    def __iter__(self) -> Iterator[str]:
        return iter(self.__dict__)

    def __repr__(self) -> str:
        return f"Env({', '.join(sorted(self.__dict__))})"


class Namespace:
    """All objects of one class: id derivation, hosts, files and the alarm table."""

    def __init__(self, runtime: Runtime, class_name: str, spec: ClassSpec, binding: str) -> None:
        unique_key = f"{runtime.worker_name}-{class_name}"
        if not _KEY_PART.fullmatch(unique_key):
            raise DoemuError(f"cannot derive a storage directory from namespace {unique_key!r}")
        self.runtime = runtime
        self.class_name = class_name
        self.cls = spec.cls
        self.sql_enabled = spec.sql
        self.binding = binding
        self.unique_key = unique_key
        self.ids = IdFactory(unique_key)
        self.directory = runtime.persist_dir / unique_key
        self.directory.mkdir(parents=True, exist_ok=True)
        self.hosts: dict[str, ObjectHost] = {}
        self.alarm_table = AlarmTable(self.directory / "metadata.sqlite")
        self.stub_namespace = DurableObjectNamespace(self)

    def object_path(self, hex_id: str) -> Path:
        if not is_hex_id(hex_id):  # defence in depth: only validated ids become file names
            raise InvalidIdError(f"refusing to use {hex_id!r} as an object file name")
        return self.directory / f"{hex_id.lower()}.sqlite"

    def host(self, object_id: DurableObjectId) -> ObjectHost:
        hex_id = str(object_id)
        host = self.hosts.get(hex_id)
        if host is None:
            host = self.hosts[hex_id] = ObjectHost(self, object_id)
        elif host.id.name is None and object_id.name is not None:
            host.id.name = object_id.name
        return host

    def host_by_hex(self, hex_id: str) -> ObjectHost:
        return self.host(DurableObjectId(hex_id.lower()))

    def resolve(self, name_or_id: str) -> DurableObjectId:
        """An admin/test address: a 64-hex id of this namespace, else a name."""
        if is_hex_id(name_or_id):  # an id: must belong to this namespace (else InvalidIdError)
            return self.ids.from_string(name_or_id)
        return self.ids.from_name(name_or_id)

    def stored_ids(self) -> list[str]:
        """Ids of every object that has a file, live or not."""
        return sorted(p.stem for p in self.directory.glob("*.sqlite") if is_hex_id(p.stem))

    def forget(self, host: ObjectHost) -> None:
        """Drop an evicted host that holds nothing worth keeping in memory."""
        if not host.live and not len(host.sockets) and self.hosts.get(host.hex_id) is host:
            del self.hosts[host.hex_id]


class Runtime:
    """Hosts every Durable Object of one worker; see the module docstring."""

    def __init__(
        self,
        *,
        worker_name: str,
        classes: Mapping[str, ClassSpec],
        bindings: Mapping[str, str] | None = None,
        persist_dir: Path | str | None = None,
        vars: Mapping[str, Any] | None = None,
        clock: Clock | None = None,
        idle_timeout: tuple[float, float] = (70.0, 140.0),
        max_live_objects: int | None = None,
        limits: StorageLimits | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.worker_name = worker_name
        self.clock: Clock = clock or SystemClock()
        self.rng = rng or random.Random()
        self.limits = limits
        self._temp_dir: str | None = None
        if persist_dir is None:
            self._temp_dir = tempfile.mkdtemp(prefix="doemu-")
            persist_dir = self._temp_dir
        self.persist_dir = Path(persist_dir).resolve()
        self.persist_dir.mkdir(parents=True, exist_ok=True)
        self.events = EventBus(self.clock.now)
        self.files = ObjectFiles()
        self.eviction = EvictionManager(
            self.clock, idle_timeout, max_live=max_live_objects, rng=self.rng
        )
        self.scheduler = AlarmScheduler(self.clock, self._deliver_alarm)
        self._retries: dict[AlarmKey, tuple[float, int]] = {}
        binding_map = dict(bindings) if bindings is not None else {n: n for n in classes}
        self.namespaces: dict[str, Namespace] = {}
        self.bindings: dict[str, Namespace] = {}
        for binding, class_name in binding_map.items():
            if class_name not in classes:
                raise DoemuError(f"binding {binding!r} names unknown class {class_name!r}")
            ns = self.namespaces.get(class_name)
            if ns is None:
                ns = self.namespaces[class_name] = Namespace(
                    self, class_name, classes[class_name], binding
                )
            self.bindings[binding] = ns
        self._by_unique_key = {ns.unique_key: ns for ns in self.namespaces.values()}
        env_values: dict[str, Any] = dict(vars or {})
        env_values.update({b: ns.stub_namespace for b, ns in self.bindings.items()})
        self.env = Env(env_values)
        self.started = False
        self.closed = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._held_alarms: list[tuple[AlarmKey, float]] = []

    def track(self, task: asyncio.Task[Any]) -> None:
        """Keep a background task (a WebSocket event) referenced until it finishes."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self, *, hold_alarms: bool = False) -> None:
        """Load every persisted alarm; overdue ones fire at once, with no request.

        With ``hold_alarms`` the loaded alarms wait for :meth:`release_alarms`: ``doemu dev``
        reports ready first, so thousands of overdue alarms cannot delay the server itself.
        """
        if self.started:
            return
        self.started = True
        compat_js.set_clock(self.clock)
        entries: list[tuple[AlarmKey, float]] = []
        for ns in self.namespaces.values():
            for actor_id, when, _name in await ns.alarm_table.load_all():
                if is_hex_id(actor_id):
                    entries.append(((ns.unique_key, actor_id.lower()), when))
        if entries:
            _log.info("restored %d persisted alarm(s)", len(entries))
        self._held_alarms = entries
        if not hold_alarms:
            self.release_alarms()

    def release_alarms(self) -> None:
        """Arm the alarms :meth:`start` loaded (idempotent)."""
        entries, self._held_alarms = self._held_alarms, []
        if entries:
            self.scheduler.load([*entries, *self.scheduler.pending().items()])

    async def close(self) -> None:
        """Commit and close every object; stop timers. Safe to call twice."""
        if self.closed:
            return
        self.closed = True  # from here on, ObjectHost.call refuses new events
        running = [*self.scheduler.running(), *self._tasks]
        self.scheduler.close()
        self.eviction.close()
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        for ns in self.namespaces.values():
            for host in list(ns.hosts.values()):
                if host.live:
                    host.reset("The runtime is shutting down.") if host.busy else host.evict_now()
            ns.alarm_table.close()
        await asyncio.sleep(0)
        await asyncio.to_thread(self.files.close)  # deferred closes land; spares are removed
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- lookup --------------------------------------------------------------------------------
    def namespace(self, binding: str) -> Namespace:
        try:
            return self.bindings[binding]
        except KeyError:
            raise DoemuError(
                f"unknown Durable Object binding {binding!r}; known: {sorted(self.bindings)}"
            ) from None

    def host(self, binding: str, name_or_id: str) -> ObjectHost:
        ns = self.namespace(binding)
        return ns.host(ns.resolve(name_or_id))

    def live_hosts(self) -> list[ObjectHost]:
        return self.eviction.live_hosts()

    # -- alarm glue (called by hosts and storage) ----------------------------------------------
    async def _deliver_alarm(self, key: AlarmKey, scheduled: float) -> None:
        ns = self._by_unique_key.get(key[0])
        if ns is None:
            return
        await ns.host_by_hex(key[1]).deliver_alarm(scheduled)

    def alarm_committed(self, host: ObjectHost, when: float | None) -> None:
        """A transaction that changed ``host``'s alarm is durable: mirror it and schedule it."""
        key = host.key
        table = host.namespace.alarm_table
        if when is None:
            table.delete(host.hex_id)
            self.scheduler.cancel(key)
            self._retries.pop(key, None)
        else:
            table.set(host.hex_id, when, host.id.name)
            self.scheduler.set(key, when)
            retry = self._retries.get(key)
            if retry is not None and retry[0] != when:
                del self._retries[key]

    def alarm_retry_count(self, key: AlarmKey, scheduled: float) -> int:
        retry = self._retries.get(key)
        return retry[1] if retry is not None and retry[0] == scheduled else 0

    def alarm_succeeded(self, key: AlarmKey) -> None:
        self._retries.pop(key, None)

    def schedule_alarm_retry(self, host: ObjectHost, at: float, retry_count: int) -> None:
        key = host.key
        self._retries[key] = (at, retry_count)
        storage = host.storage
        if storage is not None:
            try:
                storage.set_alarm_internal(at)
                storage.commit()  # reports the new time through alarm_committed
                return
            except DoemuError:
                _log.exception("could not store the retry of %s; scheduling it anyway", host.hex_id)
        host.namespace.alarm_table.set(host.hex_id, at, host.id.name)
        self.scheduler.set(key, at)

    def drop_alarm(self, host: ObjectHost) -> None:
        storage = host.storage
        self._retries.pop(host.key, None)
        if storage is not None:
            storage.set_alarm_internal(None)
            storage.commit()
        else:
            host.namespace.alarm_table.delete(host.hex_id)
            self.scheduler.cancel(host.key)

    # -- operations for the admin API, the CLI and tests -----------------------------------------
    async def run_alarm_now(self, binding: str, name_or_id: str) -> bool:
        """Deliver ``name_or_id``'s pending alarm now; False when it has none."""
        host = self.host(binding, name_or_id)
        running = self.scheduler.running_task(host.key)
        if running is not None:  # never run the handler twice at once: let this one finish
            await asyncio.gather(running, return_exceptions=True)
        pending = self.scheduler.get(host.key)
        if pending is None:
            pending = host.namespace.alarm_table.get(host.hex_id)
        if pending is None:
            return False
        self.scheduler.cancel(host.key)
        now = self.clock.now()
        if pending > now:
            # Bring the stored time forward so that delivery sees a due alarm.
            await host.call("admin", _bring_alarm_forward(now))
            self.scheduler.cancel(host.key)
            pending = now
        await host.deliver_alarm(pending)
        return True

    async def evict(self, binding: str, name_or_id: str) -> bool:
        """Evict one object gracefully; False if it was not live (or a socket pins it)."""
        return await self.host(binding, name_or_id).evict()

    async def evict_all(self) -> int:
        results = await asyncio.gather(*(h.evict() for h in self.live_hosts()))
        return sum(1 for evicted in results if evicted)

    def reset(self, binding: str, name_or_id: str, reason: str | None = None) -> None:
        self.host(binding, name_or_id).reset(reason or "Durable Object reset by doemu.")

    def reset_all(self, reason: str | None = None) -> int:
        hosts = self.live_hosts()
        for host in hosts:
            host.reset(reason or "Durable Object reset by doemu.")
        return len(hosts)

    async def advance(self, ms: float) -> None:
        """Move a manual clock forward by ``ms``, running everything due in time order.

        Each due timer fires at its own time and its work (an alarm handler, a retry) runs to
        completion before time moves on, so a long advance replays retries exactly.
        """
        clock = self.clock
        if not isinstance(clock, ManualClock):
            raise DoemuError("advance() needs a manual clock; this runtime runs on real time")
        if ms < 0:
            raise ValueError(f"advance() expects ms >= 0, got {ms}")
        target = clock.now() + ms
        await self.settle()
        while True:
            due = clock.next_due()
            if due is None or due > target:
                break
            clock.set(max(due, clock.now()))
            await self.settle()
        clock.set(target)
        await self.settle()

    async def settle(self) -> None:
        """Let due work run: loop turns, then every running alarm delivery to completion."""
        for _ in range(3):
            await asyncio.sleep(0)
        while self.scheduler.running() or self._tasks:
            await self.scheduler.idle()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            for _ in range(3):
                await asyncio.sleep(0)


def _bring_alarm_forward(now: float) -> Any:
    def run(_instance: Any) -> None:
        from .host import current_host

        host = current_host.get()
        assert host is not None and host.storage is not None
        host.storage.set_alarm_internal(now)

    return run
