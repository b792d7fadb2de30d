"""The chat recovery decision tests' fixtures: an explicit clock, a stock config and incident.

Every recovery test drives the pure half with explicit ``now_ms`` values (a manual clock: no
sleeps, no wall time) and an explicit durable progress counter, following the SDK's
``recovery-incident.ts``; these are the values and builders they share.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agents.chat.recovery import (
    ChatRecoveryAttempt,
    ChatRecoveryConfig,
    ChatRecoveryIncident,
    IncidentDecision,
    InterruptedTrigger,
    RecoveryIdentity,
    RecoveryTrigger,
    StalledTrigger,
    evaluate_incident,
)

__all__ = [
    "CFG",
    "HOUR",
    "IDENT",
    "MIN",
    "SEC",
    "STALLED",
    "T0",
    "att",
    "incident",
    "interrupted",
    "step",
]


T0 = 1_795_689_310_700  # an epoch-ms "now" like the live runs'
SEC = 1000
MIN = 60 * SEC
HOUR = 60 * MIN
CFG = ChatRecoveryConfig()
IDENT = RecoveryIdentity(request_id="r1", recovery_kind="continue", latest_user_message_id="u1")
STALLED = StalledTrigger()


def att(isolate: str, token: str | None = None) -> ChatRecoveryAttempt:
    return ChatRecoveryAttempt(isolate, token or f"{isolate}-t")


def interrupted(isolate: str = "iso-now", token: str | None = None) -> InterruptedTrigger:
    return InterruptedTrigger(att(isolate, token))


def incident(**overrides: Any) -> ChatRecoveryIncident:
    base = ChatRecoveryIncident(
        incident_id="r1:u1",
        request_id="r1",
        recovery_root_request_id="r1",
        recovery_kind="continue",
        attempt=1,
        max_attempts=10,
        status="attempting",
        first_seen_at=T0,
        last_attempt_at=T0,
        last_progress_at=T0,
        progress=0,
        work_baseline=0,
    )
    return replace(base, **overrides)


async def step(
    existing: ChatRecoveryIncident | None,
    *,
    now: int,
    progress: int = 0,
    trigger: RecoveryTrigger = STALLED,
    config: ChatRecoveryConfig = CFG,
    parked: bool = False,
    identity: RecoveryIdentity = IDENT,
    on_error: Any = None,
) -> IncidentDecision:
    return await evaluate_incident(
        existing,
        config,
        identity=identity,
        trigger=trigger,
        now_ms=now,
        current_progress=progress,
        awaiting_client_interaction=parked,
        on_should_keep_recovering_error=on_error,
    )
