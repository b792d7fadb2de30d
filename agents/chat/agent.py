"""``AIChatAgent``: durable chat turns over the SDK's chat protocol.

A subclass implements :meth:`AIChatAgent.on_chat_message`; everything else is the framework's,
matching ``@cloudflare/ai-chat`` 0.12.2 frame for frame so ``useAgentChat`` works unchanged:

* **Requests.** ``cf_agent_use_chat_request`` frames are parsed, the user's messages persisted
  and broadcast to the other connections, and the turn queued (:mod:`agents.chat.turns.queue`). Each
  turn runs as the durable fiber ``__cf_internal_chat_turn:<requestId>`` (its snapshot is the
  SDK's envelope; ``stash()`` inside ``on_chat_message`` becomes its ``user`` half), so a turn
  cut short by a crash is found on the next activation.
* **Streaming** (:mod:`agents.chat.turns.turn`): every chunk is applied to the assistant message,
  stored in the resumable stream and broadcast with its ``seq``; at the end the message is
  persisted and the stream's rows deleted in the same transaction, then the terminal frame goes
  out.
* **Resuming** (:mod:`agents.chat.requests.resume`): a connection told ``cf_agent_stream_resuming``
  gets
  no live chunk until it acknowledges, then every stored chunk and the live rest.
* **Recovery**, until bounded recovery lands: an interrupted turn's partial reply is persisted as
  an assistant message, its stream closed (a reconnecting client still gets the stored chunks
  and ``done: true``), and its fiber row removed — before the user's ``on_fiber_recovered``.

Deliberate differences from the package (see the README): a request it cannot read gets an error
frame instead of a server-side warning only; a failing ``on_chat_message`` ends the request with
an error frame instead of leaving the client waiting; a JSON line split across reads of the
model's SSE body is kept, not dropped.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

from workers import Response

from ..agent import Agent
from ..core.connections import Connection
from ..core.portable import wait_until
from ..core.protocol import dumps
from ..fibers.types import FiberRecoveryContext
from .protocol import frames
from .protocol.frames import parse_chat_frame
from .recovery import (
    CHAT_LAST_TERMINAL_KEY,
    CHAT_RECOVERING_KEY,
    ChatRecoveryContext,
    ChatRecoverySpec,
    recovering_flag_active,
    resolve_chat_recovery,
)
from .recovery.overflow import compact_after_overflow
from .recovery.recovering import TurnRecovery
from .requests.chat_request import chat_request, enqueue_turn, set_messages
from .requests.resume import ResumeHandshake
from .requests.submissions import Submissions
from .requests.submissions import create_tables as create_submission_tables
from .streams.resumable import ResumableStreams
from .streams.resumable import create_tables as create_stream_tables
from .transcript.messages import UIMessage, origin_message_ids
from .transcript.repair import (
    client_tool_names,
    default_repair,
    ledger_managed,
    repair_interrupted_tool_parts,
)
from .transcript.store import MessageStore, RequestContext
from .transcript.store import create_tables as create_message_tables
from .turns.autocontinue import AutoContinuation
from .turns.queue import SubmitPolicy, TurnQueue
from .turns.turn import ChatMessageOptions, TurnRunner, TurnSpec, new_request_id

__all__ = ["CHAT_FIBER_PREFIX", "AIChatAgent", "ChatMessageOptions"]

_log = logging.getLogger("agents.chat")

#: The fiber every chat turn runs in: ``__cf_internal_chat_turn:<requestId>`` (the SDK's name).
CHAT_FIBER_PREFIX = "__cf_internal_chat_turn:"

_current_turn: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "agents_chat_turn", default=None
)


class AIChatAgent(Agent):
    """An agent whose clients chat with it through ``useAgentChat`` (see the module docstring).

    Class options: ``message_concurrency`` — what a message sent while a turn runs does
    (``"queue"``, ``"latest"``, ``"merge"``, ``"drop"`` or ``{"strategy": "debounce",
    "debounceMs": N}``); ``max_persisted_messages`` — keep only the newest N messages.
    """

    message_concurrency: ClassVar[Any] = "queue"
    max_persisted_messages: ClassVar[int | None] = None
    #: Bounded recovery of interrupted turns: ``True`` (the defaults), ``False`` (off: an
    #: interrupted turn keeps its partial and stops), a ``ChatRecoveryConfig`` or a dict of its
    #: fields (snake_case or the SDK's camelCase).
    chat_recovery: ClassVar[ChatRecoverySpec] = True
    #: A gap of this many ms between a reply's chunks aborts the upstream and hands the turn to
    #: bounded recovery (as a continuation, or a retry when nothing came); 0: off.
    chat_stream_stall_timeout_ms: ClassVar[float] = 0
    #: Reactive context-overflow recovery (:mod:`agents.chat.recovery.overflow`): ``True`` or
    #: ``{"reactive": True, "max_retries": N}``; off by default.
    context_overflow: ClassVar[Any] = None

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        sql = ctx.storage.sql
        create_message_tables(sql)
        create_stream_tables(sql)
        create_submission_tables(sql)
        self._chat_store = MessageStore(sql)
        self._chat_store.load()
        self._chat_context = RequestContext(sql)
        self._chat_context.load()
        self._chat_streams = ResumableStreams(sql, self._core.now, new_request_id)
        self._chat_streams.restore()
        self._chat_queue = TurnQueue()
        self._chat_policy = SubmitPolicy()
        #: ``merge``: per queue generation, where the run of user messages to merge starts.
        self._chat_merge_start: dict[int, int] = {}
        self._chat_aborts: dict[str, asyncio.Event] = {}
        self._chat_resume = ResumeHandshake(
            self._chat_streams,
            self._chat_queue,
            self._chat_terminal_record,
            lambda connection_id: self._chat_auto.asked_by(connection_id),
        )
        self._chat_runner = TurnRunner(self)
        self._chat_auto = AutoContinuation(self)  # tool answers' autoContinue, coalesced
        self._chat_submissions = Submissions(self)
        config = resolve_chat_recovery(self.chat_recovery)  # a property may bind hooks
        self._chat_recovery = TurnRecovery(self, config) if config is not None else None
        if self._chat_recovery is not None:
            self._chat_streams.on_flushed = self._chat_recovery.bump_progress

    # -- the user's hook --------------------------------------------------------------------------
    async def on_chat_message(
        self, on_finish: Callable[..., Any], options: ChatMessageOptions
    ) -> Any:
        """Answer the conversation in :attr:`messages`: return a ``Response`` whose body is a
        UI-message stream (SSE, e.g. :func:`agents.chat.streams.producers.ui_message_response`) or
        plain
        text, or an (async) iterable of UI-message chunks. Override it."""
        raise NotImplementedError(
            "received a chat message, override on_chat_message and return a Response (or an "
            "iterable of UI-message chunks) to send to the client"
        )

    async def on_chat_response(self, result: Mapping[str, Any]) -> None:
        """Called after each turn with ``{message, requestId, continuation, status, error?}``."""

    def classify_chat_error(self, error: Any) -> str | None:
        """What kind of failure ``error`` is (an exception, or an in-band error's text):
        ``"context_overflow"`` drives the context-overflow layer. The default classifies
        nothing; assign
        :func:`agents.chat.recovery.overflow.default_context_overflow_classifier`."""
        return None

    async def compact_messages(self, messages: list[UIMessage]) -> list[UIMessage] | None:
        """Return a shorter transcript (e.g. old turns replaced by a summary message) for the
        context-overflow layer to persist and re-run the turn on; ``None`` (the default): no
        compaction, so an overflow ends the turn."""
        return None

    async def on_chat_error(self, ctx: Mapping[str, Any]) -> None:
        """A turn failed: ``{requestId, error, classification}`` (``classification`` from
        :meth:`classify_chat_error`). Called once per failed turn, after the error frame."""

    async def on_chat_recovery(self, ctx: ChatRecoveryContext) -> Mapping[str, Any]:
        """An interrupted turn is about to be recovered (within the budgets of
        :attr:`chat_recovery`). Return ``{"persist": False}`` to drop its partial reply (settled
        tool results are kept) or ``{"continue": False}`` to stop there; the default keeps the
        partial and continues it (or retries the user message when nothing was produced).
        ``ctx.recovery_data`` is what the turn last passed to :meth:`stash`."""
        return {}

    def repair_interrupted_tool_part(self, part: dict[str, Any]) -> Mapping[str, Any]:
        """What a tool call interrupted before its result becomes, before the next model call
        (see :mod:`agents.chat.transcript.repair`). The default is an ``output-error`` saying so;
        override
        it to, e.g., turn an unanswered ``ask_user`` call into text."""
        return default_repair(part)

    def _chat_repair_transcript(self, *, continuation: bool) -> None:
        repaired, ids = repair_interrupted_tool_parts(
            self.messages,
            client_tools=client_tool_names(self._chat_context.last_client_tools),
            repair_part=self.repair_interrupted_tool_part,
            repair_approval_responded=not continuation,
        )
        if ids:
            _log.info("agent %s: repaired interrupted tool calls %s", self.name, ids)
            self.persist_messages(repaired)

    # -- the transcript ---------------------------------------------------------------------------
    @property
    def messages(self) -> list[UIMessage]:
        """The persisted transcript, oldest first (a copy of the list)."""
        return self._chat_store.messages

    def persist_messages(
        self, messages: Iterable[UIMessage], exclude_broadcast_ids: Iterable[str] = ()
    ) -> list[UIMessage]:
        """Upsert ``messages`` (unchanged ones are skipped) and broadcast the reconciled list
        as ``cf_agent_chat_messages`` to every connection but ``exclude_broadcast_ids``."""
        return self._chat_persist_and_broadcast(list(messages), exclude_broadcast_ids)

    def _chat_persist_and_broadcast(
        self, messages: list[UIMessage], exclude: Iterable[str], *, delete_stale: bool = False
    ) -> list[UIMessage]:
        merged = self._chat_persist(messages, delete_stale=delete_stale)
        self._chat_broadcast(frames.messages_frame(merged), exclude=exclude)
        return merged

    def _chat_persist(self, messages: list[UIMessage], *, delete_stale: bool = False) -> list[Any]:
        return self._chat_store.persist(
            messages, delete_stale=delete_stale, max_persisted=self.max_persisted_messages
        )

    async def save_messages(self, messages: Iterable[UIMessage]) -> dict[str, Any]:
        """A programmatic turn: persist ``messages`` (broadcast to everyone), then answer."""
        request_id = new_request_id()
        self.persist_messages(list(messages))
        spec = TurnSpec(request_id, origin_ids=origin_message_ids(self.messages))
        return await self._chat_enqueue(spec)

    async def continue_last_turn(self, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """Continue the last assistant message with a new turn (``continuation: true``)."""
        if not any(m.get("role") == "assistant" for m in self.messages):
            return {"requestId": "", "status": "skipped"}
        spec = TurnSpec(
            new_request_id(),
            continuation=True,
            body=body if body is not None else self._chat_context.last_body,
            client_tools=self._chat_context.last_client_tools,
        )
        return await self._chat_enqueue(spec)

    # -- durable submissions (agents.chat.requests.submissions) ------------------------------------
    async def submit_messages(
        self,
        messages: Iterable[UIMessage],
        *,
        submission_id: str | None = None,
        idempotency_key: str | None = None,
        metadata: Any = None,
    ) -> dict[str, Any]:
        """Hand ``messages`` to the agent to answer in order, durably: ``{submissionId,
        accepted, status…}`` at once (``accepted: False`` when ``idempotency_key`` was seen)."""
        return self._chat_submissions.submit(
            messages,
            submission_id=submission_id,
            idempotency_key=idempotency_key,
            metadata=metadata,
        )

    def inspect_submission(self, submission_id: str) -> dict[str, Any] | None:
        return self._chat_submissions.inspect(submission_id)

    def list_submissions(self, status: str | None = None, limit: int = 100) -> list[Any]:
        return self._chat_submissions.list(status, limit)

    def cancel_submission(self, submission_id: str) -> bool:
        return self._chat_submissions.cancel(submission_id)

    def delete_submissions(
        self, status: str | None = None, completed_before: float | None = None
    ) -> int:
        return self._chat_submissions.delete(status, completed_before)

    async def _chat_compact_after_overflow(
        self, spec: TurnSpec, error: Any, compactions: int
    ) -> bool:
        return await compact_after_overflow(self, spec.request_id, error, compactions)

    async def _chat_failed(self, spec: TurnSpec, error: Any) -> None:
        try:
            await self.on_chat_error(
                {
                    "requestId": spec.request_id,
                    "error": str(error),
                    "classification": self.classify_chat_error(error),
                }
            )
        except Exception as exc:
            await self._core.report(exc, spec.sender)

    def _after_start(self) -> None:
        if self._chat_submissions.has_work():  # left by an earlier activation: answer them
            wait_until(self.ctx, self._chat_submissions.drain())
        self._chat_auto.restore()  # a server tool's approval whose continuation never ran

    def _chat_recovering(self) -> bool:
        """Whether a recovery of an interrupted turn is under way (its flag is set)."""
        if self._chat_recovery is None:
            return False
        record = self.ctx.storage.kv.get(CHAT_RECOVERING_KEY)
        return recovering_flag_active(record, int(self._core.now()))

    def has_pending_interaction(self) -> bool:
        """Whether an assistant message (stored, or streaming) waits for a client's answer."""
        messages = self.messages
        streaming = self._chat_runner.streaming_message
        if streaming is not None:  # newer than its stored copy (a continuation's message)
            messages = [m for m in messages if m.get("id") != streaming.get("id")] + [streaming]
        return any(
            isinstance(part, dict)
            and part.get("state") in ("input-available", "approval-requested")
            and not ledger_managed(part)  # a server tool the model loop settles: no client waits
            for message in messages
            if message.get("role") == "assistant"
            for part in message.get("parts", [])
        )

    async def wait_until_stable(self, within: float | None = None) -> bool:
        """Wait until no turn runs or waits and nothing awaits a client; False if ``within``
        seconds ran out first (the SDK's ``waitUntilStable({timeout})``)."""
        try:
            async with asyncio.timeout(within):
                while self._chat_queue.busy or self._chat_auto.armed:
                    await self._chat_auto.idle()  # a continuation about to run is no idleness
        except TimeoutError:
            return False
        return not self.has_pending_interaction()

    def stash(self, data: Any) -> None:
        """Inside ``on_chat_message``: checkpoint ``data`` as the turn's recovery data (the
        ``user`` half of the chat snapshot). Elsewhere: the fiber's ``stash``."""
        envelope = _current_turn.get()
        if envelope is None:
            super().stash(data)
            return
        self._fiber_runs.stash({"__cfAIChatFiberSnapshot": envelope, "user": data})

    # -- framework hooks (see Agent) --------------------------------------------------------------
    def _before_connect_frames(self, connection: Connection) -> None:
        self._chat_resume.on_connect(connection)
        if self._chat_streams.active is None and self._chat_recovery is not None:
            record = self.ctx.storage.kv.get(CHAT_RECOVERING_KEY)
            if recovering_flag_active(record, int(self._core.now())):
                connection._send_quiet(frames.recovering_frame(True, record.get("requestId")))

    def _on_connection_closed(self, connection: Connection) -> None:
        self._chat_resume.forget(connection.id)

    def _handle_request(self, request: Any) -> Any:
        path = str(request.url).split("?", 1)[0].rstrip("/")
        if path.rsplit("/", 1)[-1] != "get-messages":
            return None
        return Response(dumps(self.messages), headers={"content-type": "application/json"})

    async def _handle_protocol_message(self, connection: Connection, message: Any) -> bool:
        frame = parse_chat_frame(message)
        if frame is None:
            return False
        kind = frame.type
        if kind == frames.USE_CHAT_REQUEST:
            if frame.init.get("method") != "POST":
                return False  # as the SDK: not a chat request after all
            chat_request(self, connection, frame)
        elif kind == frames.CHAT_MESSAGES:
            set_messages(self, connection, frame)
        elif kind == frames.CHAT_CLEAR:
            self._chat_clear(connection)
        elif kind == frames.CHAT_REQUEST_CANCEL:
            abort = self._chat_aborts.get(frame.id or "")
            if abort is not None:
                abort.set()
        elif kind == frames.STREAM_RESUME_REQUEST:
            self._chat_resume.request(connection, frame.probe_id)
        elif kind == frames.STREAM_RESUME_ACK:
            self._chat_resume_ack(connection, frame.id)
        elif kind in (frames.TOOL_RESULT, frames.TOOL_APPROVAL):
            self._chat_runner.tool_update(connection, frame)
        return True

    async def _recover_internal_fiber(self, ctx: FiberRecoveryContext) -> bool:
        if not ctx.name.startswith(CHAT_FIBER_PREFIX):
            return False
        request_id = ctx.name[len(CHAT_FIBER_PREFIX) :]
        active = self._chat_streams.active
        orphan = active is not None and active.request_id == request_id and not active.live
        if self._chat_recovery is not None:
            await self._chat_recovery.interrupted(request_id, ctx.snapshot)
        elif orphan:
            assert active is not None
            self._chat_runner.finalize_orphan(active)
        if orphan:
            self._chat_resume.interrupted = request_id
        _log.warning("agent %s: chat turn %s was interrupted; %s", self.name, request_id,
                     "recovering it" if self._chat_recovery is not None
                     else "its partial reply is kept")  # fmt: skip
        return True

    def _chat_terminal_record(self) -> Mapping[str, Any] | None:
        record = self.ctx.storage.kv.get(CHAT_LAST_TERMINAL_KEY)
        return record if isinstance(record, Mapping) and "requestId" in record else None

    async def _chat_stalled(
        self, spec: TurnSpec, builder: Any, keep: Callable[..., None], transient: Any = None
    ) -> str | None:
        """A turn's reply stalled (the watchdog fired) or failed transiently (``transient``, a
        :class:`~agents.chat.turns.transient.TransientFailure`): recover it within budget, or give
        up. ``keep(persist)`` persists the partial when recovery says so; returns recovery's
        outcome (``None``: recovery is off)."""
        if self._chat_recovery is not None:
            return await self._chat_recovery.stalled(
                spec, list(builder.parts), keep, transient=transient
            )
        return None

    async def _chat_recovery_run(self, payload: Any, _schedule: Any = None) -> None:
        """The schedule that runs a recovery attempt (see
        :mod:`agents.chat.recovery.recovering`)."""
        if self._chat_recovery is not None and isinstance(payload, Mapping):
            await self._chat_recovery.run(payload)

    # -- requests ---------------------------------------------------------------------------------
    def _chat_clear(self, connection: Connection) -> None:
        self._chat_merge_start.clear()
        self._chat_queue.bump_generation()
        self._chat_policy.reset()
        for abort in self._chat_aborts.values():
            abort.set()
        self._chat_store.clear()
        self._chat_streams.clear_all()
        self._chat_submissions.skip_pending()
        self.ctx.storage.kv.delete(CHAT_LAST_TERMINAL_KEY)
        self._chat_context.clear()
        self._chat_resume.clear()
        self._chat_broadcast(frames.clear_frame(), exclude=[connection.id])

    def _chat_resume_ack(self, connection: Connection, request_id: str | None) -> None:
        if request_id is None:
            return
        orphan = self._chat_resume.ack(connection, request_id)
        if orphan is not None:  # replayed to the end: the dead producer's partial is kept
            self._chat_runner.finalize_orphan(orphan)

    # -- turns ------------------------------------------------------------------------------------
    async def _chat_enqueue(self, spec: TurnSpec) -> dict[str, Any]:
        """Queue a turn; run it (in its fiber) when its time comes. Returns its result."""
        return await enqueue_turn(self, spec)

    async def _chat_fiber(self, spec: TurnSpec) -> dict[str, Any]:
        envelope = self._chat_runner.snapshot(spec)

        async def body(_ctx: Any) -> dict[str, Any]:
            self._fiber_runs.stash({"__cfAIChatFiberSnapshot": envelope, "user": None})
            token = _current_turn.set(envelope)
            try:
                return await self._chat_runner.run(spec, self._chat_abort(spec.request_id))
            finally:
                _current_turn.reset(token)
                self._chat_aborts.pop(spec.request_id, None)

        return await self.run_fiber(CHAT_FIBER_PREFIX + spec.request_id, body)

    def _chat_abort(self, request_id: str) -> asyncio.Event:
        event = self._chat_aborts[request_id] = asyncio.Event()
        return event

    def _chat_broadcast(self, frame: str, *, exclude: Iterable[str] = ()) -> None:
        """Send ``frame`` to every connection but ``exclude`` and those waiting to resume."""
        excluded = set(exclude) | self._chat_resume.pending
        for connection in self.get_connections():
            if connection.id not in excluded:
                connection._send_quiet(frame)
