"""Chat recovery's budgets: max attempts, the no-progress timeout, the work budget, interrupted
attempts and transient retries (with their back-off), each sealing the incident at its bound.

Every test drives the decision with explicit ``now_ms`` values and an explicit progress counter.
"""

from __future__ import annotations

import math

import pytest

from agents.chat.recovery import (
    ChatRecoveryConfig,
    record_transient_retry,
    recovery_backoff_seconds,
    transition_incident,
)

from .chat_recovery_cases import HOUR, MIN, SEC, STALLED, T0, att, incident, interrupted, step

# == max_attempts ================================================================================


async def test_attempts_without_progress_seal_after_max_attempts() -> None:
    config = ChatRecoveryConfig(no_progress_timeout_ms=math.inf)
    d = await step(None, now=T0, config=config)
    now = T0
    for expected in range(2, 11):
        now += 31 * SEC
        d = await step(d.incident, now=now, config=config)
        assert (d.incident.attempt, d.exhausted) == (expected, False)
    d = await step(d.incident, now=now + 31 * SEC, config=config)
    assert d.exhausted and d.reason == "max_attempts_exceeded"
    assert d.incident.attempt == 11 and d.incident.status == "exhausted"
    assert d.incident.to_json()["reason"] == "max_attempts_exceeded"


async def test_attempts_reset_on_progress() -> None:
    existing = incident(attempt=9, progress=5, work_baseline=0)
    d = await step(existing, now=T0 + MIN, progress=6)
    assert d.made_progress and d.incident.attempt == 1 and d.incident.progress == 6
    assert d.incident.last_progress_at == T0 + MIN
    # the same counter again is not progress
    d = await step(d.incident, now=T0 + 2 * MIN, progress=6)
    assert not d.made_progress and d.incident.attempt == 2


async def test_a_counter_read_lower_than_the_high_water_mark_is_not_progress() -> None:
    d = await step(incident(attempt=2, progress=50), now=T0 + MIN, progress=40)
    assert not d.made_progress and d.incident.progress == 50 and d.incident.attempt == 3


# == no-progress timeout =========================================================================


@pytest.mark.parametrize(
    ("since_progress", "exhausted"),
    [(5 * MIN - 1, False), (5 * MIN, False), (5 * MIN + 1, True)],
)
async def test_no_progress_timeout(since_progress: int, exhausted: bool) -> None:
    existing = incident(attempt=2, last_attempt_at=T0, last_progress_at=T0)
    d = await step(existing, now=T0 + since_progress)
    assert d.exhausted is exhausted
    assert d.reason == ("no_progress_timeout" if exhausted else None)


async def test_no_progress_window_falls_back_to_first_seen_at_for_older_records() -> None:
    existing = incident(first_seen_at=T0, last_progress_at=None)
    d = await step(existing, now=T0 + 5 * MIN + 1)
    assert d.exhausted and d.reason == "no_progress_timeout"


async def test_progress_restarts_the_no_progress_window() -> None:
    existing = incident(first_seen_at=T0, last_progress_at=T0, progress=3)
    d = await step(existing, now=T0 + 4 * MIN, progress=4)
    d = await step(d.incident, now=T0 + 8 * MIN)  # 8 min after opening, 4 after progress
    assert not d.exhausted
    d = await step(d.incident, now=T0 + 9 * MIN + 1)
    assert d.exhausted and d.reason == "no_progress_timeout"


# == work budget =================================================================================


@pytest.mark.parametrize(
    ("progress", "exhausted"),
    [(150, False), (151, True), (10_000, True)],
)
async def test_work_is_measured_from_the_baseline(progress: int, exhausted: bool) -> None:
    config = ChatRecoveryConfig(max_recovery_work=50)
    existing = incident(progress=100, work_baseline=100)
    d = await step(existing, now=T0 + MIN, progress=progress, config=config)
    assert d.work == progress - 100
    assert (d.exhausted, d.reason) == (exhausted, "work_budget_exceeded" if exhausted else None)


async def test_default_work_budget_counts_from_a_high_baseline() -> None:
    d = await step(None, now=T0, progress=25_000)  # counter already high when opened
    d = await step(d.incident, now=T0 + MIN, progress=35_000)
    assert d.work == 10_000 and not d.exhausted
    d = await step(d.incident, now=T0 + 2 * MIN, progress=35_001)
    assert d.exhausted and d.reason == "work_budget_exceeded"


async def test_an_older_record_without_baseline_has_done_no_work_yet() -> None:
    existing = incident(progress=None, work_baseline=None)
    d = await step(existing, now=T0 + MIN, progress=99_999)
    assert d.work == 0 and d.incident.work_baseline == 99_999 and not d.exhausted


async def test_an_infinite_work_budget_never_seals() -> None:
    config = ChatRecoveryConfig(max_recovery_work=math.inf)
    d = await step(incident(), now=T0 + MIN, progress=10**9, config=config)
    assert not d.exhausted


# == interrupted attempts ========================================================================


async def test_dead_isolates_count_once_each_however_many_entries() -> None:
    existing = incident(
        interrupted_attempts=1,
        attempts_in_flight=(
            att("iso-b", "b1"),
            att("iso-b", "b2"),
            att("iso-b", "b3"),
            att("iso-c", "c1"),
            att("iso-now", "mine-running"),
        ),
    )
    d = await step(existing, now=T0 + MIN, trigger=interrupted("iso-now", "mine-new"))
    assert d.incident.interrupted_attempts == 3  # 1 + iso-b + iso-c
    # the dead entries are dropped; this isolate's running attempt stays; the replay is added
    assert d.incident.attempts_in_flight == (
        att("iso-now", "mine-running"),
        att("iso-now", "mine-new"),
    )


async def test_a_second_report_of_the_same_death_counts_nothing() -> None:
    d = await step(None, now=T0, trigger=interrupted("iso-a", "t1"))
    d = await step(d.incident, now=T0 + SEC, trigger=interrupted("iso-a", "t2"))
    assert d.incident.interrupted_attempts == 1


async def test_stalls_count_no_interruption_and_leave_running_attempts_alone() -> None:
    running = (att("iso-b", "b1"),)
    d = await step(incident(attempts_in_flight=running, interrupted_attempts=2), now=T0 + MIN)
    assert d.incident.interrupted_attempts == 2
    assert d.incident.attempts_in_flight == running and d.attempt_in_flight is None


async def test_a_crash_loop_is_sealed_at_max_interrupted_attempts_despite_progress() -> None:
    # Each isolate dies mid-attempt after crediting some output, within the debounce window:
    # progress resets attempts and the no-progress clock, only the interruption count climbs.
    d = await step(None, now=T0, trigger=interrupted("iso-1"))
    for n in range(2, 6):
        d = await step(d.incident, now=T0 + n * SEC, progress=n, trigger=interrupted(f"iso-{n}"))
        assert d.incident.interrupted_attempts == n and d.incident.attempt == 1
        assert d.exhausted is (n == 5)
    assert d.reason == "interrupted_attempts_exceeded"
    assert d.attempt_in_flight is None  # a sealed incident runs nothing
    assert d.incident.attempts_in_flight is None


async def test_max_interrupted_attempts_of_one_seals_the_first_replay() -> None:
    config = ChatRecoveryConfig(max_interrupted_attempts=1)
    d = await step(None, now=T0, trigger=interrupted(), config=config)
    assert d.exhausted and d.reason == "interrupted_attempts_exceeded"


# == transient retries ===========================================================================


async def test_transient_retries_are_capped_by_max_attempts_even_with_progress() -> None:
    existing = incident(transient_retries=9)
    d = await step(existing, now=T0 + SEC, progress=1)
    assert not d.exhausted and d.incident.transient_retries == 9
    bumped, n = record_transient_retry(d.incident)
    assert n == 10
    d = await step(bumped, now=T0 + 2 * SEC, progress=2)
    assert d.exhausted and d.reason == "max_attempts_exceeded"


async def test_a_stall_loop_ends_failed_with_max_attempts_exceeded() -> None:
    """Observed live: a continuation that keeps stalling ends ``failed`` /
    ``max_attempts_exceeded`` — the seal, then the attempt's ``failed`` transition."""
    d = await step(None, now=T0)
    now = T0
    for _ in range(10):
        nxt, _n = record_transient_retry(d.incident)
        now += 2 * SEC
        d = await step(nxt, now=now, progress=(now - T0) // SEC)
    assert d.exhausted and d.incident.reason == "max_attempts_exceeded"
    failed = transition_incident(d.incident, "failed")
    assert failed.incident is not None
    assert (failed.incident.status, failed.incident.reason) == ("failed", "max_attempts_exceeded")


# == a healthy long turn =========================================================================


@pytest.mark.parametrize("kind", ["stalled", "interrupted"])
async def test_a_progressing_turn_survives_many_interruptions_until_the_work_budget(
    kind: str,
) -> None:
    """Hours of churn: every 20–400 s an interruption, each after the turn streamed 40 more
    segments. Attempts and the no-progress window never seal it; work does, exactly when it
    passes ``max_recovery_work``. (Interruptions that kill the isolate are also bounded by
    ``max_interrupted_attempts``, disabled here to isolate the progress-keyed bounds.)"""
    config = ChatRecoveryConfig(max_interrupted_attempts=math.inf, max_recovery_work=10_000)
    now, progress = T0, 1_000
    d = await step(None, now=now, progress=progress)
    for i in range(1, 500):
        now += (20 + (i * 37) % 380) * SEC
        progress += 40
        trigger = STALLED if kind == "stalled" else interrupted(f"iso-{i}")
        d = await step(d.incident, now=now, progress=progress, trigger=trigger, config=config)
        if progress - 1_000 > 10_000:
            assert d.exhausted and d.reason == "work_budget_exceeded"
            assert i == 251  # 251 × 40 = 10 040 > 10 000
            break
        assert not d.exhausted, (i, d.reason)
        assert d.incident.attempt == 1
    else:
        pytest.fail("the work budget never sealed the runaway")
    assert now - T0 > 10 * HOUR  # far past any wall-clock ceiling


@pytest.mark.parametrize(
    ("retries", "retry_after", "expected"),
    [
        (1, None, 1),
        (2, None, 2),
        (5, None, 16),
        (6, None, 30),
        (40, None, 30),
        (1, 20, 20),
        (6, 10, 30),
        (1, 500, 60),
    ],
)
def test_transient_backoff(retries: int, retry_after: float | None, expected: float) -> None:
    assert recovery_backoff_seconds(retries, retry_after) == expected
