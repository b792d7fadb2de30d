"""Chat recovery's decision, apart from its budgets: opening an incident, debouncing reconnects,
the ``should_keep_recovering`` hook, which reason wins, and a turn parked on its client.

Every test drives the decision with explicit ``now_ms`` values and an explicit progress counter.
"""

from __future__ import annotations

from typing import Any

import pytest

from agents.chat.recovery import (
    CHAT_RECOVERY_ALARM_DEBOUNCE_MS,
    EXHAUSTION_REASONS,
    ChatRecoveryConfig,
    ChatRecoveryIncident,
    ChatRecoveryProgressContext,
    RecoveryIdentity,
)

from .chat_recovery_cases import HOUR, MIN, SEC, T0, att, incident, interrupted, step

# == the decision: opening =======================================================================


async def test_first_detection_opens_the_incident() -> None:
    d = await step(None, now=T0, progress=42)
    assert not d.exhausted and d.reason is None and not d.debounced and not d.made_progress
    assert d.incident.to_json() == {
        "incidentId": "r1:u1",
        "requestId": "r1",
        "recoveryRootRequestId": "r1",
        "recoveryKind": "continue",
        "attempt": 1,
        "maxAttempts": 10,
        "status": "attempting",
        "firstSeenAt": T0,
        "lastAttemptAt": T0,
        "lastProgressAt": T0,
        "progress": 42,
        "workBaseline": 42,  # work is measured from here, not from zero
    }
    payload = {
        "incidentId": "r1:u1",
        "requestId": "r1",
        "attempt": 1,
        "maxAttempts": 10,
        "recoveryKind": "continue",
    }
    assert [(e.type, e.payload) for e in d.events] == [
        ("chat:recovery:detected", payload),
        ("chat:recovery:attempt", payload),
    ]
    assert d.attempt_in_flight is None  # a stall records no attempt


async def test_a_replay_counts_the_original_turns_death_and_records_itself() -> None:
    d = await step(None, now=T0, trigger=interrupted("iso-a", "t1"))
    assert d.incident.interrupted_attempts == 1
    assert d.incident.attempts_in_flight == (att("iso-a", "t1"),)
    assert d.attempt_in_flight == att("iso-a", "t1")


async def test_later_evaluations_emit_only_the_attempt_event() -> None:
    d = await step(incident(), now=T0 + MIN)
    assert [e.type for e in d.events] == ["chat:recovery:attempt"]
    assert d.events[0].payload["attempt"] == 2


async def test_the_continuation_chain_keeps_the_root_and_reports_the_current_request() -> None:
    ident = RecoveryIdentity(
        "r7", "retry", recovery_root_request_id="r1", latest_user_message_id="u1"
    )
    d = await step(incident(), now=T0 + MIN, identity=ident)
    assert d.incident.incident_id == "r1:u1"
    assert (d.incident.request_id, d.incident.recovery_root_request_id) == ("r7", "r1")
    assert d.incident.recovery_kind == "retry"
    assert d.incident.first_seen_at == T0


# == debounce ====================================================================================


@pytest.mark.parametrize(
    ("delta", "progress", "debounced", "attempt"),
    [
        (0, 0, True, 3),
        (CHAT_RECOVERY_ALARM_DEBOUNCE_MS - 1, 0, True, 3),  # same storm: same attempt
        (CHAT_RECOVERY_ALARM_DEBOUNCE_MS, 0, False, 4),  # window is half-open
        (CHAT_RECOVERY_ALARM_DEBOUNCE_MS + 1, 0, False, 4),
        (5 * SEC, 1, False, 1),  # progress beats debounce and resets the count
    ],
)
async def test_debounce(delta: int, progress: int, debounced: bool, attempt: int) -> None:
    existing = incident(attempt=3, last_attempt_at=T0 + MIN, last_progress_at=T0 + MIN)
    d = await step(existing, now=T0 + MIN + delta, progress=progress)
    assert (d.debounced, d.incident.attempt, d.exhausted) == (debounced, attempt, False)
    assert d.incident.last_attempt_at == T0 + MIN + delta


async def test_a_reconnect_storm_costs_one_attempt() -> None:
    d = await step(None, now=T0)
    for offset in (4, 9, 15, 22):  # one deploy drops the socket over ~22 s
        d = await step(d.incident, now=T0 + offset * SEC)
        assert d.debounced and d.incident.attempt == 1
    d = await step(d.incident, now=T0 + 22 * SEC + CHAT_RECOVERY_ALARM_DEBOUNCE_MS)
    assert not d.debounced and d.incident.attempt == 2


# == should_keep_recovering ======================================================================


class Hook:
    def __init__(self, answer: Any = True, *, is_async: bool = False, raises: bool = False):
        self.calls: list[ChatRecoveryProgressContext] = []
        self.answer, self.is_async, self.raises = answer, is_async, raises

    def __call__(self, ctx: ChatRecoveryProgressContext) -> Any:
        self.calls.append(ctx)
        if self.raises:
            raise RuntimeError("buggy hook")
        if self.is_async:

            async def later() -> Any:
                return self.answer

            return later()
        return self.answer


async def test_should_keep_recovering_is_not_asked_on_first_detection() -> None:
    hook = Hook(False)
    d = await step(None, now=T0, config=ChatRecoveryConfig(should_keep_recovering=hook))
    assert not d.exhausted and hook.calls == []


@pytest.mark.parametrize("is_async", [False, True])
async def test_should_keep_recovering_false_aborts(is_async: bool) -> None:
    hook = Hook(False, is_async=is_async)
    config = ChatRecoveryConfig(should_keep_recovering=hook)
    existing = incident(attempt=1, progress=30, work_baseline=10, first_seen_at=T0 - MIN)
    d = await step(existing, now=T0 + MIN, progress=30, config=config)
    assert d.exhausted and d.reason == "recovery_aborted"
    assert hook.calls == [
        ChatRecoveryProgressContext(
            incident_id="r1:u1",
            request_id="r1",
            recovery_root_request_id="r1",
            attempt=2,
            max_attempts=10,
            recovery_kind="continue",
            work=20,
            age_ms=2 * MIN,
        )
    ]


@pytest.mark.parametrize("answer", [True, None, 0, "no"])
async def test_only_false_aborts(answer: Any) -> None:
    config = ChatRecoveryConfig(should_keep_recovering=Hook(answer))
    d = await step(incident(), now=T0 + MIN, config=config)
    assert not d.exhausted


async def test_a_raising_hook_keeps_recovering_and_is_reported() -> None:
    errors: list[Exception] = []
    config = ChatRecoveryConfig(should_keep_recovering=Hook(raises=True))
    d = await step(incident(), now=T0 + MIN, config=config, on_error=errors.append)
    assert not d.exhausted and len(errors) == 1 and str(errors[0]) == "buggy hook"


@pytest.mark.parametrize(
    ("existing", "progress"),
    [
        (incident(last_progress_at=T0 - 10 * MIN), 0),  # no-progress already sealed it
        (incident(work_baseline=0), 20_000),  # work already sealed it
        (incident(attempt=10, last_attempt_at=T0 - MIN), 0),  # attempt cap already sealed it
        (incident(transient_retries=10), 0),
        (incident(interrupted_attempts=5), 0),
    ],
)
async def test_should_keep_recovering_is_not_asked_after_a_hard_bound(
    existing: ChatRecoveryIncident, progress: int
) -> None:
    hook = Hook(False)
    config = ChatRecoveryConfig(should_keep_recovering=hook)
    d = await step(existing, now=T0 + 30 * SEC, progress=progress, config=config)
    assert d.exhausted and d.reason != "recovery_aborted" and hook.calls == []


# == reasons, when several bounds trip at once ===================================================


@pytest.mark.parametrize(
    ("overrides", "progress", "reason"),
    [
        (
            {"interrupted_attempts": 5, "last_progress_at": T0 - HOUR, "attempt": 10},
            99_999,
            "interrupted_attempts_exceeded",
        ),
        ({"last_progress_at": T0 - HOUR, "attempt": 10}, 99_999, "work_budget_exceeded"),
        ({"last_progress_at": T0 - HOUR, "attempt": 10}, 0, "no_progress_timeout"),
        ({"attempt": 10}, 0, "max_attempts_exceeded"),
    ],
)
async def test_reason_priority(overrides: dict[str, Any], progress: int, reason: str) -> None:
    """interrupted > work > no progress > caller > attempts, when several trip together."""
    existing = incident(last_attempt_at=T0 - MIN, progress=progress, work_baseline=0, **overrides)
    d = await step(existing, now=T0, progress=progress)
    assert d.exhausted and d.reason == reason and reason in EXHAUSTION_REASONS


# == parked on a client interaction ==============================================================


async def test_a_parked_turn_spends_no_budget() -> None:
    hook = Hook(False)
    config = ChatRecoveryConfig(should_keep_recovering=hook, max_recovery_work=10)
    existing = incident(
        attempt=10,
        last_attempt_at=T0 - MIN,
        last_progress_at=T0 - 2 * HOUR,  # hours without progress
        work_baseline=0,
        transient_retries=10,
        interrupted_attempts=4,
        attempts_in_flight=(att("iso-dead"),),
    )
    d = await step(existing, now=T0, progress=500, trigger=interrupted("iso-z"), parked=True)
    d = await step(d.incident, now=T0 + MIN, progress=600, parked=True, config=config)
    assert d.parked and not d.exhausted and d.reason is None
    assert d.incident.attempt == 1  # progress was seen; and a parked turn never climbs
    assert d.incident.last_progress_at == T0 + MIN  # the no-progress clock is kept fresh
    assert d.incident.interrupted_attempts == 5  # the death happened: counted, not sealed
    assert d.incident.status == "attempting" and hook.calls == []


async def test_parked_evaluations_hold_the_attempt_number() -> None:
    existing = incident(attempt=7, last_attempt_at=T0)
    d = await step(existing, now=T0 + MIN, parked=True)
    for k in range(2, 20):
        d = await step(d.incident, now=T0 + k * MIN, parked=True)
    assert d.incident.attempt == 7 and not d.exhausted
    # once the human answered, the turn has its full window and its remaining attempts
    d = await step(d.incident, now=T0 + 19 * MIN + 4 * MIN)
    assert not d.exhausted and d.incident.attempt == 8
