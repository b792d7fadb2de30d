"""``Agent``: the public façade of a durable agent, composed of one object per feature.

Public methods delegate to feature objects built in ``__init__`` (all the wiring is there); the
``on_*`` hooks live here with their defaults, for subclasses to override. Features never import
this module: they see the agent through the protocols of :mod:`agents.core.host`.

* **Activation.** The constructor runs :meth:`Agent._start` inside ``blockConcurrencyWhile``: the
  schema is ensured, the fiber-recovery scan runs, then ``on_start()``, then queued work left by
  an eviction is resumed — all before any other event is delivered.
* **``on_start(props)``.** An ``on_start`` that takes a parameter receives the ``props`` a
  Worker passed to ``route_agent_request(..., props=...)`` (or ``get_agent_by_name``). Props
  travel with the request, so such an ``on_start`` runs lazily, as the SDK's does: on the first
  fetch, WebSocket event or alarm of the activation, under ``blockConcurrencyWhile``. An
  ``on_start(self)`` without parameters keeps running at activation, before any event.
* **One alarm for everything.** :meth:`alarm` asks the features for due work in turn (schedules,
  then fiber recovery), then re-arms for the earliest of their ``next_wakeup`` answers.
* **Destroy.** :meth:`destroy` deletes every table, the alarm and all storage, then resets the
  object. :meth:`schedule_destroy` writes a durable marker and lets the alarm do it; a teardown
  cut short (a kill) is finished by the next activation, before anything else runs.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, ClassVar, TypeVar, cast

from workers import DurableObject, Response

from .core.connections import Connection, ConnectionContext, ConnectionSet
from .core.host import AgentCore
from .core.protocol import dumps, mcp_servers_frame
from .core.schema import ensure_schema
from .core.sql import query_rows
from .core.state import StateSource, StateStore
from .core.websockets import WebSockets
from .current import agent_context, get_current_agent
from .fibers.ledger import FiberLedger, FiberRecord
from .fibers.managed import ManagedFibers, ManagedFn, StatusFilter
from .fibers.recovery import FiberRecovery
from .fibers.runs import FiberFn, FiberRuns
from .fibers.types import FiberRecoveryContext, FiberResolution
from .keepalive import Heartbeat, KeepAlive
from .lifecycle import Lifecycle
from .mcp.callback import callback_url
from .mcp.manager import SCHEMA as MCP_SCHEMA
from .mcp.manager import McpClientManager
from .observability import Observability, agent_event, generic_observability
from .ops import (
    Operation,
    OperationFn,
    OperationLedger,
    OperationOutcome,
    OperationRecord,
)
from .options import AgentOptions
from .queue import Queue, QueueItem
from .retry import RetrySpec
from .retry import retry as retry_call
from .rpc import CallableMetadata, Rpc, callable_methods
from .schedules.scheduler import Scheduler
from .schedules.types import Schedule
from .usage import ModelPrices, UsageEntry, UsageLedger, UsageTotals

__all__ = ["Agent"]

T = TypeVar("T")

_log = logging.getLogger("agents.agent")

#: Every feature's tables, in a fixed order (the schema digest covers the order too).
SCHEMA: tuple[str, ...] = (
    *StateStore.SCHEMA,
    *Scheduler.SCHEMA,
    *Queue.SCHEMA,
    *FiberRuns.SCHEMA,
    *FiberRecovery.SCHEMA,
    *FiberLedger.SCHEMA,
    *OperationLedger.SCHEMA,
    *UsageLedger.SCHEMA,
    *MCP_SCHEMA,
)


class Agent(DurableObject):
    """Base class for durable agents; subclass it and override the ``on_*`` hooks.

    ``_core``, ``_state``, ``_schedules``, ``_queue``, ``_fibers``, … are the framework's feature
    objects: a subclass must not reuse these names."""

    options: ClassVar[AgentOptions] = AgentOptions()
    #: Where this agent's events go (:mod:`agents.observability`); None: nowhere.
    observability: ClassVar[Observability | None] = generic_observability
    #: The state an agent starts with (``None``: no initial state). Copied, never shared.
    initial_state: ClassVar[Any] = None
    #: model → (USD per million input tokens, USD per million output tokens), e.g.
    #: ``{"gpt-4o": (2.5, 10.0)}``; calls to other models are recorded unpriced.
    model_prices: ClassVar[ModelPrices] = {}

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        core = self._core = AgentCore(ctx, self)
        self._heartbeat = Heartbeat(core, self)
        self._connections = ConnectionSet(ctx)
        self._state = StateStore(core, self, self._connections.broadcast_state)
        self._rpc = Rpc(self)
        self._websockets = WebSockets(core, self, self._connections, self._state, self._rpc.handle)
        self._schedules = Scheduler(core, self)
        self._queue = Queue(core, self)
        self._fiber_runs = FiberRuns(core, self.keep_alive)
        fiber_ledger = FiberLedger(core)
        self._recovery = FiberRecovery(core, self, self._fiber_runs, fiber_ledger)
        self._fibers = ManagedFibers(core, self, self._fiber_runs, fiber_ledger, self._recovery)
        self._operations = OperationLedger(core)
        self._usage = UsageLedger(core, lambda: self.model_prices)
        #: The MCP client (the SDK's ``this.mcp``): see :meth:`add_mcp_server`.
        self.mcp = McpClientManager(core, self._broadcast_mcp)
        core.add_wakeup_sources(self._schedules, self._heartbeat, self._recovery)
        self._lifecycle = Lifecycle(core, self.on_start, self._run_on_start)
        ctx.blockConcurrencyWhile(self._start)

    # -- lifecycle ------------------------------------------------------------------------------
    async def _start(self) -> None:
        if await self._lifecycle.pending():  # a teardown was cut short: finish it first
            _log.warning("agent %s: finishing an interrupted destroy()", self.name)
            await self._destroy()
            return
        ensure_schema(self._core.sql, SCHEMA)
        with agent_context(self):
            self.mcp.restore()  # the SDK's order: MCP connections, then fibers, then on_start
            await self._recovery.scan()
            if not self._lifecycle.lazy:
                await self._call_on_start(())
                self._lifecycle.user_started = True
            self._core.started = True
            if not self._lifecycle.lazy:
                self._queue.resume()
            self._core.schedule_next_alarm()
            self._after_start()

    async def _call_on_start(self, args: tuple[Any, ...]) -> None:
        """``on_start(*args)``, sync or async (a plain ``def on_start`` is fine, as in the TS
        SDK); a failure is logged with its traceback before it abandons the activation."""
        try:
            started = cast(Any, self.on_start)(*args)
            if inspect.isawaitable(started):
                await started
        except Exception:
            # The activation fails (every request to this instance answers an error until the
            # next one); the reason must not be lost with it.
            _log.exception("agent %s: on_start failed; the activation is abandoned", self.name)
            raise

    async def _run_on_start(self, props: Any) -> None:
        """The lazy ``on_start(props)`` (see :mod:`agents.lifecycle`), then the queue's resume."""
        with agent_context(self):
            await self._call_on_start((props,))  # an override that takes props (takes_props)
            self._queue.resume()

    def _after_start(self) -> None:
        """Framework hook: the activation has started (work a subclass resumes by itself)."""

    async def on_start(self) -> None:
        """Called once per activation, after fiber recovery, before the events it gates (may be a
        plain ``def``).

        Override as ``async def on_start(self)`` to run at activation, before any event; or as
        ``async def on_start(self, props)`` to receive the props a Worker routed with
        (``route_agent_request(..., props=...)``; ``None`` when the waking event had none),
        which runs on the activation's first fetch, WebSocket event or alarm."""

    async def ensure_started(self, props: Any = None) -> None:
        """Run a lazy ``on_start(props)`` now if it has not run in this activation (what
        ``get_agent_by_name`` calls before native RPC, which carries no props by itself)."""
        await self._lifecycle.ensure_started(props)

    async def destroy(self) -> None:
        """Delete this agent: every table, the alarm and all storage; then reset the object.

        Durable from its first write: a durable marker is written before anything is deleted, so
        a teardown cut short by a kill is finished by the next activation. The next event to this
        name meets a brand-new agent."""
        await self._destroy()

    async def _destroy(self) -> None:
        self._core.started = False  # nothing re-arms the alarm from here on
        await self._lifecycle.tear_down()
        await self.mcp.close()
        self._emit("destroy")
        self._lifecycle.reset_soon()

    async def schedule_destroy(self) -> None:
        """Condemn this agent now and destroy it from its alarm a second later (the SDK's
        ``_cf_scheduleDestroy``): for a caller that must answer before the object goes away."""
        await self._lifecycle.schedule()

    async def on_error(self, error: BaseException, context: Any = None) -> None:
        """Called when framework-run user code fails (schedules, queue, connections)."""
        if context is None:
            _log.error("agent %s: %s", self.name, error, exc_info=error)
        else:
            _log.error("agent %s: %s (%s)", self.name, error, context, exc_info=error)

    def _emit(self, event_type: str, payload: dict[str, Any] | None = None) -> None:
        """An event (the SDK's ``_emit``) to :attr:`observability`; ``None`` silences the agent."""
        if self.observability is not None:
            event = agent_event(type(self).__name__, self.name, event_type, payload)
            self.observability.emit({**event, "timestamp": self._core.now()})

    @property
    def name(self) -> str:
        """The agent's instance name (the ``<name>`` in ``/agents/<class>/<name>``)."""
        name = getattr(self.ctx.id, "name", None)  # getattr: a nameless id raises on Cloudflare
        return str(name if name is not None else self.ctx.id)

    def sql(self, query: str, *params: Any) -> list[dict[str, Any]]:
        """Rows of ``query`` as plain dicts; every feature reads through here. Errors name it."""
        return query_rows(self.ctx.storage.sql, query, *params)

    # -- MCP servers ----------------------------------------------------------------------------
    async def add_mcp_server(
        self,
        name: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        id: str | None = None,
        callback_host: str | None = None,
        callback_path: str | None = None,
    ) -> dict[str, Any]:
        """Connect to the MCP server at ``url`` (streamable HTTP) and keep it across restarts.

        Answers ``{"id", "state"}`` (``"ready"``, or ``"failed"``: see ``get_mcp_servers()``
        for why), or ``{"id", "state": "authenticating", "authUrl"}`` when the server needs
        OAuth: send the user to ``authUrl``; the authorization server sends the browser back to
        ``<callback_host>/agents/<class>/<name>/callback`` (``callback_path`` replaces the path;
        the host defaults to the origin of the request being handled), where ``fetch`` trades
        the code for tokens (kept in SQLite) and connects. ``headers`` go with every request (a
        static bearer token: then no OAuth); they are stored with the server, as the SDK stores
        its transport options."""
        callback = callback_url(self, get_current_agent().request, callback_host, callback_path)
        return await self.mcp.add_server(
            name, url, headers=headers, server_id=id, callback_url=callback
        )

    async def remove_mcp_server(self, id: str) -> bool:
        """Disconnect and forget the server; False when there was none."""
        return await self.mcp.remove_server(id)

    def get_mcp_servers(self) -> dict[str, Any]:
        """The SDK's ``MCPServersState``: ``servers`` by id, their ``tools``, prompts, resources."""
        return self.mcp.state()

    def _mcp_state(self) -> dict[str, Any] | None:
        return self.mcp.state() if self.mcp.connections else None

    def _broadcast_mcp(self, state: dict[str, Any]) -> None:
        frame = dumps(mcp_servers_frame(state))
        for connection in self.get_connections():
            if connection.protocol_enabled:
                connection._send_quiet(frame)

    # -- the single alarm -----------------------------------------------------------------------
    async def alarm(self, alarm_info: Any = None) -> None:
        """Run everything that is due, then re-arm for the earliest pending wake-up.

        Re-armed only on success: a failing alarm is retried by the platform with back-off, which
        a ``setAlarm`` here would replace with one due "now" — a tight loop on a lasting error."""
        if self._lifecycle.destroyed:
            return
        if await self._lifecycle.pending():  # schedule_destroy(): the teardown is due
            await self._destroy()
            return
        with agent_context(self):
            await self._lifecycle.ensure_started()
            await self._run_due(self._core.now())
        self._core.schedule_next_alarm()

    async def _run_due(self, now: float) -> None:
        """The alarm's work, feature by feature: due schedules, then fiber recovery."""
        await self._schedules.run_due(now)
        await self._recovery.scan()

    # -- state ----------------------------------------------------------------------------------
    @property
    def state(self) -> Any:
        """The current state (``None`` when unset and there is no ``initial_state``)."""
        return self._state.value

    @property
    def has_state(self) -> bool:
        """Whether a state is set (after falling back to ``initial_state`` if there is one)."""
        return self._state.has_state

    def set_state(self, state: Any) -> asyncio.Future[None]:
        """Validate, persist and broadcast ``state`` now (synchronous: committed with this turn).

        Raises ``StateValidationError`` if ``validate_state_change`` refuses or the message came
        from a readonly connection. The future settles once ``on_state_changed`` has run."""
        return self._state.set(state)

    def validate_state_change(self, next_state: Any, source: StateSource) -> None:
        """Raise to refuse ``next_state`` (then nothing is persisted or broadcast). Synchronous."""

    def on_state_changed(self, state: Any, source: StateSource) -> Any:
        """Called after a change was persisted and broadcast (may be ``async``)."""

    # -- connections ----------------------------------------------------------------------------
    async def fetch(self, request: Any) -> Any:
        """An MCP server's OAuth redirect is the MCP client's (:mod:`agents.mcp.callback`); a
        WebSocket upgrade becomes a connection; anything else goes to ``on_request``."""
        props, request = self._lifecycle.take_props(request)
        with agent_context(self, request):
            await self._lifecycle.ensure_started(props)
            return await self.mcp.answer_callback(request, otherwise=self._websockets.fetch)

    async def webSocketMessage(self, ws: Any, message: Any) -> None:
        with agent_context(self):
            await self._lifecycle.ensure_started()
            await self._websockets.message(ws, message)

    async def webSocketClose(self, ws: Any, code: int, reason: str, was_clean: bool) -> None:
        with agent_context(self):
            await self._lifecycle.ensure_started()
            await self._websockets.close(ws, code, reason, was_clean)

    async def webSocketError(self, ws: Any, error: Any) -> None:
        with agent_context(self):
            await self._websockets.error(ws, error)

    async def on_request(self, request: Any) -> Any:
        """Handle a plain HTTP request to ``/agents/<class>/<name>``; the SDK answers 404."""
        return Response("Not implemented", status=404)

    async def on_connect(self, connection: Connection, ctx: ConnectionContext) -> None:
        """A client connected (its identity and state frames were already sent)."""

    async def on_message(self, connection: Connection, message: Any) -> None:
        """A frame that is not part of the protocol (not state, not ``rpc``)."""

    async def on_close(
        self, connection: Connection, code: int, reason: str, was_clean: bool
    ) -> None:
        """A client disconnected (``was_clean=False``: it vanished without a Close frame)."""

    def get_connection_tags(self, connection: Connection, ctx: ConnectionContext) -> list[str]:
        """Extra tags for a new connection (``get_connections(tag)`` selects by them)."""
        return []

    def should_connection_be_readonly(self, connection: Connection, ctx: ConnectionContext) -> bool:
        """Return True to refuse this connection's state updates (``cf_agent_state_error``)."""
        return False

    def should_send_protocol_messages(self, connection: Connection, ctx: ConnectionContext) -> bool:
        """Return False for clients that cannot take the JSON protocol frames (binary-only)."""
        return True

    # The framework's own layers (the chat layer overrides these; user code does not).
    def _before_connect_frames(self, connection: Connection) -> Any:
        return None

    def _handle_protocol_message(self, connection: Connection, message: Any) -> Any:
        return False

    def _handle_request(self, request: Any) -> Any:
        return None

    def _on_connection_closed(self, connection: Connection) -> Any:
        return None

    def _recover_internal_fiber(self, ctx: FiberRecoveryContext) -> Any:
        return False

    def set_connection_readonly(self, connection: Connection, readonly: bool = True) -> None:
        connection._set_flag("readonly", readonly)

    def is_connection_readonly(self, connection: Connection) -> bool:
        return connection.readonly

    def is_connection_protocol_enabled(self, connection: Connection) -> bool:
        return connection.protocol_enabled

    def get_connections(self, tag: str | None = None) -> list[Connection]:
        """Open connections, optionally only those carrying ``tag``."""
        return self._connections.get_connections(tag)

    def get_connection(self, connection_id: str) -> Connection | None:
        """The open connection with this id, or ``None``."""
        return self._connections.get_connection(connection_id)

    def broadcast(self, message: Any, without: Iterable[str] | None = None) -> None:
        """Send ``message`` (``dict``/``list`` as JSON) to all open connections but ``without``."""
        self._connections.broadcast(message, without)

    def get_callable_methods(self) -> dict[str, CallableMetadata]:
        """Every ``@callable()`` method of this agent's class, with its metadata."""
        return callable_methods(type(self))

    # -- schedules, queue, retry ----------------------------------------------------------------
    async def schedule(
        self,
        when: datetime | timedelta | float | str,
        callback: str | Callable[..., Any],
        payload: Any = None,
        *,
        retry: RetrySpec | None = None,
        idempotent: bool | None = None,
    ) -> Schedule:
        """Run ``callback`` once after ``when`` seconds / at a datetime, or on a cron string."""
        return await self._schedules.schedule(
            when, callback, payload, retry=retry, idempotent=idempotent
        )

    async def schedule_every(
        self,
        interval_seconds: float,
        callback: str | Callable[..., Any],
        payload: Any = None,
        *,
        retry: RetrySpec | None = None,
        idempotent: bool | None = None,
    ) -> Schedule:
        """Run ``callback`` every ``interval_seconds`` (first run one interval from now)."""
        return await self._schedules.schedule_every(
            interval_seconds, callback, payload, retry=retry, idempotent=idempotent
        )

    async def cancel_schedule(self, id: str) -> bool:
        """Delete the schedule; False when there was none. The alarm is recomputed."""
        return await self._schedules.cancel_schedule(id)

    def get_schedule(self, id: str) -> Schedule | None:
        """The schedule with this id, or None."""
        return self._schedules.get_schedule(id)

    def get_schedules(
        self,
        criteria: Mapping[str, Any] | None = None,
        *,
        id: str | None = None,
        type: str | None = None,
        time_range: Mapping[str, Any] | tuple[Any, Any] | None = None,
    ) -> list[Schedule]:
        """Schedules matching every filter (the SDK's ``{"id", "type", "timeRange"}`` too)."""
        return self._schedules.get_schedules(criteria, id=id, type=type, time_range=time_range)

    async def queue(
        self,
        callback: str | Callable[..., Any],
        payload: Any = None,
        *,
        retry: RetrySpec | None = None,
    ) -> str:
        """Persist a call of ``callback(payload, item)`` and process it in the background."""
        return await self._queue.queue(callback, payload, retry=retry)

    def dequeue(self, id: str) -> None:
        """Remove one pending item."""
        self._queue.dequeue(id)

    def dequeue_all(self) -> None:
        """Remove every pending item."""
        self._queue.dequeue_all()

    def dequeue_all_by_callback(self, callback: str) -> None:
        """Remove every pending item for ``callback``."""
        self._queue.dequeue_all_by_callback(callback)

    def get_queue(self, id: str) -> QueueItem | None:
        """The pending item with this id, or None."""
        return self._queue.get_queue(id)

    def get_queues(self, key: str, value: Any) -> list[QueueItem]:
        """Pending items whose (object) payload has ``payload[key] == value``, in order."""
        return self._queue.get_queues(key, value)

    async def retry(
        self,
        fn: Callable[..., Awaitable[T]] | Callable[..., T],
        *,
        max_attempts: int | None = None,
        base_delay_ms: int | None = None,
        max_delay_ms: int | None = None,
        should_retry: Callable[[BaseException, int], bool] | None = None,
    ) -> T:
        """Retry ``fn`` with full-jitter back-off, ``options.retry`` as defaults (agents.retry)."""
        result: T = await retry_call(
            fn,
            max_attempts=max_attempts,
            base_delay_ms=base_delay_ms,
            max_delay_ms=max_delay_ms,
            should_retry=should_retry,
            defaults=self.options.retry,
        )
        return result

    # -- keep-alive -----------------------------------------------------------------------------
    @property
    def keep_alive_refs(self) -> int:
        """How many ``keep_alive()`` references are held (never negative)."""
        return self._heartbeat.refs

    def keep_alive(self) -> KeepAlive:
        """Hold the object in memory until the returned disposer is called."""
        return self._heartbeat.keep_alive()

    async def keep_alive_while(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn()`` while holding a keep-alive reference; released however ``fn`` ends."""
        return await self._heartbeat.keep_alive_while(fn)

    # -- durable fibers -------------------------------------------------------------------------
    def run_fiber(self, name: str, fn: FiberFn[T]) -> asyncio.Task[T]:
        """Start ``fn(ctx)`` as a durable fiber; its row is written before this returns, so
        ``self.ctx.waitUntil(self.run_fiber(...))`` is durable (see ``FiberRuns.run_fiber``)."""
        return self._fiber_runs.run_fiber(name, fn)

    def stash(self, data: Any) -> None:
        """Checkpoint the current fiber (synchronously); raises outside a fiber."""
        self._fiber_runs.stash(data)

    @property
    def running_fiber_ids(self) -> frozenset[str]:
        """Ids of the fibers running in this process right now."""
        return self._fiber_runs.running_ids

    async def on_fiber_recovered(
        self, ctx: FiberRecoveryContext
    ) -> FiberResolution | dict[str, Any] | None:
        """Called for each fiber left behind by a dead process; override to resume it.

        Returning deletes the run row; raising keeps it, retried with back-off
        (``keep_alive_interval_ms × 2ⁿ``, ≤ 5 min) until ``fiber_recovery_max_age_ms``. For a
        managed fiber (``ctx.managed``) it may return a :class:`FiberResolution` to settle it.
        At activation this runs inside ``blockConcurrencyWhile`` (30 s limit): start resumed work
        in the background, ``self.ctx.waitUntil(self.run_fiber(ctx.name, ...))``, and return.
        """
        _log.warning("agent %s: fiber %r (%s) was interrupted and on_fiber_recovered is not "
                     "overridden; its work is dropped", self.name, ctx.name, ctx.id)  # fmt: skip
        return None

    # -- managed fibers -------------------------------------------------------------------------
    def start_fiber(
        self,
        name: str,
        fn: ManagedFn,
        *,
        fiber_id: str | None = None,
        idempotency_key: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        wait_for_completion: bool = False,
    ) -> asyncio.Future[FiberRecord]:
        """Accept ``fn`` as a managed fiber (ledger and run rows written before this returns)."""
        return self._fibers.start_fiber(
            name,
            fn,
            fiber_id=fiber_id,
            idempotency_key=idempotency_key,
            metadata=metadata,
            wait_for_completion=wait_for_completion,
        )

    async def inspect_fiber(self, fiber_id: str) -> FiberRecord | None:
        """The managed fiber's record, or None."""
        return await self._fibers.inspect_fiber(fiber_id)

    async def inspect_fiber_by_key(self, idempotency_key: str) -> FiberRecord | None:
        return await self._fibers.inspect_fiber_by_key(idempotency_key)

    async def list_fibers(
        self, status: StatusFilter = None, name: str | None = None, limit: int | None = None
    ) -> list[FiberRecord]:
        """Newest first; ``status`` may be one status or several; ``limit`` 1..100 (50)."""
        return await self._fibers.list_fibers(status, name, limit)

    async def cancel_fiber(self, fiber_id: str, reason: str | None = None) -> bool:
        """Mark a live fiber ``aborted`` and signal its code; False if terminal or absent."""
        return await self._fibers.cancel_fiber(fiber_id, reason)

    async def cancel_fiber_by_key(self, idempotency_key: str, reason: str | None = None) -> bool:
        return await self._fibers.cancel_fiber_by_key(idempotency_key, reason)

    async def resolve_fiber(
        self, fiber_id: str, result: FiberResolution | Mapping[str, Any]
    ) -> bool:
        """Settle an ``interrupted`` fiber (e.g. ``{"status": "completed"}``); False otherwise."""
        return await self._fibers.resolve_fiber(fiber_id, result)

    async def delete_fibers(
        self,
        status: StatusFilter = None,
        *,
        settled_before: float | _dt.datetime | None = None,
        limit: int | None = None,
    ) -> int:
        """Delete terminal records (default: completed, aborted, error), oldest settled first."""
        return await self._fibers.delete_fibers(status, settled_before=settled_before, limit=limit)

    # -- costly operations and their usage (agents.ops, agents.usage) -------------------------
    def operation(
        self,
        kind: str,
        args: Any = None,
        *,
        turn: str | int | None = None,
        idempotent: bool = False,
    ) -> Operation:
        """A costly call, ``async with self.operation(kind, args, turn=...) as op:`` (nothing
        is written until it is entered; see :mod:`agents.ops` for what the body may do)."""
        return self._operations.operation(kind, args, turn=turn, idempotent=idempotent)

    async def run_operation(
        self,
        kind: str,
        args: Any,
        fn: OperationFn,
        *,
        turn: str | int | None = None,
        idempotent: bool = False,
    ) -> OperationOutcome:
        """Await ``fn(op)`` unless replayed or ambiguous (see :meth:`OperationLedger.run`)."""
        return await self._operations.run(kind, args, fn, turn=turn, idempotent=idempotent)

    def operations(
        self,
        status: str | None = None,
        kind: str | None = None,
        turn: str | None = None,
        limit: int = 100,
    ) -> list[OperationRecord]:
        """Ledger rows matching every filter given, newest started first."""
        return self._operations.records(status, kind, turn, limit)

    def pending_operations(self) -> list[OperationRecord]:
        """Started, never settled and not running now: what recovery must judge."""
        return self._operations.pending()

    def forget_operations(self, *, before_ms: int | None = None, turn: str | None = None) -> int:
        """Delete settled rows (or every row of ``turn``); returns how many."""
        return self._operations.forget(before_ms=before_ms, turn=turn)

    def record_usage(
        self,
        *,
        provider: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
        turn: str | None = None,
        op_id: str | None = None,
        cost: float | None = None,
        kind: str = "llm",
        partial: bool = False,
    ) -> UsageEntry:
        """Record one call's tokens (and cost: given, or from ``model_prices``) durably; see
        :meth:`UsageLedger.record`."""
        return self._usage.record(
            provider=provider, model=model, input_tokens=input_tokens, output_tokens=output_tokens,
            turn=turn, op_id=op_id, cost=cost, kind=kind, partial=partial,
        )  # fmt: skip

    def update_usage(
        self,
        entry_id: int,
        *,
        input_tokens: int,
        output_tokens: int,
        partial: bool,
        cost: float | None = None,
    ) -> UsageEntry:
        """Replace the tokens (and cost) of entry ``entry_id``; see :meth:`UsageLedger.update`."""
        return self._usage.update(
            entry_id, input_tokens=input_tokens, output_tokens=output_tokens, partial=partial,
            cost=cost,
        )  # fmt: skip

    def usage(self, turn: str | None = None, op_id: str | None = None) -> UsageTotals:
        """Token and cost sums for ``turn`` and/or ``op_id``, or for the whole agent."""
        return self._usage.totals(turn, op_id)

    def usage_entries(
        self, turn: str | None = None, limit: int = 1000, op_id: str | None = None
    ) -> list[UsageEntry]:
        """Recorded calls (of ``turn`` and/or ``op_id`` when given), newest first."""
        return self._usage.entries(turn, limit, op_id)
