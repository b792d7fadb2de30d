"""The runtime: wires namespaces, storage, alarms and eviction together, and starts them up.

One :class:`Runtime` hosts every object of one worker in one asyncio process. It builds one
:class:`~doemu.objects.Namespace` per Durable Object class and hands every object host the
services it needs (:class:`~doemu.objects.HostServices`, which this class implements): the clock,
``env``, storage with the configured limits and file pool, the alarm service, the eviction
manager and the event bus. Start-up loads every persisted alarm so that interrupted work resumes
with no incoming request. Operations on a running runtime (run an alarm now, evict, reset, move a
manual clock) live in :mod:`doemu.control`.

User code never sees these types: it sees ``env.BINDING`` (a
:class:`~doemu.objects.DurableObjectNamespace`) and the stubs it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import random
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from .alarms import AlarmKey, AlarmService
from .bindings import WorkerBindings
from .clock import Clock, SystemClock
from .compat import set_clock, set_env, set_output_gate, set_wait_until
from .compat.boundary import accept_promise, set_strict
from .compat.outbound import close_clients
from .config import Durability
from .config.ai import AiSettings
from .config.bindings import WorkerResources
from .errors import DoemuError
from .events import EventBus
from .jsboundary import hinted, is_strict
from .objects import (
    ClassSpec,
    DurableObjectNamespace,
    EvictionManager,
    Namespace,
    ObjectClass,
    ObjectHost,
    current_host,
)
from .objects.agent_events import install_agent_event_bridge
from .objects.services import Evictable
from .persist import namespace_dir, unique_key
from .storage import ObjectStorage, StorageLimits
from .storage.durability import SyncPool
from .storage.files import ObjectFiles

__all__ = ["ClassSpec", "Env", "Runtime", "current_entry"]

_log = logging.getLogger("doemu.runtime")

#: The ``waitUntil`` of the entry worker request being handled in this task, if any (set by the
#: server); ``workers.waitUntil`` outside any object goes there.
current_entry: contextvars.ContextVar[Callable[[Awaitable[Any]], None] | None] = (
    contextvars.ContextVar("doemu_current_entry", default=None)
)


class Env:
    """The ``env`` every object and the entry worker receive: bindings and ``[vars]``.

    Read by attribute (``env.COUNTER``), as on Cloudflare. There, the Python SDK's env wrapper
    cannot be listed or indexed: ``dir(env)`` shows only the bindings already read (it caches
    them as they are), and ``iter(env)``, ``"X" in env`` and ``env["X"]`` raise ``TypeError``.
    With the JavaScript boundary's rules on, doemu's env behaves the same; under ``--lenient``
    it can be listed, indexed and searched. A binding that does not exist raises
    ``AttributeError`` naming the ones that do.
    """

    __slots__ = ("_read", "_values")

    def __init__(self, values: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_values", dict(values))
        object.__setattr__(self, "_read", set())

    def view(self) -> Env:
        """The same bindings, with nothing read yet: what one entry-worker instance or one
        Durable Object instance receives (on Cloudflare each gets its own env wrapper, so what
        ``dir(env)`` shows depends on what that instance read)."""
        view = object.__new__(Env)
        object.__setattr__(view, "_values", self._values)
        object.__setattr__(view, "_read", set())
        return view

    def __getattr__(self, name: str) -> Any:
        values = object.__getattribute__(self, "_values")
        try:
            value = values[name]
        except KeyError:
            if name.startswith("__"):
                raise AttributeError(name) from None
            known = ", ".join(sorted(values)) or "none"
            raise hinted(
                AttributeError(name),
                f"this Worker has no binding or variable {name!r}; it has: {known}",
            ) from None
        object.__getattribute__(self, "_read").add(name)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        self._values[name] = value

    def __dir__(self) -> list[str]:
        if is_strict():
            return sorted(self._read)
        return sorted(self._values)

    def _listing(self, refusal: str) -> None:
        if is_strict():
            raise hinted(
                TypeError(refusal),
                "the Python SDK's env wrapper cannot be listed or indexed on Cloudflare; read "
                "bindings by name: getattr(env, name)",
            )

    def __getitem__(self, name: str) -> Any:
        self._listing("'_EnvWrapper' object is not subscriptable")
        return self._values[name]

    def __contains__(self, name: object) -> bool:
        self._listing("argument of type '_EnvWrapper' is not a container or iterable")
        return name in self._values

    def __iter__(self) -> Iterator[str]:
        self._listing("'_EnvWrapper' object is not iterable")
        return iter(self._values)

    def __repr__(self) -> str:
        return f"Env({', '.join(sorted(self._values))})"


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
        durability: Durability = "process",
        resources: WorkerResources | None = None,
        entrypoints: Mapping[str, type] | None = None,
        lenient: bool = False,
        ai: AiSettings | None = None,
    ) -> None:
        self.worker_name = worker_name
        #: Whether the JavaScript boundary's rules are relaxed (``--lenient``; see
        #: :mod:`doemu.compat.boundary`).
        self.lenient = lenient
        #: ``power``: commits are fsynced (off the loop) before their output leaves the object;
        #: ``process``: they survive the process being killed. See doemu.storage.durability.
        self.durability: Durability = durability
        self.sync_pool: SyncPool | None = SyncPool() if durability == "power" else None
        self._clock: Clock = clock or SystemClock()
        self.limits = limits
        self._temp_dir: str | None = None
        if persist_dir is None:
            self._temp_dir = tempfile.mkdtemp(prefix="doemu-")
            persist_dir = self._temp_dir
        self.persist_dir = Path(persist_dir).resolve()
        self.persist_dir.mkdir(parents=True, exist_ok=True)
        rng = rng or random.Random()
        self.events = EventBus(self._clock.now)
        self.files = ObjectFiles(durable=self.sync_pool is not None)
        self.eviction = EvictionManager(
            self._clock, idle_timeout, max_live=max_live_objects, rng=rng
        )
        self.alarms = AlarmService(
            self._clock,
            rng,
            self.events.emit,
            self._alarm_target,
            sync_pool=self.sync_pool,
        )
        binding_map = dict(bindings) if bindings is not None else {n: n for n in classes}
        self.namespaces: dict[str, Namespace] = {}
        self.bindings: dict[str, Namespace] = {}
        for binding, class_name in binding_map.items():
            if class_name not in classes:
                raise DoemuError(f"binding {binding!r} names unknown class {class_name!r}")
            ns = self.namespaces.get(class_name)
            if ns is None:
                key = unique_key(worker_name, class_name)
                directory = namespace_dir(self.persist_dir, key)
                kind = ObjectClass(classes[class_name], class_name, binding, key, directory)
                ns = self.namespaces[class_name] = Namespace(kind, self)
                self.alarms.add_namespace(key, directory, binding)
            self.bindings[binding] = ns
        self._by_unique_key = {ns.unique_key: ns for ns in self.namespaces.values()}
        #: Namespaces the runtime keeps for its own bindings (a workflow's instances), by key:
        #: objects and alarms like any other, but not in ``env``.
        self.internal: dict[str, Namespace] = {}
        self._stubs = {b: DurableObjectNamespace(ns) for b, ns in self.bindings.items()}
        #: KV, D1, R2, services, crons and assets (see doemu.bindings).
        self.extra = WorkerBindings(
            resources or WorkerResources(),
            persist_dir=self.persist_dir,
            clock=self._clock,
            sync_pool=self.sync_pool,
            host=self,
            entrypoints=entrypoints,
            worker_name=worker_name,
            ai=ai,
            vars=vars,
        )
        self._env = Env({**(vars or {}), **self._stubs, **self.extra.env_values()})
        self.started = False
        self._closed = False
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- HostServices (what every object host may use) -----------------------------------------
    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def env(self) -> Env:
        """The Worker's bindings, as a fresh view (see :meth:`Env.view`)."""
        return self._env.view()

    @property
    def closed(self) -> bool:
        return self._closed

    def open_storage(
        self,
        path: Path,
        *,
        sql_enabled: bool,
        has_alarm_handler: bool,
        on_alarm_commit: Callable[[float | None], None],
        on_alarm_prepare: Callable[[float | None], asyncio.Future[None] | None],
        on_commit_failed: Callable[[BaseException], None],
        exclusive: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]],
    ) -> ObjectStorage:
        return ObjectStorage(
            path,
            clock=self._clock,
            sql_enabled=sql_enabled,
            limits=self.limits,
            has_alarm_handler=has_alarm_handler,
            on_alarm_commit=on_alarm_commit,
            on_alarm_prepare=on_alarm_prepare,
            exclusive=exclusive,
            files=self.files,
            sync_pool=self.sync_pool,
            on_commit_failed=on_commit_failed,
        )

    def alarm_committed(self, key: AlarmKey, when: float | None, name: str | None) -> None:
        self.alarms.committed(key, when, name)

    def alarm_prepared(
        self, key: AlarmKey, when: float | None, name: str | None
    ) -> asyncio.Future[None] | None:
        return self.alarms.prepared(key, when, name)

    def preempting(self) -> bool:
        return self.alarms.preempting()

    def activated(self, host: Evictable) -> None:
        self.eviction.activated(host)

    def deactivated(self, host: Evictable) -> None:
        self.eviction.deactivated(host)

    def idle(self, host: Evictable) -> None:
        self.eviction.idle(host)

    def emit(self, type_: str, **fields: Any) -> None:
        self.events.emit(type_, **fields)

    def internal_namespace(
        self, key: str, class_name: str, cls: type, directory: Path, label: str
    ) -> Namespace:
        """A namespace of ``cls`` objects for a binding of the runtime's own (a workflow's
        instances): its files in ``directory``, its alarms restored at start-up like every
        namespace's; ``label`` is what logs and the admin API call it."""
        kind = ObjectClass(ClassSpec(cls, True), class_name, label, key, directory)
        ns = Namespace(kind, self)
        self.alarms.add_namespace(key, directory, label)
        self._by_unique_key[key] = ns
        self.internal[key] = ns
        return ns

    def track(self, task: asyncio.Task[Any]) -> None:
        """Keep a background task (an event outside its caller's task) until it finishes."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def tracked(self) -> list[asyncio.Task[Any]]:
        """Background tasks still running (a manual clock settles them)."""
        return list(self._tasks)

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self, *, hold_alarms: bool = False) -> None:
        """Load every persisted alarm; overdue ones fire at once, with no request.

        With ``hold_alarms`` the loaded alarms wait for :meth:`release_alarms`: ``doemu dev``
        reports ready first, so thousands of overdue alarms cannot delay the server itself.
        """
        if self.started:
            return
        self.started = True
        set_clock(self._clock)
        set_strict(not self.lenient)
        set_env(self._env)
        set_wait_until(self._wait_until)
        set_output_gate(self._output_gate)
        install_agent_event_bridge()
        await self.alarms.restore()
        if not hold_alarms:
            self.release_alarms()

    def release_alarms(self) -> None:
        """Arm the alarms :meth:`start` loaded, and the cron triggers (idempotent)."""
        self.alarms.release()
        self.extra.start()

    @contextlib.contextmanager
    def entry_scope(self, wait_until: Callable[[Awaitable[Any]], None]) -> Iterator[None]:
        """While an entrypoint the runtime calls (a cron, a service) runs, ``workers.waitUntil``
        goes to its ``ctx.waitUntil``."""
        token = current_entry.set(wait_until)
        try:
            yield
        finally:
            current_entry.reset(token)

    def _wait_until(self, awaitable: Awaitable[Any]) -> None:
        """``workers.waitUntil``: the current object's ``ctx.waitUntil``, else the request's.

        Cloudflare's module-level ``waitUntil`` is the JavaScript one, unpatched: a coroutine or
        a bare task fails there as in a Durable Object's ``ctx.waitUntil``, wherever it is
        called (see :func:`~doemu.compat.boundary.accept_promise`)."""
        promise = accept_promise(awaitable, "waitUntil")
        if promise is None:
            return
        awaitable = promise
        host = current_host.get()
        if host is not None:
            host.wait_until(awaitable)
            return
        entry = current_entry.get()
        if entry is not None:
            entry(awaitable)
            return
        self.track(asyncio.ensure_future(awaitable))

    @staticmethod
    def _output_gate(hold: bool = True) -> asyncio.Future[None] | None:
        """Before output (a stream chunk, an outgoing request) leaves user code: commit the
        current object's writes, and say what it must wait for (None: nothing)."""
        host = current_host.get()
        return None if host is None else host.output_barrier(hold=hold)

    async def close(self) -> None:
        """Commit and close every object; stop timers. Safe to call twice."""
        if self._closed:
            return
        self._closed = True  # from here on, ObjectHost.call refuses new events
        self.extra.stop()
        running = [*self.alarms.stop(), *self._tasks]
        self.eviction.close()
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        for ns in [*self.namespaces.values(), *self.internal.values()]:
            for host in list(ns.hosts.values()):
                if host.live:
                    host.reset("The runtime is shutting down.") if host.busy else host.evict_now()
        self.alarms.close()
        await asyncio.sleep(0)
        self.extra.close()
        await asyncio.to_thread(self.files.close)  # deferred closes land; spares are removed
        if self.sync_pool is not None:
            await asyncio.to_thread(self.sync_pool.close)  # fsyncs in flight land
        await close_clients()  # the outbound fetch connection pool of this loop
        set_output_gate(None, if_current=self._output_gate)
        set_wait_until(None, if_current=self._wait_until)
        set_env(None, if_current=self._env)
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

    def stub_namespace(self, binding: str) -> DurableObjectNamespace:
        """What ``env.<binding>`` is."""
        self.namespace(binding)  # the error for an unknown binding
        return self._stubs[binding]

    def host(self, binding: str, name_or_id: str) -> ObjectHost:
        ns = self.namespace(binding)
        return ns.host(ns.resolve(name_or_id))

    def live_hosts(self) -> list[ObjectHost]:
        return [h for h in self.eviction.live_hosts() if isinstance(h, ObjectHost)]

    def _alarm_target(self, key: AlarmKey) -> ObjectHost | None:
        ns = self._by_unique_key.get(key[0])
        return None if ns is None else ns.host_by_hex(key[1])
