"""The pure steps around the budget decision: classify a turn, move an incident through its
statuses, handle a stable-state timeout, give up, and the small records that go with them.

Each function mirrors one piece of the SDK's recovery engine or ``AIChatAgent`` glue with the
storage I/O taken out: it returns the record to write (or ``None`` to delete / do nothing), the
events to emit and, where it matters, the "recovering…" flag to set. The caller owns the writes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

from .config import ChatRecoveryConfig
from .constants import (
    CHAT_RECOVERING_FLAG_TTL_MS,
    CHAT_RECOVERY_STABLE_RETRY_DELAY_SECONDS,
    REASON_AWAITING_CLIENT_INTERACTION,
    REASON_CONVERSATION_CHANGED,
    REASON_MAX_ATTEMPTS_EXCEEDED,
    REASON_NO_UNANSWERED_USER_MESSAGE,
    REASON_STABLE_TIMEOUT_RETRY,
    REASON_USER_CANCELLED,
)
from .context import ChatRecoveryExhaustedContext, ChatRecoveryKind
from .decision import (
    EVENT_COMPLETED,
    EVENT_EXHAUSTED,
    EVENT_FAILED,
    EVENT_SCHEDULED,
    EVENT_SKIPPED,
    RecoveryEvent,
    incident_event,
)
from .incident import ChatRecoveryIncident

__all__ = [
    "MAX_BACKOFF_SECONDS",
    "MAX_RETRY_AFTER_SECONDS",
    "RecoveryClassification",
    "StableTimeoutOutcome",
    "Transition",
    "after_stable_timeout",
    "build_exhausted_context",
    "classify_recovery_kind",
    "exhausted_event",
    "give_up_incident",
    "is_recovery_cancelled",
    "record_transient_retry",
    "recovering_flag_active",
    "recovering_record",
    "recovery_backoff_seconds",
    "superseded_reason",
    "terminal_record",
    "transition_incident",
]

#: Cap on the exponential back-off between transient-error recoveries.
MAX_BACKOFF_SECONDS: Final = 30
#: Cap on a provider ``Retry-After`` honoured for a rate-limited recovery.
MAX_RETRY_AFTER_SECONDS: Final = 60


# -- classification ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecoveryClassification:
    """``kind`` for the incident and ``on_chat_recovery``; ``retry_pre_stream`` when the turn died
    before any stream existed (the dispatch then retries ``latestUserMessageId`` directly)."""

    kind: ChatRecoveryKind
    retry_pre_stream: bool


def classify_recovery_kind(
    snapshot: Mapping[str, Any] | None,
    *,
    stream_id: str,
    partial_text: str,
    partial_parts: Sequence[Any],
    messages: Sequence[Mapping[str, Any]],
) -> RecoveryClassification:
    """Retry or continue an interrupted turn (research §5.9 step 3).

    ``retry`` when a new (non-continuation) turn produced nothing — no text, no parts — and the
    transcript's leaf is still the snapshot's unanswered user message: either no stream was
    opened at all (``retry_pre_stream``), or one was opened but nothing in it survived. Continuing
    such a turn would merge into the *previous* assistant message (SDK #1691). Anything else is
    ``continue``. ``snapshot`` is the chat-turn envelope (camelCase keys); ``None`` continues.
    """
    leaf = messages[-1] if messages else None
    user_id = snapshot.get("latestUserMessageId") if snapshot is not None else None
    unanswered = (
        snapshot is not None
        and not snapshot.get("continuation")
        and bool(user_id)
        and partial_text == ""
        and len(partial_parts) == 0
        and leaf is not None
        and leaf.get("role") == "user"
        and leaf.get("id") == user_id
    )
    pre_stream = unanswered and not stream_id
    return RecoveryClassification("retry" if unanswered else "continue", pre_stream)


def superseded_reason(
    kind: ChatRecoveryKind, *, target_id: str | None, messages: Sequence[Mapping[str, Any]]
) -> str | None:
    """Why a scheduled recovery must be skipped because the conversation moved on, or ``None``.

    A continuation targets the assistant message it extends: if the last assistant message is
    another one, a newer turn happened → ``conversation_changed``. A retry targets the unanswered
    user message: a non-user leaf → ``no_unanswered_user_message``; another user message →
    ``conversation_changed``.
    """
    leaf = messages[-1] if messages else None
    if kind == "continue":
        if not target_id:
            return None
        last_assistant = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
        if last_assistant is None or last_assistant.get("id") != target_id:
            return REASON_CONVERSATION_CHANGED
        return None
    if leaf is None or leaf.get("role") != "user":
        return REASON_NO_UNANSWERED_USER_MESSAGE
    if target_id and leaf.get("id") != target_id:
        return REASON_CONVERSATION_CHANGED
    return None


# -- status transitions --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Transition:
    """``incident`` to write (``None``: delete the record), ``events`` to emit, and ``recovering``
    — ``True``/``False`` to set/clear the "recovering…" flag (for ``recovering_request_id``),
    ``None`` to leave it."""

    incident: ChatRecoveryIncident | None
    events: tuple[RecoveryEvent, ...]
    recovering: bool | None
    recovering_request_id: str | None = None


def transition_incident(
    incident: ChatRecoveryIncident,
    status: str,
    *,
    reason: str | None = None,
    recovery_kind: ChatRecoveryKind | None = None,
) -> Transition:
    """Move ``incident`` to ``status`` (the SDK's ``updateIncident`` plus ``scheduleRecovery``).

    ``completed`` deletes the record (never retried); any other status is written, keeping the
    old reason unless a new one is given, so the budget survives restarts until the TTL sweep.
    ``scheduled`` emits ``chat:recovery:scheduled`` (with ``recovery_kind`` when the action
    differs from the incident's kind) and sets the flag; ``completed``/``skipped``/``failed``
    emit their event and clear it.
    """
    nxt = (
        None
        if status == "completed"
        else replace(incident, status=status, reason=reason or incident.reason)
    )
    events: tuple[RecoveryEvent, ...] = ()
    recovering: bool | None = None
    if status == "scheduled":
        events = (incident_event(EVENT_SCHEDULED, incident, recovery_kind=recovery_kind),)
        recovering = True
    elif status in ("completed", "skipped", "failed"):
        kind = {"completed": EVENT_COMPLETED, "skipped": EVENT_SKIPPED, "failed": EVENT_FAILED}
        events = (incident_event(kind[status], incident, reason=reason),)
        recovering = False
    return Transition(nxt, events, recovering, incident.root_request_id if recovering else None)


def is_recovery_cancelled(incident: ChatRecoveryIncident | None) -> bool:
    """Whether the user cancelled this incident's scheduled recovery (the callback then bails)."""
    return (
        incident is not None
        and incident.status == "skipped"
        and incident.reason == REASON_USER_CANCELLED
    )


# -- stable-state timeout and giving up ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StableTimeoutOutcome:
    """``park``: write ``transition`` and stop (a client interaction is pending — no attempt
    spent). ``reschedule``: write ``incident`` and enqueue the same callback, non-idempotently,
    after ``delay_seconds``. ``give_up``: the attempts are spent (or the record is gone):
    terminalize with :func:`give_up_incident` and ``reason="stable_timeout"``."""

    action: Literal["park", "reschedule", "give_up"]
    incident: ChatRecoveryIncident | None = None
    transition: Transition | None = None
    delay_seconds: int = 0


def after_stable_timeout(
    incident: ChatRecoveryIncident | None,
    *,
    now_ms: int,
    client_interaction_pending: bool,
) -> StableTimeoutOutcome:
    """A scheduled recovery waited ``stable_timeout_ms`` and the agent never went idle.

    A pending client interaction parks the incident (``skipped`` /
    ``awaiting_client_interaction``): the client's own tool result or approval resumes the turn,
    and retrying would only time out again until a healthy turn were sealed. Otherwise the wait
    is usually deploy churn: reschedule after 3 s, spending one attempt, until the incident's
    ``max_attempts``. Deliberately outside :func:`~.decision.evaluate_incident`: this is a coarse
    retry of the same attempt, not a new interruption.
    """
    if client_interaction_pending:
        park = (
            None
            if incident is None
            else transition_incident(incident, "skipped", reason=REASON_AWAITING_CLIENT_INTERACTION)
        )
        return StableTimeoutOutcome("park", transition=park)
    if incident is None or incident.attempt >= incident.max_attempts:
        return StableTimeoutOutcome("give_up")
    bumped = replace(
        incident,
        attempt=incident.attempt + 1,
        status="scheduled",
        last_attempt_at=now_ms,
        reason=REASON_STABLE_TIMEOUT_RETRY,
    )
    return StableTimeoutOutcome(
        "reschedule", incident=bumped, delay_seconds=CHAT_RECOVERY_STABLE_RETRY_DELAY_SECONDS
    )


def give_up_incident(
    stored: ChatRecoveryIncident | None,
    *,
    reason: str,
    now_ms: int,
    config: ChatRecoveryConfig,
    incident_id: str,
    root_request_id: str,
    recovery_kind: ChatRecoveryKind,
) -> ChatRecoveryIncident | None:
    """The sealed incident of a give-up (``stable_timeout``, ``out_of_memory``,
    ``interrupted_attempts_exceeded``), or ``None`` if ``stored`` is already sealed.

    ``None`` is the re-entry guard: a duplicate stale callback must not fire ``on_exhausted`` or
    the banner twice. A missing record (swept, never written) is synthesized so the turn still
    terminalizes instead of vanishing. Terminalize first, then write the seal: a seal written
    first would turn a re-run after a failed terminal write into a no-op.
    """
    if stored is not None:
        if stored.status == "exhausted":
            return None
        return replace(stored, status="exhausted", reason=reason)
    return ChatRecoveryIncident(
        incident_id=incident_id,
        request_id=root_request_id,
        recovery_root_request_id=root_request_id,
        recovery_kind=recovery_kind,
        attempt=0 if math.isinf(config.max_attempts) else int(config.max_attempts),
        max_attempts=config.max_attempts,
        status="exhausted",
        first_seen_at=now_ms,
        last_attempt_at=now_ms,
        reason=reason,
    )


def build_exhausted_context(
    incident: ChatRecoveryIncident,
    config: ChatRecoveryConfig,
    *,
    partial_text: str,
    partial_parts: Sequence[Any],
    stream_id: str,
    created_at: int,
) -> ChatRecoveryExhaustedContext:
    """The ``on_exhausted`` context; a sealed incident without a reason reads as
    ``max_attempts_exceeded``, as in the SDK."""
    return ChatRecoveryExhaustedContext(
        incident_id=incident.incident_id,
        request_id=incident.request_id,
        recovery_root_request_id=incident.root_request_id,
        attempt=incident.attempt,
        max_attempts=incident.max_attempts,
        recovery_kind=incident.recovery_kind,
        stream_id=stream_id,
        created_at=created_at,
        partial_text=partial_text,
        partial_parts=partial_parts,
        reason=incident.reason or REASON_MAX_ATTEMPTS_EXCEEDED,
        terminal_message=config.terminal_message,
    )


def exhausted_event(ctx: ChatRecoveryExhaustedContext) -> RecoveryEvent:
    """``chat:recovery:exhausted`` with the whole exhausted context as payload. Emit it before
    ``on_exhausted`` runs, and let neither block the terminal banner."""
    return RecoveryEvent(EVENT_EXHAUSTED, ctx.to_json())


# -- transient retries ---------------------------------------------------------------------------


def record_transient_retry(incident: ChatRecoveryIncident) -> tuple[ChatRecoveryIncident, int]:
    """Count one more recovery scheduled after a stall or transient error: ``(incident, n)``.

    Bumped before scheduling, never reset by progress: a turn that streams a little and stalls
    resets the progress-keyed attempt cap every time, so this is its only bound.
    """
    retries = (incident.transient_retries or 0) + 1
    return replace(incident, transient_retries=retries), retries


def recovery_backoff_seconds(retries: int, retry_after_seconds: float | None = None) -> float:
    """Delay before the ``retries``-th transient recovery: ``min(2^(n-1), 30)`` s, extended by a
    provider ``Retry-After`` up to 60 s."""
    backoff: float = min(2.0 ** (retries - 1), MAX_BACKOFF_SECONDS)
    if retry_after_seconds is None:
        return backoff
    return min(max(backoff, retry_after_seconds), MAX_RETRY_AFTER_SECONDS)


# -- the small durable records -------------------------------------------------------------------


def recovering_record(request_id: str | None, now_ms: int) -> dict[str, Any]:
    """The ``cf:chat:recovering`` value: ``{"requestId"?, "at"}``."""
    return {**({"requestId": request_id} if request_id else {}), "at": now_ms}


def recovering_flag_active(record: Any, now_ms: int) -> bool:
    """Whether a stored ``cf:chat:recovering`` value is live (younger than 15 min). An older one
    was abandoned (its clear never ran) and must neither pin the indicator nor suppress a new
    one."""
    if not isinstance(record, Mapping):
        return False
    at = record.get("at")
    at = at if isinstance(at, int | float) and not isinstance(at, bool) else 0
    return now_ms - at < CHAT_RECOVERING_FLAG_TTL_MS


def terminal_record(
    request_id: str, body: str, message_ids: Sequence[str] | None = None
) -> dict[str, Any]:
    """The ``cf:chat:last-terminal`` value: ``{"requestId", "body", "messageIds"?}``."""
    record: dict[str, Any] = {"requestId": request_id, "body": body}
    if message_ids:
        record["messageIds"] = list(message_ids)
    return record
