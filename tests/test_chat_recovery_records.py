"""Chat recovery's persisted records: incident ids and keys, the incident's JSON, the sweep of
stale incidents, the recovering flag and the terminal record (the SDK's storage shapes)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from agents.chat.recovery import (
    CHAT_LAST_TERMINAL_KEY,
    CHAT_RECOVERING_KEY,
    CHAT_RECOVERY_INCIDENT_KEY_PREFIX,
    CHAT_RECOVERY_INCIDENT_TTL_MS,
    CHAT_RECOVERY_PROGRESS_KEY,
    ChatRecoveryAttempt,
    ChatRecoveryIncident,
    ChatRecoveryRecordError,
    RecoveryIdentity,
    chat_recovery_incident_id,
    chat_recovery_incident_key,
    recovering_flag_active,
    recovering_record,
    select_stale_incident_keys,
    terminal_record,
)

from .chat_recovery_cases import IDENT, MIN, SEC, T0, incident

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
