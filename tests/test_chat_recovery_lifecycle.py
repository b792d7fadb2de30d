"""A recovery incident's life after the decision: admitting and finishing attempts, the
stable-state timeout, giving up (once), the exhausted context, status transitions, cancellation."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from agents.chat.recovery import (
    DEFAULT_TERMINAL_MESSAGE,
    admit_attempt,
    after_stable_timeout,
    build_exhausted_context,
    exhausted_event,
    finish_attempt,
    give_up_incident,
    is_recovery_cancelled,
    transition_incident,
)

from .chat_recovery_cases import CFG, MIN, T0, att, incident

# == admitting and finishing attempts ============================================================


def test_admit_counts_dead_isolates_and_records_the_attempt() -> None:
    existing = incident(
        interrupted_attempts=1,
        attempts_in_flight=(att("iso-b", "b1"), att("iso-b", "b2"), att("iso-a", "a0")),
    )
    admitted, exhausted = admit_attempt(existing, att("iso-a", "a1"), CFG)
    assert not exhausted and admitted.interrupted_attempts == 2
    assert admitted.attempts_in_flight == (att("iso-a", "a0"), att("iso-a", "a1"))


@pytest.mark.parametrize(("parked", "exhausted"), [(False, True), (True, False)])
def test_admit_at_the_interruption_budget(parked: bool, exhausted: bool) -> None:
    existing = incident(interrupted_attempts=4, attempts_in_flight=(att("iso-b"),))
    admitted, sealed = admit_attempt(
        existing, att("iso-a", "a1"), CFG, awaiting_client_interaction=parked
    )
    assert sealed is exhausted and admitted.interrupted_attempts == 5
    expected = None if exhausted else (att("iso-a", "a1"),)
    assert admitted.attempts_in_flight == expected


def test_finish_attempt() -> None:
    existing = incident(attempts_in_flight=(att("iso-a", "a1"), att("iso-a", "a2")))
    after = finish_attempt(existing, att("iso-a", "a1"))
    assert after is not None and after.attempts_in_flight == (att("iso-a", "a2"),)
    last = finish_attempt(after, att("iso-a", "a2"))
    assert last is not None and "attemptsInFlight" not in last.to_json()
    assert finish_attempt(last, att("iso-a", "a2")) is None


# == stable-state timeout, giving up, transitions =================================================


def test_stable_timeout_parks_while_a_client_interaction_is_pending() -> None:
    existing = incident(attempt=3, status="scheduled")
    out = after_stable_timeout(existing, now_ms=T0, client_interaction_pending=True)
    assert out.action == "park" and out.transition is not None
    assert out.transition.incident is not None
    assert out.transition.incident.status == "skipped"
    assert out.transition.incident.reason == "awaiting_client_interaction"
    assert out.transition.incident.attempt == 3  # no attempt spent
    assert out.transition.recovering is False
    assert [e.payload.get("reason") for e in out.transition.events] == [
        "awaiting_client_interaction"
    ]


def test_stable_timeout_reschedules_until_the_attempts_run_out() -> None:
    existing = incident(attempt=9, status="attempting")
    out = after_stable_timeout(existing, now_ms=T0 + MIN, client_interaction_pending=False)
    assert out.action == "reschedule" and out.delay_seconds == 3 and out.incident is not None
    assert (out.incident.attempt, out.incident.status, out.incident.reason) == (
        10,
        "scheduled",
        "stable_timeout_retry",
    )
    assert out.incident.last_attempt_at == T0 + MIN
    out = after_stable_timeout(out.incident, now_ms=T0 + 2 * MIN, client_interaction_pending=False)
    assert out.action == "give_up"
    assert after_stable_timeout(None, now_ms=T0, client_interaction_pending=False).action == (
        "give_up"
    )


def test_give_up_seals_once_and_synthesizes_a_missing_record() -> None:
    kwargs: dict[str, Any] = {
        "reason": "stable_timeout",
        "now_ms": T0,
        "config": CFG,
        "incident_id": "r1:u1",
        "root_request_id": "r1",
        "recovery_kind": "continue",
    }
    sealed = give_up_incident(incident(attempt=10), **kwargs)
    assert sealed is not None and (sealed.status, sealed.reason) == ("exhausted", "stable_timeout")
    assert give_up_incident(sealed, **kwargs) is None  # re-entry guard: no second banner
    synthesized = give_up_incident(None, **kwargs)
    assert synthesized is not None
    assert synthesized.to_json() == {
        "incidentId": "r1:u1",
        "requestId": "r1",
        "recoveryRootRequestId": "r1",
        "recoveryKind": "continue",
        "attempt": 10,
        "maxAttempts": 10,
        "status": "exhausted",
        "firstSeenAt": T0,
        "lastAttemptAt": T0,
        "reason": "stable_timeout",
    }


def test_exhausted_context_and_event() -> None:
    sealed = incident(status="exhausted", reason="no_progress_timeout", request_id="r3")
    parts = [{"type": "text", "text": "w0 w1", "state": "streaming"}]
    ctx = build_exhausted_context(
        sealed, CFG, partial_text="w0 w1", partial_parts=parts, stream_id="s1", created_at=T0 - 5
    )
    assert ctx.reason == "no_progress_timeout" and ctx.terminal_message == DEFAULT_TERMINAL_MESSAGE
    event = exhausted_event(ctx)
    assert event.type == "chat:recovery:exhausted"
    assert event.payload == {
        "incidentId": "r1:u1",
        "requestId": "r3",
        "recoveryRootRequestId": "r1",
        "attempt": 1,
        "maxAttempts": 10,
        "recoveryKind": "continue",
        "streamId": "s1",
        "createdAt": T0 - 5,
        "partialText": "w0 w1",
        "partialParts": parts,
        "reason": "no_progress_timeout",
        "terminalMessage": DEFAULT_TERMINAL_MESSAGE,
    }
    unreasoned = build_exhausted_context(
        replace(sealed, reason=None),
        CFG,
        partial_text="",
        partial_parts=[],
        stream_id="",
        created_at=0,
    )
    assert unreasoned.reason == "max_attempts_exceeded"


@pytest.mark.parametrize(
    ("status", "reason", "kind", "writes", "event", "recovering"),
    [
        ("completed", None, None, False, "chat:recovery:completed", False),
        ("scheduled", None, "retry", True, "chat:recovery:scheduled", True),
        ("skipped", "conversation_changed", None, True, "chat:recovery:skipped", False),
        ("failed", "boom", None, True, "chat:recovery:failed", False),
        ("attempting", None, None, True, None, None),
    ],
)
def test_transitions(
    status: str, reason: str | None, kind: Any, writes: bool, event: str | None, recovering: Any
) -> None:
    existing = incident(recovery_root_request_id="r1", request_id="r2", reason="old")
    t = transition_incident(existing, status, reason=reason, recovery_kind=kind)
    if writes:
        assert t.incident is not None and t.incident.status == status
        assert t.incident.reason == (reason or "old")
    else:
        assert t.incident is None  # completed: the record is deleted
    assert [e.type for e in t.events] == ([event] if event else [])
    if event:
        payload = t.events[0].payload
        assert payload["recoveryKind"] == (kind or "continue") and payload["requestId"] == "r2"
        assert payload.get("reason") == reason
    assert t.recovering is recovering
    assert t.recovering_request_id == ("r1" if recovering else None)


def test_user_cancellation_is_recognised() -> None:
    t = transition_incident(incident(status="scheduled"), "skipped", reason="user_cancelled")
    assert is_recovery_cancelled(t.incident)
    assert not is_recovery_cancelled(incident(status="skipped", reason="conversation_changed"))
    assert not is_recovery_cancelled(None)
