"""The recovery budget: one pure decision over an incident, the config, a clock and a counter.

:func:`evaluate_incident` is the Python twin of the SDK's ``evaluateChatRecoveryIncident``: no
storage, no wall clock, no broadcasts. The caller reads the existing incident and the durable
progress counter, passes ``now_ms``, and persists, confirms and emits what comes back. The
instruments are separate because each catches a different failure:

* **stuck** — the no-progress window. Measured from the last evaluation that saw the durable
  progress counter rise, so a turn that keeps producing content survives deploy churn however
  long it runs, while a turn that produces nothing is sealed after ``no_progress_timeout_ms``.
  A fixed wall-clock ceiling used to kill healthy long turns (SDK #1672); that is why there is
  none.
* **debounce** — triggers within 30 s of the last attempt (and with no progress since) reuse
  that attempt: one deploy's reconnect storm is one attempt, not five.
* **alarm loop** — the attempt cap (``max_attempts``); reset by progress.
* **runaway** — the work budget: ``progress - work_baseline`` against ``max_recovery_work``.
  Progress and debounce reset the other meters, so a loop that crashes after crediting a little
  output on every wake (SDK #1825) is only ever caught by work, which only climbs.
* **crash loop** — interrupted attempts (``max_interrupted_attempts``). Counted by the *next*
  isolate (the one that died cannot write) and never reset by progress: a turn that re-runs and
  dies again streams output too.
* **transient retries** — recoveries scheduled after stalls / transient errors, capped by
  ``max_attempts``; neither debounced nor reset by progress, so a provider that fails within
  seconds every time still runs out.
* **caller** — ``should_keep_recovering(ctx)``, from the second evaluation on and only while no
  hard bound has sealed the incident; a hook that raises means "keep going".

A turn parked on a pending client interaction (a client tool awaiting its result, an approval
awaiting the human) is waiting, not stuck: every bound is suppressed, the no-progress clock is
kept fresh and — unlike the SDK, see :func:`evaluate_incident` — no attempt is spent.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from .config import ChatRecoveryConfig
from .constants import (
    CHAT_RECOVERY_ALARM_DEBOUNCE_MS,
    REASON_INTERRUPTED_ATTEMPTS_EXCEEDED,
    REASON_MAX_ATTEMPTS_EXCEEDED,
    REASON_NO_PROGRESS_TIMEOUT,
    REASON_RECOVERY_ABORTED,
    REASON_WORK_BUDGET_EXCEEDED,
)
from .context import ChatRecoveryKind, ChatRecoveryProgressContext
from .incident import (
    ChatRecoveryAttempt,
    ChatRecoveryIncident,
    chat_recovery_incident_id,
    dead_isolate_count,
    live_attempts,
)

__all__ = [
    "EVENT_ATTEMPT",
    "EVENT_COMPLETED",
    "EVENT_DETECTED",
    "EVENT_EXHAUSTED",
    "EVENT_FAILED",
    "EVENT_SCHEDULED",
    "EVENT_SKIPPED",
    "IncidentDecision",
    "InterruptedTrigger",
    "RecoveryEvent",
    "RecoveryIdentity",
    "RecoveryTrigger",
    "StalledTrigger",
    "evaluate_incident",
    "incident_event",
]

EVENT_DETECTED: Final = "chat:recovery:detected"
EVENT_ATTEMPT: Final = "chat:recovery:attempt"
EVENT_SCHEDULED: Final = "chat:recovery:scheduled"
EVENT_COMPLETED: Final = "chat:recovery:completed"
EVENT_SKIPPED: Final = "chat:recovery:skipped"
EVENT_FAILED: Final = "chat:recovery:failed"
EVENT_EXHAUSTED: Final = "chat:recovery:exhausted"


@dataclass(frozen=True, slots=True)
class RecoveryEvent:
    """An observability event to emit: the SDK's ``type`` and camelCase ``payload``."""

    type: str
    payload: dict[str, Any]


def incident_event(
    type: str,
    incident: ChatRecoveryIncident,
    *,
    recovery_kind: ChatRecoveryKind | None = None,
    reason: str | None = None,
) -> RecoveryEvent:
    """An incident lifecycle event: ``{incidentId, requestId, attempt, maxAttempts,
    recoveryKind, reason?}`` as the SDK's ``emitRecoveryEvent`` sends it."""
    payload: dict[str, Any] = {
        "incidentId": incident.incident_id,
        "requestId": incident.request_id,
        "attempt": incident.attempt,
        "maxAttempts": incident.max_attempts,
        "recoveryKind": recovery_kind or incident.recovery_kind,
    }
    if reason:
        payload["reason"] = reason
    return RecoveryEvent(type, payload)


@dataclass(frozen=True, slots=True)
class RecoveryIdentity:
    """Which turn is being recovered. ``recovery_root_request_id`` is the chain's first request
    (``None`` = this one); ``latest_user_message_id`` the user message the turn answers."""

    request_id: str
    recovery_kind: ChatRecoveryKind
    recovery_root_request_id: str | None = None
    latest_user_message_id: str | None = None

    @property
    def incident_id(self) -> str:
        return chat_recovery_incident_id(
            self.request_id, self.recovery_root_request_id, self.latest_user_message_id
        )

    @property
    def root_request_id(self) -> str:
        if self.recovery_root_request_id is not None:
            return self.recovery_root_request_id
        return self.request_id


@dataclass(frozen=True, slots=True)
class InterruptedTrigger:
    """A later isolate is replaying a turn whose isolate died. The replay is itself an attempt,
    recorded as ``attempt`` (this isolate's id and a fresh token)."""

    attempt: ChatRecoveryAttempt


@dataclass(frozen=True, slots=True)
class StalledTrigger:
    """A live isolate caught a stalled or failed stream. Nothing died, so no interruption is
    counted; the caller bounds these through ``transient_retries``."""


RecoveryTrigger = InterruptedTrigger | StalledTrigger


@dataclass(frozen=True, slots=True)
class IncidentDecision:
    """What :func:`evaluate_incident` decided.

    ``incident`` is the record to persist (and confirm) before acting. ``exhausted`` with
    ``reason`` means give up now (terminal UX, ``on_exhausted``). ``attempt_in_flight`` is the
    attempt this evaluation recorded, which the caller must remove with
    :func:`~.incident.finish_attempt` when the replay settles (``None`` when nothing was
    recorded). ``events`` are to be emitted in order, after the write is confirmed.
    """

    incident: ChatRecoveryIncident
    exhausted: bool
    reason: str | None
    made_progress: bool
    debounced: bool
    parked: bool
    work: int
    attempt_in_flight: ChatRecoveryAttempt | None
    events: tuple[RecoveryEvent, ...]


async def _keep_recovering(
    config: ChatRecoveryConfig,
    ctx: ChatRecoveryProgressContext,
    on_error: Callable[[Exception], None] | None,
) -> bool:
    hook = config.should_keep_recovering
    if hook is None:
        return True
    try:
        decision: Any = hook(ctx)
        if inspect.isawaitable(decision):
            decision = await decision
    except Exception as exc:  # a buggy hook must not wedge the turn
        if on_error is not None:
            on_error(exc)
        return True
    return decision is not False


async def evaluate_incident(
    existing: ChatRecoveryIncident | None,
    config: ChatRecoveryConfig,
    *,
    identity: RecoveryIdentity,
    trigger: RecoveryTrigger,
    now_ms: int,
    current_progress: int,
    awaiting_client_interaction: bool = False,
    on_should_keep_recovering_error: Callable[[Exception], None] | None = None,
) -> IncidentDecision:
    """Open or re-evaluate the incident for ``identity``; decide whether recovery may go on.

    ``existing`` is the stored incident under ``identity.incident_id`` (after the stale sweep),
    ``current_progress`` the durable progress counter now. The only await is the user's
    ``should_keep_recovering`` hook.

    One deliberate divergence from the SDK: while ``awaiting_client_interaction`` the attempt
    number is held, not incremented. The SDK suppresses the seal but still counts the attempt,
    so a turn parked through several wakes could be sealed on ``max_attempts_exceeded`` at the
    first evaluation after the human answered; the issue asks that a parked turn spend no budget.
    Interruptions (isolate deaths) are still counted while parked — they happened — but never
    seal a parked turn.
    """
    parked = awaiting_client_interaction
    incident_id = identity.incident_id

    # Progress is read from a durable monotonic counter, never the transcript (compaction would
    # shrink it). A rise since the last evaluation means the turn is advancing: churn, not a
    # poison turn.
    prev_progress = (existing.progress or 0) if existing is not None else 0
    made_progress = existing is not None and current_progress > prev_progress

    if made_progress or parked or existing is None:
        last_progress_at = now_ms
    else:
        last_progress_at = (
            existing.last_progress_at
            if existing.last_progress_at is not None
            else existing.first_seen_at
        )
    no_progress_exceeded = (
        existing is not None
        and not parked
        and now_ms - last_progress_at > config.no_progress_timeout_ms
    )

    # The same counter doubles as a work meter from the incident's opening.
    work_baseline = (
        existing.work_baseline
        if existing is not None and existing.work_baseline is not None
        else current_progress
    )
    progress = max(prev_progress, current_progress)
    work = progress - work_baseline
    work_exceeded = (
        existing is not None
        and math.isfinite(config.max_recovery_work)
        and work > config.max_recovery_work
    )

    # The isolate that died cannot write, so its death is counted here, by the next attempt. A
    # replay with no incident yet is the original turn's death; otherwise deaths show up as
    # entries other isolates left in attempts_in_flight — one per isolate, however many entries.
    if not isinstance(trigger, InterruptedTrigger):
        newly_interrupted = 0
    elif existing is None:
        newly_interrupted = 1
    else:
        newly_interrupted = dead_isolate_count(existing.attempts_in_flight, trigger.attempt)
    interrupted = (existing.interrupted_attempts or 0) if existing is not None else 0
    interrupted += newly_interrupted
    interrupted_exceeded = not parked and interrupted >= config.max_interrupted_attempts

    transient_retries = (existing.transient_retries or 0) if existing is not None else 0
    transient_exceeded = (
        existing is not None and not parked and transient_retries >= config.max_attempts
    )

    debounced = (
        existing is not None
        and not made_progress
        and now_ms - existing.last_attempt_at < CHAT_RECOVERY_ALARM_DEBOUNCE_MS
    )
    if made_progress:
        attempt = 1
    elif existing is None:
        attempt = 1
    elif debounced or parked:
        attempt = existing.attempt
    else:
        attempt = existing.attempt + 1

    aborted = False
    if (
        existing is not None
        and not parked
        and not (no_progress_exceeded or work_exceeded or interrupted_exceeded)
        and not transient_exceeded
        and attempt <= config.max_attempts
    ):
        ctx = ChatRecoveryProgressContext(
            incident_id=incident_id,
            request_id=identity.request_id,
            recovery_root_request_id=identity.root_request_id,
            attempt=attempt,
            max_attempts=config.max_attempts,
            recovery_kind=identity.recovery_kind,
            work=work,
            age_ms=now_ms - existing.first_seen_at,
        )
        aborted = not await _keep_recovering(config, ctx, on_should_keep_recovering_error)

    exhausted = not parked and (
        interrupted_exceeded
        or no_progress_exceeded
        or work_exceeded
        or aborted
        or transient_exceeded
        or attempt > config.max_attempts
    )
    reason: str | None = None
    if exhausted:
        if interrupted_exceeded:
            reason = REASON_INTERRUPTED_ATTEMPTS_EXCEEDED
        elif work_exceeded:
            reason = REASON_WORK_BUDGET_EXCEEDED
        elif no_progress_exceeded:
            reason = REASON_NO_PROGRESS_TIMEOUT
        elif aborted:
            reason = REASON_RECOVERY_ABORTED
        else:  # the attempt cap, or transient retries (which share max_attempts)
            reason = REASON_MAX_ATTEMPTS_EXCEEDED

    # A replay drops the dead isolates' entries it just counted and records itself (unless the
    # incident is sealed, when nothing will run); a stall leaves the running attempts alone.
    recorded: ChatRecoveryAttempt | None = None
    if isinstance(trigger, InterruptedTrigger):
        running = live_attempts(existing.attempts_in_flight if existing else None, trigger.attempt)
        if not exhausted:
            recorded = trigger.attempt
            running = (*running, recorded)
    else:
        running = tuple(existing.attempts_in_flight or ()) if existing is not None else ()

    incident = ChatRecoveryIncident(
        incident_id=incident_id,
        request_id=identity.request_id,
        recovery_root_request_id=identity.root_request_id,
        recovery_kind=identity.recovery_kind,
        attempt=attempt,
        max_attempts=config.max_attempts,
        status="exhausted" if exhausted else "attempting",
        first_seen_at=existing.first_seen_at if existing is not None else now_ms,
        last_attempt_at=now_ms,
        last_progress_at=last_progress_at,
        progress=progress,
        work_baseline=work_baseline,
        interrupted_attempts=interrupted if interrupted > 0 else None,
        attempts_in_flight=running or None,
        transient_retries=transient_retries if transient_retries > 0 else None,
        reason=reason,
    )
    events = [] if existing is not None else [incident_event(EVENT_DETECTED, incident)]
    events.append(incident_event(EVENT_ATTEMPT, incident))
    return IncidentDecision(
        incident=incident,
        exhausted=exhausted,
        reason=reason,
        made_progress=made_progress,
        debounced=debounced,
        parked=parked,
        work=work,
        attempt_in_flight=recorded,
        events=tuple(events),
    )
