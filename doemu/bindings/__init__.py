"""The bindings of a Worker beyond Durable Objects, on doemu's SQLite-and-files engine.

One folder per binding (``kv/``, …), each a small service with its own files under the persist
directory (named by :mod:`doemu.persist`), honouring the durability level, and surfaced to user
code exactly as Cloudflare's Python Workers API surfaces the JS binding (see
:mod:`doemu.bindings.boundary`). :class:`WorkerBindings` is the set one runtime holds: built
from the config's :class:`~doemu.config.bindings.WorkerResources`, it gives ``env`` its entries,
opens each resource's file on first use (one store per resource, however many bindings name it)
and closes them with the runtime.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..clock import Clock
from ..config.bindings import WorkerResources
from ..persist import d1_file, kv_file, queue_file, r2_dir
from ..storage.durability import SyncPool
from .entry import EntryHost, ExecutionContext, find_entrypoints
from .errors import BindingError, BindingSyntaxError, BindingTypeError, ServiceError
from .scheduled import CronService, NoScheduledHandler, ScheduledController

if TYPE_CHECKING:
    from ..config.ai import AiSettings
    from .ai import Ai
    from .assets import AssetsBinding, AssetServer
    from .d1 import D1Database, D1Engine
    from .kv import KVNamespace, KvStore
    from .queues import Queue, QueueConsumerService, QueueStore, StoredMessage
    from .r2 import R2Bucket, R2Store
    from .services import Fetcher, ServiceNotFound
    from .workflows import Workflow, WorkflowHost, WorkflowService

__all__ = [
    "Ai",
    "AssetServer",
    "AssetsBinding",
    "BindingError",
    "BindingSyntaxError",
    "BindingTypeError",
    "CronService",
    "D1Database",
    "EntryHost",
    "ExecutionContext",
    "Fetcher",
    "KVNamespace",
    "NoScheduledHandler",
    "Queue",
    "R2Bucket",
    "ScheduledController",
    "ServiceError",
    "ServiceNotFound",
    "WorkerBindings",
    "Workflow",
    "WorkflowService",
    "find_entrypoints",
]


#: Where each binding kind's public names live. A kind's modules are imported when a Worker
#: configures it (see :class:`WorkerBindings`) or when one of these names is first read, never
#: on the way to serving a Worker without it: together they are about 15 ms of a restart's
#: start-up (R2 and Workflows alone about 9), mostly dataclass and regex set-up.
_LAZY = {
    "Ai": ".ai",
    "AssetServer": ".assets",
    "AssetsBinding": ".assets",
    "D1Database": ".d1",
    "Fetcher": ".services",
    "KVNamespace": ".kv",
    "Queue": ".queues",
    "R2Bucket": ".r2",
    "ServiceNotFound": ".services",
    "Workflow": ".workflows",
    "WorkflowService": ".workflows",
}


def __getattr__(name: str) -> Any:
    """A kind's public name, importing its module on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


class WorkerBindings:
    """Every non-Durable-Object binding of one runtime (see the module docstring)."""

    def __init__(
        self,
        resources: WorkerResources,
        *,
        persist_dir: Path,
        clock: Clock,
        sync_pool: SyncPool | None = None,
        host: WorkflowHost | None = None,
        entrypoints: Mapping[str, type] | None = None,
        worker_name: str = "worker",
        ai: AiSettings | None = None,
        vars: Mapping[str, Any] | None = None,
    ) -> None:
        self.resources = resources
        #: The Worker's ``WorkerEntrypoint`` classes by name (``Default`` is the entry Worker).
        self.entrypoints = dict(entrypoints or {})
        self.persist_dir = persist_dir
        self.clock = clock
        self.sync_pool = sync_pool
        # Each kind's module is imported only when the Worker has a binding of that kind (see
        # _LAZY above); a kind it lacks leaves its table empty and its module unread.
        self._kv_stores: dict[str, KvStore] = {}
        self.kv: dict[str, KVNamespace] = {}
        if resources.kv:
            from .kv import KVNamespace

            self.kv = {
                b.binding: KVNamespace(b.binding, functools.partial(self.kv_store, b.binding))
                for b in resources.kv
            }
        self._d1_engines: dict[str, D1Engine] = {}
        self.d1: dict[str, D1Database] = {}
        if resources.d1:
            from .d1 import D1Database

            self.d1 = {
                b.binding: D1Database(b.binding, functools.partial(self.d1_engine, b.binding))
                for b in resources.d1
            }
        self._r2_stores: dict[str, R2Store] = {}
        self.r2: dict[str, R2Bucket] = {}
        if resources.r2:
            from .r2 import R2Bucket

            self.r2 = {
                b.binding: R2Bucket(b.binding, functools.partial(self.r2_store, b.binding))
                for b in resources.r2
            }
        self.services: dict[str, Fetcher] = {}
        if host is not None and resources.services:
            from .services import Fetcher, resolve_service

            for spec in resources.services:
                cls = resolve_service(spec, worker_name, self.entrypoints)
                self.services[spec.binding] = Fetcher(spec, cls, host)
        #: ``[assets]``: served before the Worker (see doemu.bindings.assets.server).
        self.assets: AssetServer | None = None
        if resources.assets is not None:
            from .assets import AssetServer

            self.assets = AssetServer(resources.assets)
        self.crons: CronService | None = None
        if host is not None:
            self.crons = CronService(host, clock, resources.crons, self.entrypoints.get("Default"))
        #: ``[[workflows]]`` by binding name (each an internal namespace of the runtime).
        self.workflows: dict[str, WorkflowService] = {}
        if host is not None and resources.workflows:
            from .workflows import WorkflowService

            for wf in resources.workflows:
                self.workflows[wf.binding] = WorkflowService(
                    wf,
                    host,
                    self.entrypoints.get(wf.class_name),
                    persist_dir=persist_dir,
                    worker_name=worker_name,
                )
        #: One store per queue (producers and consumers share it), opened on first use.
        self._queue_stores: dict[str, QueueStore] = {}
        self.queues: dict[str, Queue] = {}
        if resources.producers:
            from .queues import Queue

            self.queues = {
                p.binding: Queue(
                    p.binding,
                    p.queue,
                    functools.partial(self.queue_store, p.queue),
                    clock.now,
                    functools.partial(self._poke, p.queue),
                    p.delivery_delay,
                )
                for p in resources.producers
            }
        #: ``[[queues.consumers]]`` by queue name.
        self.consumers: dict[str, QueueConsumerService] = {}
        if host is not None and resources.consumers:
            from .queues import QueueConsumerService

            for c in resources.consumers:
                self.consumers[c.queue] = QueueConsumerService(
                    c,
                    functools.partial(self.queue_store, c.queue),
                    self._to_dead_letter_queue,
                    host,
                    clock,
                    self.entrypoints.get("Default"),
                )
        #: ``[ai]``: served by the endpoint of ``[tool.doemu.ai]`` (``ai``), its key from the
        #: Worker's variables (``.dev.vars``); without an endpoint every call says how to set one.
        self.ai: Ai | None = None
        if resources.ai is not None:
            from .ai import Ai, api_key_from

            self.ai = Ai(resources.ai.binding, ai, api_key_from(dict(vars or {})))
        self._closed = False

    def queue_store(self, queue: str) -> QueueStore:
        """The file of the queue ``queue`` (opened on first use)."""
        store = self._queue_stores.get(queue)
        if store is None:
            if self._closed:
                raise BindingError(f"queue {queue!r}: the runtime is closed")
            from .queues import QueueStore

            store = QueueStore(queue_file(self.persist_dir, queue), self.sync_pool)
            self._queue_stores[queue] = store
        return store

    def queue_names(self) -> list[str]:
        """Every queue a producer, a consumer or a dead-letter setting names."""
        names = [p.queue for p in self.resources.producers]
        for c in self.resources.consumers:
            names += [c.queue, *([c.dead_letter_queue] if c.dead_letter_queue else [])]
        return list(dict.fromkeys(names))

    def _poke(self, queue: str) -> None:
        consumer = self.consumers.get(queue)
        if consumer is not None:
            consumer.poke()

    def _to_dead_letter_queue(self, queue: str, messages: list[StoredMessage]) -> None:
        now = self.clock.now()
        rows = [(m.id, m.body, m.content_type, now, 0) for m in messages]
        self.queue_store(queue).add(rows, now)
        self._poke(queue)

    def describe(self) -> list[dict[str, Any]]:
        """Every binding as the admin API lists it: name, type, resource, file."""
        out: list[dict[str, Any]] = [
            {
                "binding": b.binding,
                "type": "kv",
                "resource": b.resource,
                "file": str(kv_file(self.persist_dir, b.resource)),
            }
            for b in self.resources.kv
        ]
        out += [
            {
                "binding": b.binding,
                "type": "d1",
                "resource": b.resource,
                "file": str(d1_file(self.persist_dir, b.resource)),
                "database_name": b.database_name,
                "migrations_dir": str(b.migrations_dir),
            }
            for b in self.resources.d1
        ]
        out += [
            {
                "binding": b.binding,
                "type": "r2",
                "resource": b.resource,
                "directory": str(r2_dir(self.persist_dir, b.resource)),
            }
            for b in self.resources.r2
        ]
        out += [
            {
                "binding": b.binding,
                "type": "service",
                "resource": b.service,
                "target": (b.entrypoint or "Default") if b.local else f"Worker {b.service!r}",
                "local": b.local,
            }
            for b in self.resources.services
        ]
        assets = self.resources.assets
        if assets is not None:
            out.append(
                {
                    "binding": assets.binding or "(no binding)",
                    "type": "assets",
                    "resource": assets.html_handling,
                    "directory": str(assets.directory),
                    "not_found_handling": assets.not_found_handling,
                    "run_worker_first": assets.run_worker_first,
                }
            )
        out += [
            {
                "binding": binding,
                "type": "workflow",
                "resource": service.spec.name,
                "class_name": service.spec.class_name,
                "directory": str(service.directory),
            }
            for binding, service in self.workflows.items()
        ]
        out += [
            {
                "binding": p.binding,
                "type": "queue",
                "resource": p.queue,
                "file": str(queue_file(self.persist_dir, p.queue)),
            }
            for p in self.resources.producers
        ]
        if self.ai is not None:
            settings = self.ai.settings
            out.append(
                {
                    "binding": self.resources.ai.binding if self.resources.ai else "AI",
                    "type": "ai",
                    "resource": settings.base_url if settings else "(not configured)",
                    "configured": settings is not None,
                    # What the banner shows after the endpoint.
                    "target": (
                        f"{len(settings.models)} model(s) mapped, default "
                        f"{settings.default_model or 'none'}"
                        if settings
                        else "run() fails until [tool.doemu.ai] base_url is set in pyproject.toml"
                    ),
                    "models": dict(settings.models) if settings else {},
                    "default_model": settings.default_model if settings else None,
                    "default_embedding_model": (
                        settings.default_embedding_model if settings else None
                    ),
                }
            )
        return out

    def env_values(self) -> dict[str, Any]:
        """What ``env`` gets: ``{binding name: binding object}``."""
        values: dict[str, Any] = {**self.kv, **self.d1, **self.r2, **self.services}
        if self.workflows:
            from .workflows import Workflow

            values.update({b: Workflow(b, service) for b, service in self.workflows.items()})
        values.update(self.queues)
        if self.ai is not None and self.resources.ai is not None:
            values[self.resources.ai.binding] = self.ai
        if self.assets is not None and self.assets.config.binding:
            from .assets import AssetsBinding

            values[self.assets.config.binding] = AssetsBinding(self.assets)
        return values

    # -- stores -------------------------------------------------------------------------------
    def kv_store(self, binding: str) -> KvStore:
        """The store behind the KV binding ``binding`` (opened on first use)."""
        spec = _find(self.resources.kv, binding, "KV namespace")
        store = self._kv_stores.get(spec.resource)
        if store is None:
            if self._closed:
                raise BindingError(f"env.{binding}: the runtime is closed")
            from .kv import KvStore

            store = KvStore(kv_file(self.persist_dir, spec.resource), self.clock, self.sync_pool)
            self._kv_stores[spec.resource] = store
        return store

    def d1_engine(self, binding: str) -> D1Engine:
        """The engine behind the D1 binding ``binding`` (opened on first use)."""
        spec = _find(self.resources.d1, binding, "D1 database")
        engine = self._d1_engines.get(spec.resource)
        if engine is None:
            if self._closed:
                raise BindingError(f"env.{binding}: the runtime is closed")
            from .d1 import D1Engine

            engine = D1Engine(d1_file(self.persist_dir, spec.resource), self.sync_pool)
            self._d1_engines[spec.resource] = engine
        return engine

    def r2_store(self, binding: str) -> R2Store:
        """The store behind the R2 binding ``binding`` (opened on first use)."""
        spec = _find(self.resources.r2, binding, "R2 bucket")
        store = self._r2_stores.get(spec.resource)
        if store is None:
            if self._closed:
                raise BindingError(f"env.{binding}: the runtime is closed")
            from .r2 import R2Store

            store = R2Store(r2_dir(self.persist_dir, spec.resource), self.clock, self.sync_pool)
            self._r2_stores[spec.resource] = store
        return store

    def start(self) -> None:
        """Arm the cron triggers (the runtime calls it once its alarms are released)."""
        if self.crons is not None:
            self.crons.start()
        for consumer in self.consumers.values():
            consumer.start()

    def stop(self) -> None:
        """Disarm the timers (first step of closing)."""
        if self.crons is not None:
            self.crons.stop()
        for consumer in self.consumers.values():
            consumer.stop()

    def close(self) -> None:
        """Close every open file (the runtime has stopped every event before)."""
        self.stop()
        self._closed = True
        for store in self._kv_stores.values():
            store.close()
        self._kv_stores.clear()
        for engine in self._d1_engines.values():
            engine.close()
        self._d1_engines.clear()
        for bucket in self._r2_stores.values():
            bucket.close()
        self._r2_stores.clear()
        for queue in self._queue_stores.values():
            queue.close()
        self._queue_stores.clear()


def _find(specs: Any, binding: str, kind: str) -> Any:
    for spec in specs:
        if spec.binding == binding:
            return spec
    known = ", ".join(s.binding for s in specs) or "none"
    raise BindingError(f"no {kind} binding {binding!r} (known: {known})")
