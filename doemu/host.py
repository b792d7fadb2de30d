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
import enum
import inspect
import logging
import math
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, NoReturn

from .alarms import MAX_ALARM_RETRIES, AlarmInfo, retry_delay_ms
from .clock import TimerHandle
from .compat import as_js_buffer, call_relaxed
from .context import DurableObjectState
from .errors import BlockConcurrencyTimeoutError, ObjectResetError
from .hibernation import SocketRegistry
from .ids import DurableObjectId
from .socket_events import SocketEvent, collector
from .storage import ObjectStorage

if TYPE_CHECKING:
    from .runtime import Namespace

__all__ = [
    "BLOCK_CONCURRENCY_TIMEOUT_MESSAGE",
    "BLOCK_CONCURRENCY_TIMEOUT_MS",
    "Lifecycle",
    "ObjectHost",
    "current_host",
]

_log = logging.getLogger("doemu.host")

BLOCK_CONCURRENCY_TIMEOUT_MS = 30_000
BLOCK_CONCURRENCY_TIMEOUT_MESSAGE = (
    "A call to blockConcurrencyWhile() in a Durable Object waited for too long. "
    "The call was canceled and the Durable Object was reset."
)
_DEFAULT_ABORT_REASON = "Durable Object was aborted by ctx.abort()."

#: The host whose event is running in the current task (used by stubs for the output gate).
current_host: ContextVar[ObjectHost | None] = ContextVar("doemu_current_host", default=None)


class Lifecycle(enum.Enum):
    """An object's lifecycle: evicted (no instance) → constructing → active → evicted."""

    EVICTED = "evicted"
    CONSTRUCTING = "constructing"
    ACTIVE = "active"


class ObjectHost:
    """Owns one object: its instance, storage connection, in-flight events and sockets."""

    def __init__(self, namespace: Namespace, object_id: DurableObjectId) -> None:
        self.namespace = namespace
        self.runtime = namespace.runtime
        self.id: DurableObjectId = object_id
        self.hex_id = str(object_id)
        self.state = Lifecycle.EVICTED
        self.instance: Any = None
        self.storage: ObjectStorage | None = None
        self.ctx: DurableObjectState | None = None
        self.generation = 0
        self.inflight = 0
        self.last_activity = self.runtime.clock.now()
        self.sockets = SocketRegistry(self)
        self._events: dict[asyncio.Task[Any], int] = {}
        self._quiet: asyncio.Event | None = None
        self._wait_until: set[asyncio.Task[Any]] = set()
        self._blockers: list[asyncio.Task[Any]] = []
        self._reset_reason: dict[asyncio.Task[Any], ObjectResetError] = {}
        self.last_reset: ObjectResetError | None = None
        # Eviction bookkeeping (owned by doemu.eviction).
        self.idle_deadline: float | None = None
        self.in_idle_heap = False

    # -- introspection ----------------------------------------------------------------------
    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace.unique_key, self.hex_id)

    @property
    def live(self) -> bool:
        return self.state is not Lifecycle.EVICTED

    @property
    def busy(self) -> bool:
        """True while something keeps the object in memory (an event, waitUntil, a bCW)."""
        return bool(self.inflight or self._wait_until or self._blockers or self.sockets.pinning)

    # -- activation -------------------------------------------------------------------------
    def _activate(self) -> None:
        ns = self.namespace
        cls = ns.cls
        storage = ObjectStorage(
            ns.object_path(self.hex_id),
            clock=self.runtime.clock,
            sql_enabled=ns.sql_enabled,
            limits=self.runtime.limits,
            has_alarm_handler=callable(getattr(cls, "alarm", None)),
            on_alarm_commit=self._on_alarm_commit,
            # An async transaction() holds the input gate, as on workerd.
            exclusive=self.block_concurrency_while,
            files=self.runtime.files,
        )
        try:
            stored_name = storage.get_meta("name")
            if self.id.name is None and isinstance(stored_name, str):
                self.id.name = stored_name
            elif self.id.name is not None and stored_name != self.id.name:
                storage.set_meta("name", self.id.name)
                storage.commit()
        except BaseException:
            storage.close()
            raise
        self.storage = storage
        self.ctx = DurableObjectState(self, storage)
        self.state = Lifecycle.CONSTRUCTING
        token = current_host.set(self)
        try:
            self.instance = cls(self.ctx, ns.runtime.env)
        except BaseException:
            self._teardown(commit=False)
            raise
        finally:
            current_host.reset(token)
        self.state = Lifecycle.ACTIVE
        self.runtime.eviction.activated(self)
        self.runtime.events.emit(
            "constructed", binding=ns.binding, id=self.hex_id, name=self.id.name
        )

    async def _ready(self) -> None:
        """Activate if needed and wait until no blockConcurrencyWhile callback is running."""
        while True:
            if self.state is Lifecycle.EVICTED:
                self._activate()
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
        runtime = self.runtime
        if runtime.closed:
            raise ObjectResetError("The doemu runtime is shutting down.")
        if kind != "alarm" and runtime.scheduler.preempting():
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
                result = await result
        except asyncio.CancelledError:
            reset = self._reset_reason.pop(task, None)
            if reset is None:
                raise
            task.uncancel()
            raise type(reset)(reset.reason) from None
        except Exception:
            self._raise_if_reset(task)
            if storage is not None and storage is self.storage:
                storage.commit()  # writes before the raise are kept, and durable before the error
            raise
        else:
            # A handler that swallowed the reset's cancellation must not report success.
            self._raise_if_reset(task)
            if storage is not None and storage is self.storage:
                storage.commit()  # output gate: durable before anything leaves the object
            return result
        finally:
            current_host.reset(token)
            count = events.pop(task, 1) - 1
            if count:
                events[task] = count
            else:
                self._reset_reason.pop(task, None)
            self.inflight -= 1
            self.last_activity = self.runtime.clock.now()
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
            self.runtime.eviction.idle(self)
        else:
            self.namespace.forget(self)  # reset while events were in flight
        if self._quiet is not None:
            self._quiet.set()

    def output_gate(self) -> None:
        """Commit pending writes now (before a WebSocket send or a call to another object)."""
        if self.storage is not None:
            self.storage.commit()

    # -- waitUntil / blockConcurrencyWhile ----------------------------------------------------
    def wait_until(self, awaitable: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(awaitable)
        self._wait_until.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._wait_until.discard(t)
            if not t.cancelled() and t.exception() is not None:
                _log.error("waitUntil task of %s failed", self.hex_id, exc_info=t.exception())
            if not self.busy:
                self._settled()

        task.add_done_callback(done)

    def block_concurrency_while(self, fn: Callable[[], Any]) -> Awaitable[Any]:
        loop = asyncio.get_running_loop()
        if asyncio.current_task() in self._blockers:
            # Nested critical section (as workerd allows): the outer one already holds the gate.
            return loop.create_task(_run_inline(fn))
        generation = self.generation
        previous = list(self._blockers)

        async def runner() -> Any:
            current_host.set(self)
            if previous:
                await asyncio.wait(previous)
            result = fn()
            if inspect.isawaitable(result):
                result = await result
            return result

        task = loop.create_task(runner())
        self._blockers.append(task)
        clock = self.runtime.clock
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
        return _ResetAware(task, self)

    def _block_timeout(self, task: asyncio.Task[Any], generation: int) -> None:
        if task.done() or generation != self.generation:
            return
        self.reset(BLOCK_CONCURRENCY_TIMEOUT_MESSAGE, error=BlockConcurrencyTimeoutError)

    # -- reset / abort / eviction ------------------------------------------------------------
    def abort(self, reason: str | None) -> NoReturn:
        message = reason if reason is not None else _DEFAULT_ABORT_REASON
        self.reset(message)
        raise ObjectResetError(message)

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
        self.runtime.events.emit(
            "reset", binding=self.namespace.binding, id=self.hex_id, reason=reason
        )

    def evict_now(self) -> None:
        """Drop the instance (graceful: pending writes are committed). Sockets stay connected."""
        if self.state is Lifecycle.EVICTED:
            return
        self._teardown(commit=True)
        self.runtime.events.emit(
            "evicted", binding=self.namespace.binding, id=self.hex_id, name=self.id.name
        )

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
        self.runtime.eviction.deactivated(self)
        if not self.busy:
            self._settled()

    # -- hibernatable WebSocket events ------------------------------------------------------------
    def deliver_socket_message(self, ws: Any, message: str | bytes) -> None:
        """A frame arrived for a hibernatable socket: auto-respond, or wake the object."""
        pair = self.sockets.auto_response
        if pair is not None and isinstance(message, str) and message == pair.request:
            peer = getattr(ws, "_peer", None)
            if peer is not None:
                peer._receive(pair.response)  # answered without waking the object
            self.sockets.note_auto_response(ws, self.runtime.clock.now())
            return
        data = as_js_buffer(message) if isinstance(message, bytes) else message
        self._spawn_socket_event(
            "webSocketMessage", lambda inst: call_relaxed(inst.webSocketMessage, ws, data)
        )

    def deliver_socket_close(self, ws: Any, code: int, reason: str, was_clean: bool) -> None:
        self.sockets.remove(ws)  # gone even if the handler (or the constructor) fails

        def run(inst: Any) -> Any:
            handler = getattr(inst, "webSocketClose", None)
            return None if handler is None else call_relaxed(handler, ws, code, reason, was_clean)

        self._spawn_socket_event("webSocketClose", run)

    def deliver_socket_error(self, ws: Any, error: BaseException) -> None:
        self.sockets.remove(ws)

        def run(inst: Any) -> Any:
            handler = getattr(inst, "webSocketError", None)
            return None if handler is None else call_relaxed(handler, ws, error)

        self._spawn_socket_event("webSocketError", run)

    def _spawn_socket_event(self, kind: str, fn: Callable[[Any], Any]) -> None:
        """Start a socket event: eagerly while the server hands over a network frame, else a task.

        During :func:`collect_socket_events` the event is handed back to the server, which runs
        the handler's first step in its own task right away (see :class:`SocketEvent`); anywhere
        else (a pair whose both ends live in-process) it becomes a task, so user code never
        re-enters another handler from inside ``send()``.
        """
        coro = self._socket_event(kind, fn, self.sockets.order.arrive(), self.last_reset)
        collected = collector()
        if collected is not None:
            collected.append(SocketEvent(self, coro))
            return
        task = asyncio.get_running_loop().create_task(coro)
        self.runtime.track(task)

    async def _socket_event(
        self,
        kind: str,
        fn: Callable[[Any], Any],
        turn: asyncio.Future[None] | None,
        reset_before: ObjectResetError | None,
    ) -> None:
        """One socket event under the object's gates, started in arrival order; logs errors."""
        order = self.sockets.order
        holding = True  # this event holds its turn until the handler starts

        def start(instance: Any) -> Any:
            nonlocal holding
            holding = False
            order.started()
            return fn(instance)

        try:
            if turn is not None:
                try:
                    await turn
                except BaseException:
                    holding = False
                    order.leave(turn)
                    raise
                reset = self.last_reset
                if reset is not reset_before and reset is not None:
                    # The object was reset while this event queued behind an earlier one at its
                    # gate: it fails like the events that were waiting inside the gate.
                    raise type(reset)(reset.reason)
            await self.call(kind, start)
        except Exception:
            _log.exception("%s handler of %s raised", kind, self.hex_id)
        finally:
            if holding:  # ended (constructor failure, reset) without starting the handler
                order.started()

    # -- alarms -------------------------------------------------------------------------------
    def _on_alarm_commit(self, when: float | None) -> None:
        self.runtime.alarm_committed(self, when)

    async def deliver_alarm(self, scheduled: float) -> None:
        """Run the ``alarm`` handler for an alarm due at ``scheduled`` (called by the scheduler)."""
        runtime = self.runtime
        retry_count = runtime.alarm_retry_count(self.key, scheduled)
        info = AlarmInfo(retry_count, retry_count > 0, scheduled)
        outcome: dict[str, Any] = {}

        def handler(instance: Any) -> Any:
            storage = self.storage
            assert storage is not None
            stored = storage.alarm_time()
            if stored is None:
                outcome["skipped"] = True  # deleted since it was scheduled
                return None
            if stored > runtime.clock.now():
                # Moved later (or the clock stepped back): keep it scheduled, never drop it.
                outcome["skipped"] = True
                runtime.scheduler.set(self.key, stored)
                return None
            storage.begin_alarm_delivery(stored)
            outcome["storage"] = storage
            method = getattr(instance, "alarm", None)
            if method is None:
                return None
            return call_relaxed(method, info)

        try:
            await self.call("alarm", handler)
        except Exception as exc:
            # A reset of this object (or an error from an object it called) is a failed
            # delivery like any other: the alarm is retried, never silently dropped.
            self._alarm_failed(info, exc, outcome.get("storage"))
            return
        if outcome.get("skipped"):
            return
        storage = self.storage
        delivered: ObjectStorage | None = outcome.get("storage")
        if storage is not None and storage is delivered:
            if not storage.end_alarm_delivery(success=True):
                storage.commit()
        runtime.alarm_succeeded(self.key)
        runtime.events.emit(
            "alarm.fired", binding=self.namespace.binding, id=self.hex_id, retryCount=retry_count
        )

    def _alarm_failed(
        self, info: AlarmInfo, exc: BaseException, delivered_on: ObjectStorage | None
    ) -> None:
        runtime = self.runtime
        storage = self.storage
        if storage is None or storage is not delivered_on:
            # The constructor failed, or the object was reset mid-handler: retry as failed.
            storage_touched = False
        else:
            storage_touched = storage.end_alarm_delivery(success=False)
        binding = self.namespace.binding
        if storage_touched:
            runtime.alarm_succeeded(self.key)  # setAlarm inside the handler cancels the retry
            return
        if info.retryCount >= MAX_ALARM_RETRIES:
            _log.error("alarm of %s failed after %d retries; dropped", self.hex_id, info.retryCount)
            runtime.drop_alarm(self)
            runtime.events.emit("alarm.dropped", binding=binding, id=self.hex_id, error=str(exc))
            return
        # Whole milliseconds, as every stored alarm time is (the alarm table stores integers).
        delay = retry_delay_ms(info.retryCount, runtime.rng)
        retry_at = float(math.ceil(runtime.clock.now() + delay))
        _log.warning(
            "alarm of %s raised %r; retry %d in %.1f s",
            self.hex_id,
            exc,
            info.retryCount + 1,
            (retry_at - runtime.clock.now()) / 1000,
        )
        runtime.schedule_alarm_retry(self, retry_at, info.retryCount + 1)
        runtime.events.emit(
            "alarm.retried",
            binding=binding,
            id=self.hex_id,
            retryCount=info.retryCount + 1,
            retryAt=retry_at,
            error=str(exc),
        )


class _ResetAware:
    """Awaitable for blockConcurrencyWhile: a reset surfaces as ObjectResetError, not cancel."""

    __slots__ = ("_host", "_task")

    def __init__(self, task: asyncio.Task[Any], host: ObjectHost) -> None:
        self._task = task
        self._host = host

    def __await__(self) -> Any:
        try:
            return (yield from self._task.__await__())
        except asyncio.CancelledError:
            if self._task.cancelled() and not _self_cancelled():
                reset = self._host.last_reset or ObjectResetError("Durable Object was reset.")
                raise type(reset)(reset.reason) from None
            raise


async def _run_inline(fn: Callable[[], Any]) -> Any:
    result = fn()
    if inspect.isawaitable(result):
        result = await result
    return result


def _self_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
