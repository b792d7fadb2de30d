"""An in-process runtime for tests: real SQLite files, a manual clock, restarts, evictions.

``WorkerHarness`` is what a user's pytest suite (and doemu's own) uses to exercise Durable Object
classes without a server: build it from classes (or a worker module), get ``env``, advance time
deterministically, run an alarm now, evict or reset objects, and restart the runtime on the same
persist directory to prove that state and alarms survive.

Start it with ``h = await WorkerHarness(...)`` (or ``await h.start()``) and close it with
``await h.close()``, or use ``async with WorkerHarness(...) as h:``. A harness still open when
its event loop shuts down (a test that failed before closing it, then ``asyncio.run`` or
pytest-asyncio ending the loop) closes itself as the loop cancels its remaining tasks.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Generator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..clock import ManualClock
from ..config import Durability
from ..config.ai import AiSettings
from ..config.bindings import (
    D1DatabaseBinding,
    KvNamespaceBinding,
    R2BucketBinding,
    ServiceBinding,
    WorkerResources,
)
from ..control import RuntimeControl
from ..runtime import ClassSpec, Env, Runtime
from ..storage import StorageLimits
from .chaos import ChaosRuntime, ChaosSettings, ChaosStats
from .client import ASGIWebSocket

__all__ = ["WorkerHarness"]


class WorkerHarness:
    """Build, drive and restart an in-process :class:`~doemu.runtime.Runtime`.

    ``classes`` maps binding names to Durable Object classes (or :class:`ClassSpec`); the binding
    name is also the class name used for the namespace's unique key unless ``class_names`` says
    otherwise. Time stands still (a :class:`ManualClock`) unless ``clock`` is given. Commits
    are durable against a process crash unless ``durability="power"`` (as ``doemu dev`` runs by
    default: each commit fsynced before its output leaves).

    ``chaos`` (a :class:`~doemu.testing.chaos.ChaosSettings`, which pytest's ``--doemu-chaos``
    passes) evicts every object after every event and may reset it at awaits, drawing from
    ``chaos_rng``; without it the runtime is a plain :class:`Runtime`.

    The Worker's other bindings come from ``resources`` (a project's, with ``from_config``) or
    from the shortcuts ``kv_namespaces=["CACHE"]``, ``d1_databases=["DB"]``,
    ``r2_buckets=["FILES"]``, ``services={"AUTH": "Auth"}`` and ``crons=["*/5 * * * *"]``;
    ``entry`` is the ``Default`` entrypoint (crons run its ``scheduled``) and ``entrypoints`` the
    named ones services call. :meth:`run_scheduled` and :meth:`apply_d1_migrations` act on them.
    ``ai`` (:class:`~doemu.config.ai.AiSettings`) is the endpoint that serves an ``[ai]``
    binding (``resources.ai``), its key ``DOEMU_AI_API_KEY`` in ``vars``.
    """

    def __init__(
        self,
        classes: Mapping[str, type | ClassSpec],
        *,
        persist_dir: Path | str,
        worker_name: str = "test-worker",
        class_names: Mapping[str, str] | None = None,
        vars: Mapping[str, Any] | None = None,
        clock: Any = None,
        idle_timeout: tuple[float, float] = (70.0, 140.0),
        max_live_objects: int | None = None,
        limits: StorageLimits | None = None,
        seed: int = 0,
        durability: Durability = "process",
        chaos: ChaosSettings | None = None,
        chaos_rng: random.Random | None = None,
        resources: WorkerResources | None = None,
        kv_namespaces: Sequence[str] = (),
        d1_databases: Sequence[str] = (),
        r2_buckets: Sequence[str] = (),
        crons: Sequence[str] = (),
        services: Mapping[str, str] | None = None,
        entry: type | None = None,
        entrypoints: Mapping[str, type] | None = None,
        lenient: bool = False,
        ai: AiSettings | None = None,
    ) -> None:
        self.persist_dir = Path(persist_dir)
        #: Relax the JavaScript boundary's rules (``doemu dev --lenient``); strict by default.
        self.lenient = lenient
        self.worker_name = worker_name
        self.clock = clock if clock is not None else ManualClock()
        self._bindings = {b: (class_names or {}).get(b, _class_name(c)) for b, c in classes.items()}
        self._classes = {
            self._bindings[b]: c if isinstance(c, ClassSpec) else ClassSpec(c)
            for b, c in classes.items()
        }
        self._vars = dict(vars or {})
        #: ``[tool.doemu.ai]``: the endpoint that serves ``env.AI`` (``from_config`` reads the
        #: project's pyproject.toml; otherwise ``ai=AiSettings(base_url=…)``).
        self.ai = ai
        self._idle_timeout = idle_timeout
        self._max_live = max_live_objects
        self._limits = limits
        #: ``process`` by default (tests want speed); ``power`` fsyncs as ``doemu dev`` does.
        self.durability: Durability = durability
        self._rng = random.Random(seed)
        #: Chaos mode (see :mod:`doemu.testing.chaos`); None: a plain runtime, as always.
        self.chaos = chaos
        #: What chaos did so far, over every runtime of this harness (restarts included).
        self.chaos_stats = ChaosStats()
        self._chaos_rng = chaos_rng or (chaos.rng_for(worker_name) if chaos else None)
        #: KV, D1, R2… (a project's, or the ones named with ``kv_namespaces=`` etc.).
        self.resources = _with_shortcuts(
            resources or WorkerResources(),
            kv=kv_namespaces,
            d1=d1_databases,
            r2=r2_buckets,
            crons=crons,
            services=tuple(
                ServiceBinding(binding, worker_name, None if target == "Default" else target)
                for binding, target in (services or {}).items()
            ),
        )
        #: The Worker's entrypoint classes by name (``Default``: crons, ``SELF`` services…).
        self.entrypoints = dict(entrypoints or {})
        if entry is not None:
            self.entrypoints["Default"] = entry
        self.runtime = self._new_runtime()
        self.control = RuntimeControl(self.runtime)
        #: The event loop that started the harness (None before :meth:`start`).
        self.loop: asyncio.AbstractEventLoop | None = None
        self._guard: asyncio.Future[None] | None = None

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed" if self.runtime.closed else "not started"
        return f"<WorkerHarness {self.worker_name!r} on {str(self.persist_dir)!r}: {state}>"

    @classmethod
    def from_config(cls, config: Path | str, **kwargs: Any) -> WorkerHarness:
        """A harness for a whole project: its wrangler config, main module, bindings and vars."""
        from ..bindings import find_entrypoints
        from ..compat.boundary import set_strict
        from ..config import find_pyproject, load_config
        from ..config.settings import read_ai_settings
        from ..loader import load_worker

        worker = load_config(config)
        set_strict(not kwargs.get("lenient", False))  # the import obeys the rules too
        loaded = load_worker(worker)
        kwargs.setdefault("vars", worker.vars)
        kwargs.setdefault("resources", worker.resources)
        kwargs.setdefault("entrypoints", find_entrypoints(loaded.module))
        kwargs.setdefault("ai", read_ai_settings(find_pyproject(worker)))
        harness = cls(
            {
                b.name: ClassSpec(
                    loaded.classes[b.class_name].cls, loaded.classes[b.class_name].sql
                )
                for b in worker.bindings
            },
            worker_name=worker.name,
            class_names={b.name: b.class_name for b in worker.bindings},
            **kwargs,
        )
        harness.entry = loaded.entry
        return harness

    def _new_runtime(self) -> Runtime:
        options: dict[str, Any] = {
            "worker_name": self.worker_name,
            "classes": self._classes,
            "bindings": self._bindings,
            "persist_dir": self.persist_dir,
            "vars": self._vars,
            "clock": self.clock,
            "idle_timeout": self._idle_timeout,
            "max_live_objects": self._max_live,
            "limits": self._limits,
            "rng": self._rng,
            "durability": self.durability,
            "resources": self.resources,
            "entrypoints": self.entrypoints,
            "lenient": self.lenient,
            "ai": self.ai,
        }
        if self.chaos is None:
            return Runtime(**options)  # chaos off: exactly the runtime doemu dev runs
        assert self._chaos_rng is not None
        return ChaosRuntime(
            chaos=self.chaos, chaos_rng=self._chaos_rng, stats=self.chaos_stats, **options
        )

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> WorkerHarness:
        """Start the runtime (loading persisted alarms) and return the harness; idempotent."""
        await self.runtime.start()
        if self._guard is None:
            self.loop = asyncio.get_running_loop()
            self._guard = asyncio.ensure_future(self._close_when_the_loop_shuts_down())
        return self

    async def close(self) -> None:
        """Evict every object gracefully and stop the runtime; safe to call twice."""
        guard, self._guard = self._guard, None
        if guard is not None and guard is not asyncio.current_task():
            guard.cancel()
        await self.runtime.close()

    @property
    def is_open(self) -> bool:
        """Started and not closed yet."""
        return self.runtime.started and not self.runtime.closed

    def __await__(self) -> Generator[Any, None, WorkerHarness]:
        """``h = await WorkerHarness(...)``: start it and get it back."""
        return self.start().__await__()

    async def _close_when_the_loop_shuts_down(self) -> None:
        """Wait forever; cancelled by :meth:`close`, or by the loop shutting down (``asyncio.run``
        and pytest-asyncio cancel every task left), in which case close the harness first."""
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            if self._guard is asyncio.current_task():  # not cancelled by close()
                await self.close()
            raise

    async def __aenter__(self) -> WorkerHarness:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def restart(self) -> None:
        """Close the runtime and start a new one on the same persist dir (a clean restart).

        Live objects are evicted gracefully first; for a crash, use a subprocess and SIGKILL.
        """
        await self.runtime.close()
        self.runtime = self._new_runtime()
        self.control = RuntimeControl(self.runtime)
        await self.runtime.start()

    # -- access --------------------------------------------------------------------------------
    @property
    def env(self) -> Env:
        return self.runtime.env

    def stub(self, binding: str, name: str) -> Any:
        return self.runtime.stub_namespace(binding).getByName(name)

    def object_ids(self, binding: str) -> list[str]:
        """Every object of ``binding`` that has storage on disk."""
        return self.runtime.namespace(binding).stored_ids()

    def live_ids(self, binding: str) -> list[str]:
        ns = self.runtime.namespace(binding)
        return sorted(h.hex_id for h in ns.hosts.values() if h.live)

    def is_live(self, binding: str, name: str) -> bool:
        return self.runtime.host(binding, name).live

    # -- bindings --------------------------------------------------------------------------------
    async def run_scheduled(
        self, cron: str | None = None, scheduled_time: float | None = None
    ) -> dict[str, Any]:
        """Run the Worker's ``scheduled()`` handler now, as a cron trigger would, and wait for
        it (and its ``waitUntil`` work); returns the outcome (``{"cron", "scheduledTime",
        "outcome": "ok" | "exception", "error"?, "noRetry"}``). ``cron`` defaults to the first
        ``[triggers] crons`` entry (else ``""``), ``scheduled_time`` to now on the clock."""
        crons = self.runtime.extra.crons
        assert crons is not None
        if cron is None:
            cron = crons.crons[0] if crons.crons else ""
        outcome = await crons.run(cron, scheduled_time)
        await self.control.settle()
        return outcome

    @property
    def scheduled_runs(self) -> list[dict[str, Any]]:
        """The outcomes of the cron runs so far (the latest 100), oldest first."""
        crons = self.runtime.extra.crons
        return [] if crons is None else list(crons.history)

    async def apply_d1_migrations(self, database: str) -> list[str]:
        """Apply the D1 database's pending migrations (its ``migrations_dir``) as ``doemu d1
        migrations apply`` does; returns the file names applied. ``database`` is the binding,
        the ``database_name`` or the ``database_id``."""
        from ..bindings.d1.migrations import apply_migrations

        for spec in self.resources.d1:
            if spec.matches(database):
                engine = self.runtime.extra.d1_engine(spec.binding)
                applied = apply_migrations(engine, spec)
                durable = engine.file.durable()
                if durable is not None:
                    await durable
                return applied
        known = ", ".join(b.binding for b in self.resources.d1) or "none"
        raise KeyError(f"no D1 database {database!r} (D1 bindings: {known})")

    # -- time and events -------------------------------------------------------------------------
    async def advance(self, ms: float) -> None:
        """Move the manual clock forward by ``ms``, running everything due in time order.

        Each due timer fires at its own time and its work (an alarm handler, a retry) runs to
        completion before time moves on, so a 10-minute advance replays retries exactly.
        """
        await self.control.advance(ms)

    async def run_alarm(self, binding: str, name: str) -> bool:
        """Deliver the object's pending alarm now (False if it has none)."""
        return await self.control.run_alarm(binding, name)

    async def get_alarm(self, binding: str, name: str) -> float | None:
        """The object's pending alarm (ms), as the admin API reports it; None without one."""
        return self.control.pending_alarm(binding, name)

    async def evict(self, binding: str, name: str) -> bool:
        """Evict gracefully; False if the object was not live (or a socket pins it)."""
        return await self.control.evict(binding, name)

    async def evict_all(self) -> int:
        return await self.control.evict_all()

    def reset(self, binding: str, name: str, reason: str | None = None) -> bool:
        """Abort in-flight work and drop the instance; False if it was not live."""
        return self.control.reset(binding, name, reason)

    # -- HTTP and WebSocket, in process ----------------------------------------------------------
    #: The project's ``Default`` entry worker (:meth:`from_config` sets it); ``None``: requests
    #: go through the default router (``/<BINDING>/<name>/<path>``), as under ``doemu dev``.
    entry: type | None = None

    def app(self, entry: type | None = None) -> Any:
        """doemu's ASGI app (what ``doemu dev`` serves) on this harness's current runtime."""
        from ..server.app import DoemuApp

        return DoemuApp(self.runtime, entry=entry if entry is not None else self.entry)

    def client(self, entry: type | None = None, **kwargs: Any) -> Any:
        """An ``httpx.AsyncClient`` to the Worker, in process (see :mod:`.client`): ``async
        with h.client() as http: await http.post("/counter/alice")``. ``entry`` overrides
        :attr:`entry`; other keywords go to ``httpx.AsyncClient``."""
        import httpx

        transport = httpx.ASGITransport(app=self.app(entry), client=("127.0.0.1", 50000))
        kwargs.setdefault("base_url", "http://testserver")
        return httpx.AsyncClient(transport=transport, **kwargs)

    def websocket(self, path: str, entry: type | None = None, **kwargs: Any) -> ASGIWebSocket:
        """A WebSocket to the Worker, in process: ``async with h.websocket("/ROOM/lobby") as
        ws: await ws.send_text("hi"); await ws.receive_text()``. Keywords (``headers``,
        ``subprotocols``, ``timeout``) go to :class:`~doemu.testing.client.ASGIWebSocket`."""
        return ASGIWebSocket(self.app(entry), path, **kwargs)


def _with_shortcuts(
    resources: WorkerResources,
    *,
    kv: Sequence[str],
    d1: Sequence[str],
    r2: Sequence[str],
    crons: Sequence[str],
    services: Sequence[ServiceBinding],
) -> WorkerResources:
    """``resources`` plus the bindings named by the harness's shortcut keywords."""
    return dataclasses.replace(
        resources,
        kv=(*resources.kv, *(KvNamespaceBinding(name) for name in kv)),
        d1=(*resources.d1, *(D1DatabaseBinding(name) for name in d1)),
        r2=(*resources.r2, *(R2BucketBinding(name) for name in r2)),
        services=(*resources.services, *services),
        crons=(*resources.crons, *crons),
    )


def _class_name(cls: type | ClassSpec) -> str:
    return cls.cls.__name__ if isinstance(cls, ClassSpec) else cls.__name__
