"""Chat recovery's pure half: the config, the persisted incident and the budget decision.

Every test drives the decision with explicit ``now_ms`` values (a manual clock: no sleeps, no
wall time) and an explicit durable progress counter, following the SDK's ``recovery-incident.ts``
and the behaviour observed in research §5.9 / reference §3.6.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import pytest

from agents.chat.recovery import (
    CHAT_LAST_TERMINAL_KEY,
    CHAT_RECOVERING_KEY,
    CHAT_RECOVERY_ALARM_DEBOUNCE_MS,
    CHAT_RECOVERY_INCIDENT_KEY_PREFIX,
    CHAT_RECOVERY_INCIDENT_TTL_MS,
    CHAT_RECOVERY_PROGRESS_KEY,
    DEFAULT_TERMINAL_MESSAGE,
    EXHAUSTION_REASONS,
    ChatRecoveryAttempt,
    ChatRecoveryConfig,
    ChatRecoveryConfigError,
    ChatRecoveryIncident,
    ChatRecoveryProgressContext,
    ChatRecoveryRecordError,
    IncidentDecision,
    InterruptedTrigger,
    RecoveryIdentity,
    RecoveryTrigger,
    StalledTrigger,
    admit_attempt,
    after_stable_timeout,
    build_exhausted_context,
    chat_recovery_incident_id,
    chat_recovery_incident_key,
    classify_recovery_kind,
    evaluate_incident,
    exhausted_event,
    finish_attempt,
    give_up_incident,
    is_recovery_cancelled,
    record_transient_retry,
    recovering_flag_active,
    recovering_record,
    recovery_backoff_seconds,
    resolve_chat_recovery,
    select_stale_incident_keys,
    superseded_reason,
    terminal_record,
    transition_incident,
)
from agents.errors import AgentsError

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


# == config ======================================================================================


def test_defaults_are_the_sdks() -> None:
    config = resolve_chat_recovery(True)
    assert config == ChatRecoveryConfig()
    assert config is not None
    assert (
        config.max_attempts,
        config.max_interrupted_attempts,
        config.stable_timeout_ms,
        config.no_progress_timeout_ms,
        config.max_recovery_work,
    ) == (10, 5, 10_000, 300_000, 10_000)
    assert config.terminal_message == (
        "The assistant was interrupted and could not recover. Please try again."
    )
    assert config.should_keep_recovering is None and config.on_exhausted is None


def test_none_means_defaults_and_false_means_off() -> None:
    assert resolve_chat_recovery(None) == ChatRecoveryConfig()
    assert resolve_chat_recovery(False) is None
    config = ChatRecoveryConfig(max_attempts=3)
    assert resolve_chat_recovery(config) is config


def test_snake_and_camel_case_mappings_agree() -> None:
    def hook(ctx: ChatRecoveryProgressContext) -> bool:
        return True

    async def done(ctx: Any) -> None:
        return None

    snake = resolve_chat_recovery(
        {
            "max_attempts": 4,
            "max_interrupted_attempts": 2,
            "stable_timeout_ms": 500,
            "no_progress_timeout_ms": 60_000,
            "max_recovery_work": 7,
            "terminal_message": "gone",
            "should_keep_recovering": hook,
            "on_exhausted": done,
        }
    )
    camel = resolve_chat_recovery(
        {
            "maxAttempts": 4,
            "maxInterruptedAttempts": 2,
            "stableTimeoutMs": 500,
            "noProgressTimeoutMs": 60_000,
            "maxRecoveryWork": 7,
            "terminalMessage": "gone",
            "shouldKeepRecovering": hook,
            "onExhausted": done,
        }
    )
    assert snake == camel == ChatRecoveryConfig(4, 2, 500, 60_000, 7, "gone", hook, done)


@pytest.mark.parametrize(
    ("spec", "field", "expected"),
    [
        ({"maxAttempts": 0}, "max_attempts", 1),  # read as at least 1, as the SDK
        ({"maxAttempts": 2.9}, "max_attempts", 2),  # floored
        ({"maxAttempts": math.inf}, "max_attempts", math.inf),
        ({"maxInterruptedAttempts": 0}, "max_interrupted_attempts", 1),
        ({"maxInterruptedAttempts": math.inf}, "max_interrupted_attempts", math.inf),
        ({"maxOomRetries": 3}, "max_interrupted_attempts", 4),  # deprecated alias: n + 1
        ({"max_oom_retries": 0}, "max_interrupted_attempts", 1),
        ({"maxOomRetries": 3, "maxInterruptedAttempts": 7}, "max_interrupted_attempts", 7),
        ({"stableTimeoutMs": 0}, "stable_timeout_ms", 0),
        ({"noProgressTimeoutMs": 1.5}, "no_progress_timeout_ms", 1),
        ({"noProgressTimeoutMs": math.inf}, "no_progress_timeout_ms", math.inf),
        ({"maxRecoveryWork": math.inf}, "max_recovery_work", math.inf),
        ({"maxRecoveryWork": 0}, "max_recovery_work", 0),
        ({"maxAttempts": None}, "max_attempts", 10),  # explicit null = unset, as the SDK's ??
        ({}, "terminal_message", DEFAULT_TERMINAL_MESSAGE),
    ],
)
def test_config_normalization(spec: dict[str, Any], field: str, expected: object) -> None:
    config = resolve_chat_recovery(spec)
    assert config is not None
    assert getattr(config, field) == expected


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"maxAttempts": -1}, "maxAttempts"),
        ({"max_attempts": -0.5}, "max_attempts"),
        ({"maxInterruptedAttempts": -3}, "maxInterruptedAttempts"),
        ({"maxOomRetries": -1}, "maxOomRetries"),
        ({"stableTimeoutMs": -10}, "stableTimeoutMs"),
        ({"stableTimeoutMs": math.inf}, "stable_timeout_ms"),
        ({"noProgressTimeoutMs": -1}, "noProgressTimeoutMs"),
        ({"maxRecoveryWork": -1}, "maxRecoveryWork"),
        ({"maxRecoveryWork": math.nan}, "maxRecoveryWork"),
        ({"maxAttempts": "10"}, "maxAttempts"),
        ({"maxAttempts": True}, "maxAttempts"),
        ({"noProgressTimeoutMs": [1]}, "noProgressTimeoutMs"),
        ({"terminalMessage": 5}, "terminal_message"),
        ({"shouldKeepRecovering": "yes"}, "should_keep_recovering"),
        ({"onExhausted": 1}, "on_exhausted"),
        ({"maxAttempt": 3}, "maxAttempt"),  # unknown key
        ({"maxAttempts": 3, "max_attempts": 4}, "max_attempts"),  # given twice
    ],
)
def test_config_validation_errors(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(ChatRecoveryConfigError) as info:
        resolve_chat_recovery(spec)
    assert isinstance(info.value, AgentsError) and isinstance(info.value, ValueError)
    assert info.value.field == field


@pytest.mark.parametrize("value", [1, "on", 0.5, ["maxAttempts"]])
def test_config_of_the_wrong_type(value: Any) -> None:
    with pytest.raises(ChatRecoveryConfigError):
        resolve_chat_recovery(value)


def test_a_directly_built_config_is_validated_too() -> None:
    with pytest.raises(ChatRecoveryConfigError):
        ChatRecoveryConfig(max_attempts=-1)
    with pytest.raises(ChatRecoveryConfigError):
        ChatRecoveryConfig(max_recovery_work=math.nan)


# == identity, keys, the record ==================================================================


def test_keys_are_the_sdks() -> None:
    assert CHAT_RECOVERY_INCIDENT_KEY_PREFIX == "cf:chat-recovery:incident:"
    assert CHAT_RECOVERY_PROGRESS_KEY == "cf:chat-recovery:progress"
    assert CHAT_RECOVERING_KEY == "cf:chat:recovering"
    assert CHAT_LAST_TERMINAL_KEY == "cf:chat:last-terminal"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("r1", None, "u1"), "r1:u1"),
        (("r2", "r1", "u1"), "r1:u1"),  # the chain's root, not the continuation's request
        (("r1", None, None), "r1:"),
        (("r1", None, ""), "r1:"),
    ],
)
def test_incident_id_formula(args: tuple[str, str | None, str | None], expected: str) -> None:
    assert chat_recovery_incident_id(*args) == expected


def test_incident_id_ignores_the_recovery_kind() -> None:
    retry = RecoveryIdentity("r1", "retry", latest_user_message_id="u1")
    assert retry.incident_id == IDENT.incident_id == "r1:u1"


def test_incident_key_is_uri_component_encoded() -> None:
    assert chat_recovery_incident_key("r1:u1") == "cf:chat-recovery:incident:r1%3Au1"
    assert chat_recovery_incident_key("a b/ü") == "cf:chat-recovery:incident:a%20b%2F%C3%BC"
    assert chat_recovery_incident_key("x-_.!~*'()") == "cf:chat-recovery:incident:x-_.!~*'()"


FULL_RECORD: dict[str, Any] = {
    "incidentId": "r1:u1",
    "requestId": "r3",
    "recoveryRootRequestId": "r1",
    "recoveryKind": "continue",
    "attempt": 2,
    "maxAttempts": 10,
    "status": "scheduled",
    "firstSeenAt": T0,
    "lastAttemptAt": T0 + 40 * SEC,
    "lastProgressAt": T0 + 40 * SEC,
    "progress": 57,
    "workBaseline": 12,
    "interruptedAttempts": 2,
    "attemptsInFlight": [{"isolate": "iso-b", "token": "t-1"}],
    "transientRetries": 1,
    "reason": "stable_timeout_retry",
}
OLD_RECORD: dict[str, Any] = {  # an older build's record: only the required fields
    "incidentId": "r1:u1",
    "requestId": "r1",
    "recoveryKind": "retry",
    "attempt": 1,
    "maxAttempts": 10,
    "status": "attempting",
    "firstSeenAt": T0,
    "lastAttemptAt": T0,
}


@pytest.mark.parametrize(
    "record",
    [
        FULL_RECORD,
        OLD_RECORD,
        {**OLD_RECORD, "oomAttempts": 2},  # a field this build does not know is kept
        {**OLD_RECORD, "maxAttempts": math.inf},
        {**OLD_RECORD, "interruptedAttempts": 0, "attemptsInFlight": []},
    ],
)
def test_record_json_round_trip(record: dict[str, Any]) -> None:
    parsed = ChatRecoveryIncident.from_json(json.loads(json.dumps(record)))
    assert parsed.to_json() == record
    assert ChatRecoveryIncident.from_json(parsed.to_json()) == parsed


def test_older_record_reads_missing_fields_as_none() -> None:
    old = ChatRecoveryIncident.from_json(OLD_RECORD)
    assert old.recovery_root_request_id is None and old.root_request_id == "r1"
    assert (old.last_progress_at, old.progress, old.work_baseline) == (None, None, None)
    assert (old.interrupted_attempts, old.attempts_in_flight, old.transient_retries) == (
        None,
        None,
        None,
    )
    full = ChatRecoveryIncident.from_json(FULL_RECORD)
    assert full.attempts_in_flight == (ChatRecoveryAttempt("iso-b", "t-1"),)
    assert full.is_active


@pytest.mark.parametrize(
    "record",
    [
        None,
        [],
        {**OLD_RECORD, "incidentId": None},
        {k: v for k, v in OLD_RECORD.items() if k != "lastAttemptAt"},
        {**OLD_RECORD, "recoveryKind": "resume"},
        {**OLD_RECORD, "attempt": "1"},
        {**OLD_RECORD, "firstSeenAt": math.inf},
        {**OLD_RECORD, "attemptsInFlight": [{"isolate": "a"}]},
        {**OLD_RECORD, "attemptsInFlight": "a"},
    ],
)
def test_malformed_records_raise(record: Any) -> None:
    with pytest.raises(ChatRecoveryRecordError):
        ChatRecoveryIncident.from_json(record)


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


# == classification and a changed conversation ====================================================

USER = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
ASSISTANT = {"id": "a0", "role": "assistant", "parts": []}
SNAP = {"requestId": "r1", "continuation": False, "latestUserMessageId": "u1"}


@pytest.mark.parametrize(
    ("snapshot", "stream_id", "text", "parts", "messages", "kind", "pre_stream"),
    [
        (SNAP, "", "", [], [ASSISTANT, USER], "retry", True),  # died before any stream
        (SNAP, "s1", "", [], [ASSISTANT, USER], "retry", False),  # empty partial of a new turn
        (SNAP, "s1", "w0", [], [ASSISTANT, USER], "continue", False),
        (SNAP, "s1", "", [{"type": "step-start"}], [USER], "continue", False),
        ({**SNAP, "continuation": True}, "", "", [], [USER], "continue", False),
        (SNAP, "", "", [], [USER, ASSISTANT], "continue", False),  # partial already persisted
        (SNAP, "", "", [], [{**USER, "id": "u2"}], "continue", False),  # not that user message
        ({**SNAP, "latestUserMessageId": None}, "", "", [], [USER], "continue", False),
        (None, "", "", [], [USER], "continue", False),
        (SNAP, "", "", [], [], "continue", False),
    ],
)
def test_classify_recovery_kind(
    snapshot: Any,
    stream_id: str,
    text: str,
    parts: list[Any],
    messages: Any,
    kind: str,
    pre_stream: bool,
) -> None:
    c = classify_recovery_kind(
        snapshot, stream_id=stream_id, partial_text=text, partial_parts=parts, messages=messages
    )
    assert (c.kind, c.retry_pre_stream) == (kind, pre_stream)


@pytest.mark.parametrize(
    ("kind", "target", "messages", "reason"),
    [
        ("continue", "a0", [USER, ASSISTANT], None),
        ("continue", "a0", [USER, ASSISTANT, {**USER, "id": "u2"}], None),  # last assistant is a0
        ("continue", "a0", [ASSISTANT, USER, {**ASSISTANT, "id": "a1"}], "conversation_changed"),
        ("continue", None, [USER], None),
        ("retry", "u1", [ASSISTANT, USER], None),
        ("retry", "u1", [ASSISTANT, {**USER, "id": "u2"}], "conversation_changed"),
        ("retry", "u1", [USER, ASSISTANT], "no_unanswered_user_message"),
        ("retry", None, [], "no_unanswered_user_message"),
    ],
)
def test_a_changed_conversation_skips_the_recovery(
    kind: Any, target: str | None, messages: Any, reason: str | None
) -> None:
    assert superseded_reason(kind, target_id=target, messages=messages) == reason


# == sweeping, back-off, the small records ========================================================


def test_select_stale_incident_keys() -> None:
    now = T0 + 2 * CHAT_RECOVERY_INCIDENT_TTL_MS
    entries: dict[str, Any] = {
        "fresh": incident(last_attempt_at=now - CHAT_RECOVERY_INCIDENT_TTL_MS),
        "stale": incident(last_attempt_at=now - CHAT_RECOVERY_INCIDENT_TTL_MS - 1),
        "raw-fresh": {"lastAttemptAt": now - 1},
        "raw-first-seen": {"firstSeenAt": now - CHAT_RECOVERY_INCIDENT_TTL_MS - 1},
        "garbage": "x",
    }
    assert select_stale_incident_keys(entries, now) == ["stale", "raw-first-seen", "garbage"]


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


def test_recovering_flag_and_terminal_record() -> None:
    assert recovering_record("r1", T0) == {"requestId": "r1", "at": T0}
    assert recovering_record(None, T0) == {"at": T0}
    assert recovering_flag_active({"at": T0}, T0 + 15 * MIN - 1)
    assert not recovering_flag_active({"at": T0}, T0 + 15 * MIN)
    assert not recovering_flag_active({}, T0) and not recovering_flag_active(None, T0)
    assert terminal_record("r1", "boom") == {"requestId": "r1", "body": "boom"}
    assert terminal_record("r1", "boom", ["u1"]) == {
        "requestId": "r1",
        "body": "boom",
        "messageIds": ["u1"],
    }
