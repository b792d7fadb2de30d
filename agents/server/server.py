"""``AgentServer``: one Durable Object per session, running the agent loop of its agent type.

A run is a chat turn of :class:`~agents.chat.AIChatAgent` (so it is stored as UI messages,
streamed, checkpointed per step and — with ``auto_resume`` — recovered within the chat layer's
budgets), driven by :func:`agents.providers.model_reply` with the definition its registry
resolves and the provider its ``llm_adapter`` builds *inside* the object. Every chunk the loop
produces is also appended to the session's sequenced stream (:mod:`.streams`, the seed's chunk
vocabulary, :mod:`.mirror`) in the same synchronous step as the chat layer stores it, so after a
SIGKILL the stream and the transcript agree and sequences carry on with no gap. The chat
layer's chunk buffer is one chunk here for that reason.

The HTTP surface is :mod:`.routes` (the read side in :mod:`.views`, the v7 chat routes in
:mod:`.chat_ui` — the AI SDK's UI-message stream, :mod:`.uistream` — and :mod:`.chat_routes`);
runs are started, resumed and retried by :mod:`.runs`, stop in :mod:`.outcomes`, and are
answered by clients in :mod:`.toolresults`; a run's tools come from :mod:`.servedtools`
(sub-agents :mod:`.subagents`, companions :mod:`.companions`); usage rolls up across sub-agent
objects in :mod:`.rollup` (custom metrics: :mod:`.metrics`). Build a class with
:func:`~agents.server.create_agent_server`.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse

from ..chat import AIChatAgent, ChatMessageOptions, ChatRecoveryConfig
from ..chat.turns.turn import TurnSpec, new_request_id
from ..core.connections import Connection, ConnectionContext
from ..core.portable import wait_until
from ..providers import model_reply
from .calls import pending_client_calls
from .contexts import as_logger
from .definition import AgentDefinition
from .errors import AgentServerError, StreamRangeError
from .hooks import ExecutionState, LLMAdapterContext, LLMAdapterFactory, ServerHooks
from .metrics import MetricStore
from .mirror import stream_chunks
from .outcomes import crashed, end_run, settle_run
from .registry import AgentFactoryContext, AgentRegistry
from .requests import ResumeRequest
from .rollup import DOUsageStore, UsageStore, UsageStoreContext, entry_json
from .routes import dispatch
from .runs import resume_run
from .servedtools import served_tools
from .session import SessionRecord, SessionStore
from .streams import SessionStream
from .subagents import call_session
from .workspace import WorkspaceContext

__all__ = ["AgentServer", "pending_client_calls"]


class _AutoResumeWake:
    """The alarm share of ``auto_resume``: an active run keeps a wake-up close (see
    :attr:`AgentServer.auto_resume_wake_ms`)."""

    def __init__(self, server: AgentServer) -> None:
        self._server = server

    def next_wakeup(self, now: float) -> float | None:
        server = self._server
        if not server.auto_resume or server.sessions.get().status != "active":
            return None
        return now + server.auto_resume_wake_ms


class AgentServer(AIChatAgent):
    """The session object (see the module docstring). Configure it with
    :func:`create_agent_server`, or subclass and set the class options."""

    registry: ClassVar[AgentRegistry] = AgentRegistry()
    llm_adapter: ClassVar[LLMAdapterFactory | None] = None
    hooks: ClassVar[ServerHooks] = ServerHooks()
    endpoints: ClassVar[Mapping[str, Any]] = {}
    sub_agent_namespace: ClassVar[Callable[[Any], Any] | None] = None
    #: After a crash, continue the run by itself (bounded chat recovery); else the session
    #: says ``interrupted`` and ``/resume`` continues it.
    auto_resume: ClassVar[bool] = False
    #: With ``auto_resume``: while a run is active, the object's alarm is never further away
    #: than this, so after a crash the runtime wakes the session by itself — at once when the
    #: restart took longer — and recovery starts with no request. (The keep-alive heartbeat alone
    #: is ``keep_alive_interval_ms``, 30 s by default.) One alarm per period while a run executes.
    auto_resume_wake_ms: ClassVar[int] = 1_000
    interrupt_observation_deadline_ms: ClassVar[int] = 5_000
    heartbeat_ms: ClassVar[int] = 30_000
    #: The seed's ``usageStore``: ``(env, UsageStoreContext) -> UsageStore``; None: the object's
    #: own tables (:class:`~.rollup.DOUsageStore`).
    usage_store_factory: ClassVar[Callable[[Any, Any], Any] | None] = None
    #: ``(env, WorkspaceContext) -> WorkspaceRegistry`` for ``/workspace``; None: no support.
    workspaces_factory: ClassVar[Callable[[Any, Any], Any] | None] = None
    #: The seed's ``chatHandler``: ``(request, ChatContext) -> Response`` for the v7 chat
    #: routes; None: :func:`~.chat_ui.handle_chat_stream` (the AI SDK's UI-message stream).
    chat_handler: ClassVar[Callable[..., Any] | None] = None
    #: The seed's ``logger`` option: None (the ``agents.server`` logging logger), a
    #: :class:`logging.Logger`, or any object with ``debug/info/warn/error``.
    logger: ClassVar[Any] = None

    @property
    def chat_recovery(self) -> Any:  # type: ignore[override]  # a class option made per class
        if not self.auto_resume:
            return False
        return ChatRecoveryConfig(on_exhausted=self._recovery_exhausted)

    def _recovery_exhausted(self, ctx: Any) -> None:
        """Bounded recovery gave up on the run: it failed (the reason says why)."""
        self.stream.reopen()
        end_run(self, error=f"recovery gave up: {getattr(ctx, 'reason', None) or 'exhausted'}")

    def __init__(self, ctx: Any, env: Any) -> None:
        # Built first: on_start (run by the base class's activation) reads the session.
        self.sessions = SessionStore(ctx.storage.sql, lambda: self._core.now())
        self.metrics = MetricStore(ctx.storage.sql, lambda: self._core.now())
        self.log = as_logger(type(self).logger)
        self._usage_store: UsageStore | None = None
        self._workspaces: Any = None
        super().__init__(ctx, env)
        self._core.add_wakeup_sources(_AutoResumeWake(self))
        # The session stream mirrors what storage holds: every chunk is stored at once.
        self._chat_streams.buffer_size = 1  # type: ignore[misc]
        self.stream = SessionStream(self, heartbeat_ms=self.heartbeat_ms)
        self.execution_state = ExecutionState(self)
        #: A soft interrupt the running loop saw (its reason), until the run ends.
        self._interrupt_seen: str | None = None
        self._interrupt_wanted: str | None = None
        self._abort_reason: str | None = None
        self._interrupt_observed = asyncio.Event()
        #: Set whenever a run's turn has been settled (``on_chat_response`` ran).
        self.run_settled = asyncio.Event()

    # -- what the session is --------------------------------------------------------------------
    @property
    def session(self) -> SessionRecord:
        return self.sessions.get()

    @property
    def workspaces(self) -> Any:
        """The session's workspace registry (the ``workspaces`` option), or None."""
        factory: Any = getattr(type(self), "workspaces_factory", None)
        if factory is None:
            return None
        if self._workspaces is None:
            context = WorkspaceContext(self.session.session_id or self.name, self)
            self._workspaces = factory(self.env, context)
        return self._workspaces

    @property
    def usage_store(self) -> UsageStore:
        """The session's usage store: the ``usage_store`` option's, else :class:`DOUsageStore`."""
        if self._usage_store is None:
            factory: Any = getattr(type(self), "usage_store_factory", None)
            if factory is None:
                self._usage_store = DOUsageStore(self)
            else:
                record = self.session
                context = UsageStoreContext(record.session_id or self.name, record.agent_type)
                self._usage_store = factory(self.env, context)
        return self._usage_store

    @property
    def is_executing(self) -> bool:
        return bool(self._chat_queue.busy)

    def sub_agent_namespace_of(self) -> Any:
        if self.sub_agent_namespace is None:
            raise AgentServerError(
                "this server has sub-agent tools but no sub_agent_namespace: give "
                "create_agent_server(sub_agent_namespace=lambda env: env.AGENTS)"
            )
        factory: Any = getattr(type(self), "sub_agent_namespace")  # noqa: B009 (a staticmethod)
        return factory(self.env)

    async def on_start(self) -> None:
        record = self.sessions.get()
        recovering = self.auto_resume and self._chat_recovering()
        if record.status == "active" and not self.is_executing and not recovering:
            crashed(self)

    # -- the run: a chat turn driven by the model loop ------------------------------------------
    def start_turn(self, *, continuation: bool) -> None:
        """Run the session's next turn in the background (``ctx.waitUntil``): a new answer to
        the last user message, or a ``continuation`` of the last assistant message."""
        if continuation:
            wait_until(self.ctx, self.continue_last_turn())
        else:
            wait_until(self.ctx, self._chat_enqueue(TurnSpec(new_request_id())))

    async def definition(self) -> AgentDefinition:
        record = self.session
        context = AgentFactoryContext(
            self.env, record.session_id or self.name, record.run_id or "", record.user_id
        )
        return await self.registry.resolve(record.agent_type or "", context)

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        record = self.session
        if self.llm_adapter is None:
            raise AgentServerError("create_agent_server needs llm_adapter=(env, ctx) -> provider")
        definition = await self.definition()
        context = LLMAdapterContext(
            record.session_id or self.name, definition.name, record.run_id or ""
        )
        factory: Any = getattr(type(self), "llm_adapter")  # noqa: B009 (a staticmethod)
        provider = factory(self.env, context)
        tools = served_tools(self, definition)
        source = model_reply(
            self,
            options,
            provider,
            tools=tools,
            system=definition.system_prompt or None,
            max_steps=definition.max_steps,
            should_stop=self._stop_requested,
            output_schema=definition.output_schema,
        )
        return self._mirrored(source, record.session_id or self.name, definition.name)

    async def _mirrored(
        self, source: AsyncIterator[Any], agent_id: str, agent_type: str
    ) -> AsyncIterator[Any]:
        async for chunk in source:
            if self._interrupt_wanted is not None and self._interrupt_seen is None:
                self._observe_interrupt()
            for event in stream_chunks(chunk, agent_id, agent_type):
                self.stream.append(event)
            if chunk.get("type") == "finish-step":
                self._checkpoint()
            yield chunk

    def _checkpoint(self) -> None:
        record = self.session
        streaming = self._chat_runner.streaming_message
        parts = len((streaming or {}).get("parts") or ())
        checkpoint = self.sessions.checkpoint(
            record.run_id or "", record.step_count + 1, len(self.messages), parts
        )
        self.sessions.update(step_count=record.step_count + 1, checkpoint_id=checkpoint)

    def record_metric(self, kind: str, name: str, value: float, *, key: str | None = None) -> None:
        """Add a custom usage metric (``/usage``'s ``custom[kind][name]``) to this session;
        a ``key`` seen before replaces its row (a repeat is not counted twice)."""
        key = self.metrics.record(kind, name, value, run_id=self.session.run_id, key=key)
        self.usage_event({"kind": "custom", "type": kind, "name": name, "value": value,
                          "key": key, "at": int(self._core.now())})  # fmt: skip

    async def resume(
        self,
        mode: str = "continue",
        *,
        checkpoint_id: str | None = None,
        modify_state: Any = None,
    ) -> Any:
        """``/resume`` in process (a custom endpoint, a hook): ``modify_state`` may be a function
        of the state (the seed's ``modifyState: (s) => s``) as well as a merge patch. Raises
        :class:`~.errors.RequestError` as the route answers."""
        request = ResumeRequest(mode, checkpoint_id, (), modify_state)
        return await resume_run(self, request, retry=mode == "retry")

    def record_usage(self, **fields: Any) -> Any:
        """Tokens recorded by the model loop: in the object's table, and handed to a custom
        ``usage_store`` as a ``tokens`` entry once the request's counts are final (a request
        still streaming is recorded partial first, then completed by :meth:`update_usage`)."""
        entry = super().record_usage(**fields)
        if not entry.partial:
            self.usage_event(entry_json(entry))
        return entry

    def update_usage(self, entry_id: int, **fields: Any) -> Any:
        """A partial entry completed (or grown): handed to a custom ``usage_store`` when final."""
        entry = super().update_usage(entry_id, **fields)
        if not entry.partial:
            self.usage_event(entry_json(entry))
        return entry

    def usage_event(self, entry: Mapping[str, Any]) -> None:
        """An entry for a custom ``usage_store`` (``record_entry``, in the background when it is
        async). The default store reads the object's own tables: nothing to hand it."""
        if getattr(type(self), "usage_store_factory", None) is None:
            return
        record = self.session
        full = {"sessionId": record.session_id, "runId": record.run_id, **entry}
        result = self.usage_store.record_entry(full)
        if inspect.isawaitable(result):
            wait_until(self.ctx, result)

    def metric_recorder(self, scope: str) -> Callable[[str, str, float], None]:
        """``record_metric`` for a hook's context: keyed by ``scope`` (the run and the hook)
        and the order of the call within it, so a hook run again records once."""
        order = itertools.count()

        def record(kind: str, name: str, value: float) -> None:
            self.record_metric(kind, name, value, key=f"{scope}:{next(order)}")

        return record

    def request_interrupt(self, reason: str) -> asyncio.Event:
        """A durable soft interrupt: written now, observed by the running loop at its next
        chunk or step (the event is set then); the run ends after its current step."""
        self._interrupt_wanted = reason
        self._interrupt_observed = asyncio.Event()
        self.sessions.update(interrupt_reason=reason)
        return self._interrupt_observed

    def _observe_interrupt(self) -> None:
        self._interrupt_seen = self._interrupt_wanted or self.session.interrupt_reason
        self._interrupt_wanted = None
        self.sessions.update(interrupt_reason=None)
        self._interrupt_observed.set()

    @property
    def stop_requested(self) -> bool:
        """Whether an interrupt or abort of the running turn was asked for."""
        return bool(self._interrupt_wanted or self._interrupt_seen or self._abort_reason)

    def _stop_requested(self) -> bool:
        if self._interrupt_seen is None and (
            self._interrupt_wanted or self.session.interrupt_reason
        ):
            self._observe_interrupt()
        return self._interrupt_seen is not None

    async def abort_run(self, reason: str) -> bool:
        """A hard stop of the running turn; False when nothing runs."""
        if not self.is_executing:
            return False
        self._abort_reason = reason
        for abort in list(self._chat_aborts.values()):
            abort.set()
        running = [c.session_id for c in self.sessions.children() if c.status == "active"]
        if running:  # a hard stop stops the whole tree: children would go on billing
            wait_until(self.ctx, self._abort_children(running, reason))
        return True

    async def _abort_children(self, children: list[str], reason: str) -> None:
        for child in children:
            try:
                await call_session(self, child, "/abort", {"reason": f"parent aborted: {reason}"})
            except Exception as exc:
                self.log.warn(f"session {self.name}: could not abort child {child}",
                              {"error": f"{type(exc).__name__}: {exc}"})  # fmt: skip

    async def on_chat_response(self, result: Mapping[str, Any]) -> None:
        try:
            await settle_run(self, result)
        finally:
            self.run_settled.set()

    async def tell_parent(self, parent: str) -> None:
        """This child's run ended: a parent suspended on it goes on (``/children/settled``)."""
        try:
            body = {"childSessionId": self.session.session_id}
            await call_session(self, parent, "/children/settled", body)
        except Exception as exc:
            self.log.warn(f"session {self.name}: could not tell parent {parent} its run ended",
                          {"error": f"{type(exc).__name__}: {exc}"})  # fmt: skip

    # -- clients --------------------------------------------------------------------------------
    def should_send_protocol_messages(self, connection: Connection, ctx: ConnectionContext) -> bool:
        return False

    def _before_connect_frames(self, connection: Connection) -> None:
        """Stream clients speak the session protocol, not the chat one."""

    async def on_connect(self, connection: Connection, ctx: ConnectionContext) -> None:
        query = parse_qs(urlparse(str(ctx.request.url)).query)
        try:
            values = query.get("fromSequence")
            start = self.stream.check_from_sequence(values[0] if values else None)
        except StreamRangeError as exc:
            connection.send(json.dumps({"type": "fail", "error": str(exc)}))
            connection.close(4000 + exc.status, "bad fromSequence")
            return
        self.stream.attach(connection, start)

    async def on_message(self, connection: Connection, message: Any) -> None:
        self.stream.handle_message(connection, message)

    async def on_request(self, request: Any) -> Any:
        return await dispatch(self, request)
