"""Bounded recovery of interrupted chat turns: the wiring between the agent and
:mod:`agents.chat.recovery` (the pure budget math).

A turn cut off by a crash, a deploy or an eviction leaves its fiber row behind; the next
activation hands it to :meth:`TurnRecovery.interrupted`. What happens then (research §5.9):

1. The partial reply is rebuilt from the stored chunks and the turn classified: *retry* the
   unanswered user message when nothing was produced, else *continue* the partial.
2. The incident (``cf:chat-recovery:incident:<root>:<user id>`` in KV) is evaluated against the
   budgets with the durable progress counter (``cf:chat-recovery:progress``: one per flushed
   segment, never derived from the transcript). Exhausted → the partial is kept, the user sees
   the terminal message (an error frame), ``on_exhausted`` runs once, nothing is scheduled.
3. Otherwise ``on_chat_recovery(ctx)`` may veto persisting the partial or continuing; the partial
   is persisted and the stream closed; the incident goes ``scheduled``, ``cf:chat:recovering`` is
   set and broadcast, and a durable schedule (``_chat_recovery_run``) runs the attempt — after a
   restart the persisted alarm brings it with no request at all.
4. The attempt (:meth:`TurnRecovery.run`) admits itself on the incident (counting attempts that
   died in flight), waits for the chat to be stable, skips if the conversation moved on, then
   enqueues a continuation (same assistant message, ``continuation: true``) or a retry, both
   chained under the incident's recovery root so a kill during them spends the same budget.
   When that turn ends, the incident completes (its record deleted) or fails, and the
   "recovering" flag is cleared.

The schedule callback returns as soon as the turn is queued: a kill during the continuation is
then found by the continuation's own fiber, never by a re-run of the callback as well.
"""

from __future__ import annotations

import inspect
import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ...core.portable import wait_until
from ..protocol import frames
from ..turns.transient import TransientFailure
from ..turns.turn import TurnSpec, new_request_id
from . import (
    CHAT_LAST_TERMINAL_KEY,
    CHAT_RECOVERING_KEY,
    EVENT_EXHAUSTED,
    REASON_AWAITING_CLIENT_INTERACTION,
    REASON_CONTINUE_DISABLED,
    REASON_STABLE_TIMEOUT,
    ChatRecoveryAttempt,
    ChatRecoveryConfig,
    ChatRecoveryContext,
    ChatRecoveryIncident,
    ChatRecoveryKind,
    InterruptedTrigger,
    RecoveryEvent,
    RecoveryIdentity,
    StalledTrigger,
    admit_attempt,
    after_stable_timeout,
    build_exhausted_context,
    classify_recovery_kind,
    evaluate_incident,
    finish_attempt,
    give_up_incident,
    record_transient_retry,
    recovering_flag_active,
    recovering_record,
    recovery_backoff_seconds,
    superseded_reason,
    terminal_record,
    transition_incident,
)
from .incidents import IncidentStore

__all__ = ["RECOVERY_CALLBACK", "TurnRecovery"]

_log = logging.getLogger("agents.chat.recovery")

#: The schedule callback that runs a recovery attempt (a method of ``AIChatAgent``).
RECOVERY_CALLBACK = "_chat_recovery_run"

_SEALED = frozenset({"exhausted", "failed", "skipped", "completed"})


def _ids(value: Any) -> list[str]:
    """The message ids a snapshot or schedule payload carries (``[]`` when none)."""
    return [str(v) for v in value] if isinstance(value, list) else []


def _text_of(parts: Any) -> str:
    return "".join(
        str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text"
    )


class TurnRecovery:
    """Recovers one ``AIChatAgent``'s interrupted turns within ``config``'s budgets."""

    __slots__ = ("_agent", "_config", "_isolate", "_store")

    def __init__(self, agent: Any, config: ChatRecoveryConfig) -> None:
        self._agent = agent
        self._config = config
        self._store = IncidentStore(lambda: agent.ctx.storage.kv)
        #: This instance: an attempt recorded by another one that never finished died with it.
        self._isolate = secrets.token_hex(8)

    @property
    def _kv(self) -> Any:
        return self._agent.ctx.storage.kv

    def bump_progress(self) -> None:
        """One more flushed segment (``ResumableStreams.on_flushed``), in the flush's turn."""
        self._store.bump_progress()

    def _recovering(self, on: bool, request_id: str | None) -> None:
        """Set or clear the "recovering…" flag; the frame goes out on a transition only (the
        SDK's ``setChatRecovering``): once per incident, however many attempts it takes."""
        agent = self._agent
        now = int(agent._core.now())
        existing = self._kv.get(CHAT_RECOVERING_KEY)
        if on:
            if recovering_flag_active(existing, now):
                return
            self._kv.put(CHAT_RECOVERING_KEY, recovering_record(request_id, now))
        else:
            if existing is None:
                return
            self._kv.delete(CHAT_RECOVERING_KEY)
            if request_id is None and isinstance(existing, Mapping):
                request_id = existing.get("requestId")
        agent._chat_broadcast(frames.recovering_frame(on, request_id))

    # -- an interrupted turn ------------------------------------------------------------------
    async def interrupted(self, request_id: str, snapshot: Any) -> None:
        """The fiber of turn ``request_id`` was found interrupted: decide and act (module doc)."""
        agent = self._agent
        envelope: dict[str, Any] = {}
        user_data: Any = None
        if isinstance(snapshot, Mapping):
            inner = snapshot.get("__cfAIChatFiberSnapshot")
            envelope = dict(inner) if isinstance(inner, Mapping) else {}
            user_data = snapshot.get("user")
        active = agent._chat_streams.active
        if active is not None and (active.request_id != request_id or active.live):
            active = None
        partial = agent._chat_runner.partial(active) if active is not None else None
        parts = list(partial.parts) if partial is not None else []
        text = _text_of(parts)
        kind = classify_recovery_kind(
            envelope,
            stream_id=active.stream_id if active is not None else "",
            partial_text=text,
            partial_parts=parts,
            messages=agent.messages,
        ).kind
        identity = RecoveryIdentity(
            request_id,
            kind,
            envelope.get("recoveryRootRequestId") or None,
            envelope.get("latestUserMessageId") or None,
        )
        now = int(agent._core.now())
        attempt = ChatRecoveryAttempt(self._isolate, secrets.token_hex(8))
        decision = await evaluate_incident(
            self._store.read(identity.incident_id),
            self._config,
            identity=identity,
            trigger=InterruptedTrigger(attempt),
            now_ms=now,
            current_progress=self._store.progress(),
            awaiting_client_interaction=agent.has_pending_interaction(),
        )
        incident = decision.incident
        if decision.attempt_in_flight is not None:  # this replay is over once we return
            incident = finish_attempt(incident, decision.attempt_in_flight) or incident
        self._store.write(incident, identity.incident_id)

        def finalize(persist: bool = True) -> None:
            if active is not None:
                agent._chat_runner.finalize_orphan(active, persist=persist)

        await self._proceed(
            decision.events,
            incident,
            exhausted=decision.exhausted,
            parked=decision.parked,
            identity=identity,
            partial=(text, parts, active.stream_id if active is not None else ""),
            recovery_data=user_data,
            created_at=int(envelope.get("startedAt") or now),
            finalize=finalize,
            origin_ids=_ids(envelope.get("originMessageIds")),
        )

    async def stalled(
        self,
        spec: TurnSpec,
        parts: list[Any],
        finalize: Callable[..., None],
        *,
        transient: TransientFailure | None = None,
    ) -> str:
        """A live turn's reply went quiet (the stall watchdog): nothing died, so no interruption
        is counted; each stall is one transient retry (bounded by ``max_attempts``).
        ``finalize(persist)`` keeps the partial as a normal turn's reply (or drops it); the
        attempt continues it, or retries a turn that produced nothing. Returns what happened:
        ``"scheduled"``, ``"exhausted"`` (the terminal error went out), ``"parked"`` or
        ``"declined"``.

        A ``transient`` failure (a dropped read, a refused recovery turn) takes the same path,
        but its attempt waits: ``min(2^(n-1), 30)`` s after the ``n``-th transient retry,
        extended to the provider's ``Retry-After`` (at most 60 s) — the SDK's
        ``chatRecoveryBackoffSeconds``. A stall retries at once."""
        agent = self._agent
        text = _text_of(parts)
        latest_user = next((m for m in reversed(agent.messages) if m.get("role") == "user"), None)
        user_id = str(latest_user["id"]) if latest_user is not None else None
        kind: ChatRecoveryKind = "continue" if parts or spec.continuation else "retry"
        identity = RecoveryIdentity(spec.request_id, kind, spec.recovery_root, user_id)
        decision = await evaluate_incident(
            self._store.read(identity.incident_id),
            self._config,
            identity=identity,
            trigger=StalledTrigger(),
            now_ms=int(agent._core.now()),
            current_progress=self._store.progress(),
            awaiting_client_interaction=agent.has_pending_interaction(),
        )
        incident = decision.incident
        delay = 0.0
        if not decision.exhausted:
            incident, retries = record_transient_retry(incident)
            if transient is not None:
                delay = recovery_backoff_seconds(retries, transient.retry_after)
        self._store.write(incident, identity.incident_id)
        return await self._proceed(
            decision.events,
            incident,
            exhausted=decision.exhausted,
            parked=decision.parked,
            identity=identity,
            partial=(text, parts, ""),
            recovery_data=None,
            created_at=int(agent._core.now()),
            finalize=finalize,
            origin_ids=list(spec.origin_ids),
            delay=delay,
        )

    async def _proceed(
        self,
        events: Sequence[RecoveryEvent],
        incident: ChatRecoveryIncident,
        *,
        exhausted: bool,
        parked: bool,
        identity: RecoveryIdentity,
        partial: tuple[str, list[Any], str],
        recovery_data: Any,
        created_at: int,
        finalize: Callable[..., None],
        origin_ids: list[str],
        delay: float = 0,
    ) -> str:
        """After the decision: give up, park, or ask ``on_chat_recovery`` and schedule.

        The attempt's target is read only after ``finalize`` has persisted (or dropped) the
        partial: before it, the last assistant message of a later turn is the previous turn's
        reply, and the attempt would skip itself as ``conversation_changed`` (issue 30)."""
        agent = self._agent
        text, parts, stream_id = partial
        for event in events:
            agent._emit(event.type, dict(event.payload))
        if exhausted:
            await self._exhaust(
                incident, text, parts, stream_id, finalize=finalize, message_ids=origin_ids
            )
            return "exhausted"
        if parked:
            finalize()
            self._settle(incident, "skipped", REASON_AWAITING_CLIENT_INTERACTION)
            return "parked"
        context = ChatRecoveryContext(
            incident_id=identity.incident_id,
            recovery_root_request_id=identity.root_request_id,
            attempt=incident.attempt,
            max_attempts=incident.max_attempts,
            recovery_kind=identity.recovery_kind,
            stream_id=stream_id,
            request_id=identity.request_id,
            partial_text=text,
            partial_parts=parts,
            recovery_data=recovery_data,
            messages=agent.messages,
            created_at=created_at,
            last_body=agent._chat_context.last_body,
            last_client_tools=agent._chat_context.last_client_tools,
        )
        options = agent.on_chat_recovery(context)
        if inspect.isawaitable(options):
            options = await options
        options = options if isinstance(options, Mapping) else {}
        finalize(options.get("persist") is not False)
        if options.get("continue") is False:
            self._settle(incident, "skipped", REASON_CONTINUE_DISABLED)
            return "declined"
        last = agent.messages[-1:]
        if identity.recovery_kind == "continue" and last and last[0].get("role") != "assistant":
            # a new message's partial was dropped: nothing to continue, answer the user again
            identity = replace(identity, recovery_kind="retry")
        target = self._target(identity.recovery_kind, identity.latest_user_message_id)
        scheduled = transition_incident(incident, "scheduled", recovery_kind=identity.recovery_kind)
        self._store.write(scheduled.incident, identity.incident_id)
        for event in scheduled.events:
            agent._emit(event.type, dict(event.payload))
        self._recovering(True, identity.root_request_id)
        await agent.schedule(
            delay,
            RECOVERY_CALLBACK,
            {
                "incidentId": identity.incident_id,
                "kind": identity.recovery_kind,
                "root": identity.root_request_id,
                "target": target,
                **({"originMessageIds": origin_ids} if origin_ids else {}),
            },
            idempotent=True,  # one attempt per incident, however often this wake repeats
        )
        return "scheduled"

    def _target(self, kind: str, user_id: Any) -> str | None:
        """What the attempt extends: the last assistant message (continue) or the unanswered
        user message (retry); a conversation that moved past it is not recovered."""
        if kind == "retry":
            return str(user_id) if user_id else None
        last = [m for m in self._agent.messages if m.get("role") == "assistant"][-1:]
        return str(last[0]["id"]) if last else None

    # -- the attempt ----------------------------------------------------------------------------
    async def run(self, payload: Mapping[str, Any]) -> None:
        """The scheduled attempt (the ``_chat_recovery_run`` schedule's callback)."""
        agent = self._agent
        incident_id = str(payload.get("incidentId", ""))
        incident = self._store.read(incident_id)
        if incident is None or incident.status in _SEALED:
            return
        kind: ChatRecoveryKind = "retry" if payload.get("kind") == "retry" else "continue"
        attempt = ChatRecoveryAttempt(self._isolate, secrets.token_hex(8))
        incident, exhausted = admit_attempt(
            incident,
            attempt,
            self._config,
            awaiting_client_interaction=agent.has_pending_interaction(),
        )
        self._store.write(incident, incident_id)
        if exhausted:
            await self._exhaust(
                incident, "", [], "", message_ids=_ids(payload.get("originMessageIds"))
            )
            return
        stable = await agent.wait_until_stable(within=self._config.stable_timeout_ms / 1000)
        if not stable:
            await self._stable_timeout(incident, attempt, payload)
            return
        moved_on = superseded_reason(kind, target_id=payload.get("target"), messages=agent.messages)
        if moved_on is not None:
            self._settle(incident, "skipped", moved_on)
            return
        root = str(payload.get("root") or incident.root_request_id)
        wait_until(
            agent.ctx,
            self._attempt(
                incident_id, attempt, kind, root, payload.get("target"),
                _ids(payload.get("originMessageIds")),
            ),
        )  # fmt: skip

    async def _stable_timeout(
        self, incident: ChatRecoveryIncident, attempt: ChatRecoveryAttempt, payload: Any
    ) -> None:
        """The attempt never saw a stable agent: park on a pending client interaction, else
        spend one attempt and retry 3 s later (deploy churn), else give up (the SDK's
        ``_rescheduleRecoveryAfterStableTimeout``)."""
        agent = self._agent
        incident = finish_attempt(incident, attempt) or incident
        outcome = after_stable_timeout(
            incident,
            now_ms=int(agent._core.now()),
            client_interaction_pending=agent.has_pending_interaction(),
        )
        if outcome.action == "park":
            self._settle(incident, "skipped", REASON_AWAITING_CLIENT_INTERACTION)
        elif outcome.action == "reschedule" and outcome.incident is not None:
            self._store.write(outcome.incident, incident.incident_id)
            await agent.schedule(outcome.delay_seconds, RECOVERY_CALLBACK, dict(payload))
        else:
            await self._exhaust(
                incident, "", [], "", reason=REASON_STABLE_TIMEOUT,
                message_ids=_ids(payload.get("originMessageIds")),
            )  # fmt: skip

    async def _attempt(
        self,
        incident_id: str,
        attempt: ChatRecoveryAttempt,
        kind: str,
        root: str,
        target: Any,
        origin_ids: list[str],
    ) -> None:
        agent = self._agent
        context = agent._chat_context
        if kind == "continue":
            spec = TurnSpec(
                new_request_id(),
                continuation=True,
                origin_ids=origin_ids,  # every frame of the chain names the user's message
                body=context.last_body,
                client_tools=context.last_client_tools,
                recovery_root=root,
            )
        else:
            spec = TurnSpec(
                new_request_id(),
                origin_ids=[str(target)] if target else [],
                body=context.last_body,
                client_tools=context.last_client_tools,
                recovery_root=root,
            )
        result = await agent._chat_enqueue(spec)
        incident = self._store.read(incident_id)
        if incident is None:
            return
        incident = finish_attempt(incident, attempt) or incident
        status = result.get("status")
        if status == "recovering":  # it stalled: the stall path scheduled the next attempt
            self._store.write(incident, incident_id)
        elif status == "completed":
            self._settle(incident, "completed")
        elif status == "skipped":
            self._settle(incident, "skipped", "conversation_changed")
        else:
            # The turn sent its own error frame; a client that connects later must learn it
            # too (the terminal record), never find a reply that merely looks complete.
            error = str(result.get("error") or status)
            self._kv.put(
                CHAT_LAST_TERMINAL_KEY, terminal_record(spec.request_id, error, origin_ids)
            )
            self._settle(incident, "failed", error)

    # -- endings ------------------------------------------------------------------------------
    def _settle(
        self, incident: ChatRecoveryIncident, status: str, reason: str | None = None
    ) -> None:
        moved = transition_incident(incident, status, reason=reason)
        self._store.write(moved.incident, incident.incident_id)
        for event in moved.events:
            self._agent._emit(event.type, dict(event.payload))
        if moved.recovering is False:
            self._recovering(False, incident.root_request_id)

    async def _exhaust(
        self,
        incident: ChatRecoveryIncident,
        partial_text: str,
        partial_parts: list[Any],
        stream_id: str,
        *,
        reason: str | None = None,
        finalize: Callable[..., None] | None = None,
        message_ids: list[str] | None = None,
    ) -> None:
        """Give up: the incident sealed, "recovering" cleared, the partial kept (``finalize``),
        then the terminal message to everyone, remembered for later connections — the
        published package's order (``recovering: false``, the transcript, the error), with no
        plain ``done`` — and ``on_exhausted`` once."""
        agent = self._agent
        config = self._config
        sealed = (
            give_up_incident(
                incident,
                reason=reason,
                now_ms=int(agent._core.now()),
                config=config,
                incident_id=incident.incident_id,
                root_request_id=incident.root_request_id,
                recovery_kind=incident.recovery_kind,
            )
            if reason is not None
            else incident
        )
        if sealed is None:
            if finalize is not None:
                finalize()
            return  # sealed already: on_exhausted ran
        context = build_exhausted_context(
            sealed,
            config,
            partial_text=partial_text,
            partial_parts=partial_parts,
            stream_id=stream_id,
            created_at=int(sealed.first_seen_at),
        )
        message = config.terminal_message
        self._store.write(sealed, incident.incident_id)
        self._recovering(False, incident.root_request_id)
        if finalize is not None:
            finalize()
        agent._chat_broadcast(
            frames.response_frame(
                incident.request_id, message, done=True, error=True, message_ids=message_ids
            )
        )
        self._kv.put(
            CHAT_LAST_TERMINAL_KEY, terminal_record(incident.request_id, message, message_ids)
        )
        _log.warning(
            "agent %s: chat recovery of %s gave up: %s",
            agent.name,
            incident.root_request_id,
            context.reason,
        )
        agent._emit(EVENT_EXHAUSTED, context.to_json())
        if config.on_exhausted is not None:
            try:
                result = config.on_exhausted(context)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                await agent._core.report(exc, None)
