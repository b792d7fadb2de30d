"""``ObjectHost``: one Durable Object's life — activation, event delivery, gates, reset.

The host is the only place that knows whether an object is live. Every event (fetch, RPC call,
alarm, WebSocket message/close/error) goes through :meth:`ObjectHost.call`, which

1. constructs the instance lazily (``Cls(ctx, env)``) on a fresh storage connection,
2. waits while a ``blockConcurrencyWhile`` callback runs,
3. runs the handler as its own task (so a reset can cancel it and tell the caller why), and
4. commits the turn's writes before the result leaves the object (the output gate).

Events interleave only at real awaits: storage calls never yield, so a read-modify-write over
storage between two awaits is atomic, which is the guarantee workerd's input gate gives.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import inspect
import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, NoReturn

from ..clock import TimerHandle
from ..errors import BlockConcurrencyTimeoutError, DurableObjectAbort, ObjectResetError
from ..ids import DurableObjectId
from ..persist import object_file
from ..sockets.registry import SocketRegistry
from ..storage import DurableObjectStorage, ObjectStorage
from ..storage.files import FileClosing
from .context import DurableObjectState
from .diagnostics import check_constructed
from .gates import (
    BLOCK_CONCURRENCY_NESTING_MESSAGE,
    BLOCK_CONCURRENCY_TIMEOUT_MESSAGE,
    BLOCK_CONCURRENCY_TIMEOUT_MS,
    MAX_BLOCK_CONCURRENCY_NESTING,
    ResetAware,
    holding,
    run_inline,
)
from .services import HostServices, ObjectClass

__all__ = [
    "BLOCK_CONCURRENCY_NESTING_MESSAGE",
    "BLOCK_CONCURRENCY_TIMEOUT_MESSAGE",
    "BLOCK_CONCURRENCY_TIMEOUT_MS",
    "Lifecycle",
    "ObjectHost",
    "current_host",
]

_log = logging.getLogger("doemu.host")

_DEFAULT_ABORT_REASON = "Durable Object was aborted by ctx.abort()."
#: What the SDK's ``DurableObjectAbort`` says when ``ctx.abort()`` was given no reason.
_ABORT_REQUESTED = "Durable Object abort requested"

#: The host whose event is running in the current task (used by stubs for the output gate).
current_host: ContextVar[ObjectHost | None] = ContextVar("doemu_current_host", default=None)


class Lifecycle(enum.Enum):
    """An object's lifecycle: evicted (no instance) → constructing → active → evicted."""

    EVICTED = "evicted"
    CONSTRUCTING = "constructing"
    ACTIVE = "active"


class ObjectHost:
    """Owns one object: its instance, storage connection, in-flight events and sockets."""

    def __init__(
        self,
        kind: ObjectClass,
        object_id: DurableObjectId,
        services: HostServices,
        forget: Callable[[ObjectHost], None],
    ) -> None:
        self.kind = kind
        self._services = services
        self._forget = forget
        self.id: DurableObjectId = object_id
        self.hex_id = str(object_id)
        self.state = Lifecycle.EVICTED
        self.instance: Any = None
        self.storage: ObjectStorage | None = None
        self.ctx: DurableObjectState | None = None
        self.generation = 0
        self.inflight = 0
        self.last_activity = services.clock.now()
        self.sockets = SocketRegistry(self)
        self._events: dict[asyncio.Task[Any], int] = {}
        self._quiet: asyncio.Event | None = None
        self._wait_until: set[asyncio.Task[Any]] = set()
        self._blockers: list[asyncio.Task[Any]] = []
        self._reset_reason: dict[asyncio.Task[Any], ObjectResetError] = {}
        self.last_reset: ObjectResetError | None = None
        # Eviction bookkeeping (owned by doemu.objects.eviction).
        self.idle_deadline: float | None = None
        self.in_idle_heap = False
        #: A test hook (doemu.testing's chaos mode sets it at activation): wraps each event's
        #: awaitable so a reset can be injected at its awaits. None outside chaos tests.
        self.interpose: Callable[[Awaitable[Any]], Awaitable[Any]] | None = None

    # -- introspection ----------------------------------------------------------------------
    @property
    def key(self) -> tuple[str, str]:
        return (self.kind.unique_key, self.hex_id)

    @property
    def live(self) -> bool:
        return self.state is not Lifecycle.EVICTED

    @property
    def busy(self) -> bool:
        """True while something keeps the object in memory (an event, waitUntil, a bCW)."""
        return bool(self.inflight or self._wait_until or self._blockers or self.sockets.pinning)

    # -- activation -------------------------------------------------------------------------
    def _activate(self) -> None:
        kind = self.kind
        cls = kind.cls
        services = self._services
        storage = services.open_storage(
            object_file(kind.directory, self.hex_id),
            sql_enabled=kind.spec.sql,
            # A Python class always may: the SDK's JavaScript wrapper of every Durable Object
            # class defines alarm(), which fails when it fires and the class has none (observed
            # on workerd: setAlarm works, then "TypeError: Method alarm does not exist" is logged
            # and retried; see AlarmService._deliver).
            has_alarm_handler=True,
            on_alarm_commit=self._on_alarm_commit,
            on_alarm_prepare=self._on_alarm_prepare,
            on_commit_failed=self._on_commit_failed,
            # An async transaction() holds the input gate, as on workerd.
            exclusive=self.block_concurrency_while,
        )
        try:
            stored_name = storage.get_meta("name")
            if self.id.name is None and isinstance(stored_name, str):
                self.id.name = stored_name
            elif self.id.name is not None and stored_name != self.id.name:
                # Committed with the first turn's writes (one commit, one fsync, not two).
                storage.set_meta("name", self.id.name)
        except BaseException:
            storage.close()
            raise
        self.storage = storage
        self.ctx = DurableObjectState(self, DurableObjectStorage(storage))
        self.state = Lifecycle.CONSTRUCTING
        token = current_host.set(self)
        try:
            self.instance = cls(self.ctx, services.env)
        except BaseException:
            self._teardown(commit=False)
            raise
        finally:
            current_host.reset(token)
        check_constructed(self.instance)
        self.state = Lifecycle.ACTIVE
        services.activated(self)
        services.emit("constructed", binding=kind.binding, id=self.hex_id, name=self.id.name)

    async def _ready(self) -> None:
        """Activate if needed and wait until no blockConcurrencyWhile callback is running."""
        while True:
            if self.state is Lifecycle.EVICTED:
                try:
                    self._activate()
                except FileClosing as closing:  # the last instance's file is being closed
                    await closing.wait()
                    continue
            if not self._blockers:
                return
            blocker = self._blockers[-1]
            if blocker is asyncio.current_task():
                return
            await asyncio.wait([blocker])

    # -- events -----------------------------------------------------------------------------
    async def call(self, kind: str, fn: Callable[[Any], Any]) -> Any:
        """Deliver one event: ``fn(instance)`` (sync or async) under the object's gates.

        The handler runs in the caller's task (no task per event: this is the hot path). A reset
        cancels every task with an event in flight here; the cancellation surfaces at the
        handler's innermost await, is caught below, and reaches the caller as the reset's
        :class:`ObjectResetError` — so a caller that is itself another object's event sees an
        error from the call, not a cancellation of its own work.
        """
        services = self._services
        if services.closed:
            raise ObjectResetError("The doemu runtime is shutting down.")
        if kind != "alarm" and services.preempting():
            await asyncio.sleep(0)  # due alarm deliveries first (see AlarmScheduler.preempting)
        task = asyncio.current_task()
        assert task is not None
        events = self._events
        events[task] = events.get(task, 0) + 1
        self.inflight += 1
        token = current_host.set(self)
        storage: ObjectStorage | None = None
        try:
            await self._ready()
            storage = self.storage
            result = fn(self.instance)
            if inspect.isawaitable(result):
                if self.interpose is not None:
                    result = self.interpose(result)
                result = await result
        except asyncio.CancelledError:
            reset = self._reset_reason.pop(task, None)
            if reset is None:
                raise
            task.uncancel()
            raise type(reset)(reset.reason) from None
        except DurableObjectAbort as abort:
            # ctx.abort() in this object's code: the object is reset already; what reaches the
            # caller is the reset's error, as from any other reset.
            self._raise_if_reset(task)
            raise ObjectResetError(abort.reason) from None
        except Exception:
            self._raise_if_reset(task)
            if storage is not None and storage is self.storage:
                storage.commit()  # writes before the raise are kept, and durable before the error
                await self._leave(storage, task)
            raise
        else:
            # A handler that swallowed the reset's cancellation must not report success.
            self._raise_if_reset(task)
            if storage is not None and storage is self.storage:
                storage.commit()  # output gate: durable before anything leaves the object
                await self._leave(storage, task)
            return result
        finally:
            current_host.reset(token)
            count = events.pop(task, 1) - 1
            if count:
                events[task] = count
            else:
                self._reset_reason.pop(task, None)
            self.inflight -= 1
            self.last_activity = services.clock.now()
            if not self.busy:
                self._settled()

    def _raise_if_reset(self, task: asyncio.Task[Any]) -> None:
        reset = self._reset_reason.pop(task, None)
        if reset is not None:
            if task.cancelling():
                task.uncancel()
            raise type(reset)(reset.reason)

    def _settled(self) -> None:
        """Nothing is in flight any more: start the idle window (or forget a dead host)."""
        if self.live:
            self._services.idle(self)
        else:
            self._forget(self)  # reset while events were in flight
        if self._quiet is not None:
            self._quiet.set()

    def output_barrier(self, *, hold: bool = True) -> asyncio.Future[None] | None:
        """The output gate, before a frame, a stream chunk or a call leaves the object: commit
        pending writes now and return what the output must wait for (None: nothing). See
        :meth:`ObjectStorage.barrier` for ``hold``."""
        storage = self.storage
        if storage is None:
            return None
        storage.commit()
        return storage.barrier(hold=hold)

    async def _leave(self, storage: ObjectStorage, task: asyncio.Task[Any]) -> None:
        """Before an event's result (or error) leaves: wait for the output gate, if it holds."""
        barrier = storage.barrier()
        if barrier is None:
            return
        try:
            await barrier
        except asyncio.CancelledError:
            self._raise_if_reset(task)
            raise

    # -- waitUntil / blockConcurrencyWhile ----------------------------------------------------
    def wait_until(self, awaitable: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(awaitable)
        self._wait_until.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._wait_until.discard(t)
            if not t.cancelled() and not isinstance(t.exception(), DurableObjectAbort | None):
                _log.error("waitUntil task of %s failed", self.hex_id, exc_info=t.exception())
            if not self.busy:
                self._settled()

        task.add_done_callback(done)

    def block_concurrency_while(self, fn: Callable[[], Any]) -> Awaitable[Any]:
        loop = asyncio.get_running_loop()
        held = holding.get()
        if held is not None and held[0] is self:
            # Nested critical section (as workerd allows): the outer one already holds the gate,
            # so it runs at once, however deep, up to workerd's limit.
            depth = held[1] + 1
            if depth > MAX_BLOCK_CONCURRENCY_NESTING:
                self.reset(BLOCK_CONCURRENCY_NESTING_MESSAGE)
                raise ObjectResetError(BLOCK_CONCURRENCY_NESTING_MESSAGE)
            context = contextvars.copy_context()
            context.run(holding.set, (self, depth))
            return loop.create_task(run_inline(fn), context=context)
        generation = self.generation
        previous = list(self._blockers)

        async def runner() -> Any:
            current_host.set(self)
            holding.set((self, 1))
            if previous:
                await asyncio.wait(previous)
            result = fn()
            if inspect.isawaitable(result):
                result = await result
            return result

        task = loop.create_task(runner())
        self._blockers.append(task)
        clock = self._services.clock
        timer: TimerHandle = clock.call_at(
            clock.now() + BLOCK_CONCURRENCY_TIMEOUT_MS,
            lambda: self._block_timeout(task, generation),
        )

        def done(t: asyncio.Task[Any]) -> None:
            timer.cancel()
            if t in self._blockers:
                self._blockers.remove(t)
            if generation == self.generation and not t.cancelled() and t.exception() is not None:
                # Cloudflare resets an object whose blockConcurrencyWhile callback throws.
                self.reset(f"blockConcurrencyWhile() callback failed: {t.exception()}")
            if not self.busy:
                self._settled()

        task.add_done_callback(done)
        return ResetAware(task, lambda: self.last_reset)

    def _block_timeout(self, task: asyncio.Task[Any], generation: int) -> None:
        if task.done() or generation != self.generation:
            return
        self.reset(BLOCK_CONCURRENCY_TIMEOUT_MESSAGE, error=BlockConcurrencyTimeoutError)

    # -- reset / abort / eviction ------------------------------------------------------------
    def abort(self, reason: str | None) -> NoReturn:
        """``ctx.abort()``: reset the object, then end the calling code with a
        :class:`DurableObjectAbort` (a ``BaseException``: ``except Exception:`` cannot catch it)."""
        message = reason if reason is not None else _DEFAULT_ABORT_REASON
        self.reset(message)
        raise DurableObjectAbort(reason or _ABORT_REQUESTED)

    def reset(self, reason: str, *, error: type[ObjectResetError] = ObjectResetError) -> None:
        """Drop the instance and uncommitted writes; in-flight callers get ``reason``."""
        if self.state is Lifecycle.EVICTED and not (self._events or self._blockers):
            return
        exc = error(reason)
        self.last_reset = exc
        current = asyncio.current_task()
        for task in list(self._events):
            self._reset_reason[task] = exc
            if task is not current:
                task.cancel()
        for task in [*self._blockers, *self._wait_until]:
            if task is not current:
                task.cancel()
        self._blockers.clear()
        self._wait_until.clear()
        self._teardown(commit=False)
        self._services.emit("reset", binding=self.kind.binding, id=self.hex_id, reason=reason)

    def evict_now(self) -> None:
        """Drop the instance (graceful: pending writes are committed). Sockets stay connected."""
        if self.state is Lifecycle.EVICTED:
            return
        self._teardown(commit=True)
        self._services.emit("evicted", binding=self.kind.binding, id=self.hex_id, name=self.id.name)

    async def evict(self) -> bool:
        """Graceful eviction: wait for in-flight work to drain, then drop the instance.

        An object pinned by a socket it handles itself (``server.accept()``) cannot hibernate
        that socket, so it is left live; returns whether the object was evicted.
        """
        while self.inflight or self._wait_until or self._blockers:
            if self._quiet is None:
                self._quiet = asyncio.Event()
            self._quiet.clear()
            await self._quiet.wait()
        if self.sockets.pinning:
            _log.info("not evicting %s: a non-hibernatable WebSocket pins it", self.hex_id)
            return False
        was_live = self.live
        self.evict_now()
        return was_live

    def _teardown(self, *, commit: bool) -> None:
        storage = self.storage
        if storage is not None:
            if not commit:
                storage.rollback()
            storage.close()
        self.storage = None
        self.ctx = None
        self.instance = None
        self.state = Lifecycle.EVICTED
        self.generation += 1
        self._services.deactivated(self)
        if not self.busy:
            self._settled()

    # -- what the socket registry needs (see doemu.sockets.registry.SocketOwner) ------------------
    def now(self) -> float:
        return self._services.clock.now()

    def track(self, task: asyncio.Task[Any]) -> None:
        self._services.track(task)

    def unpinned(self) -> None:
        if not self.busy and self.live:
            self._services.idle(self)

    def _on_alarm_commit(self, when: float | None) -> None:
        self._services.alarm_committed(self.key, when, self.id.name)

    def _on_alarm_prepare(self, when: float | None) -> asyncio.Future[None] | None:
        return self._services.alarm_prepared(self.key, when, self.id.name)

    def _on_commit_failed(self, error: BaseException) -> None:
        """A commit at the end of a turn, or its fsync, failed: the writes are gone (or may be).

        As workerd breaks the output gate, the object is reset: events in flight fail with the
        error, so a handler that went on after the failed turn cannot report success.
        """
        self.reset(f"Durable Object storage failed, so the object was reset: {error}")
