"""The durable recovery incident: its persisted record, its storage keys and its identity.

One incident tracks one interrupted chat turn across every isolate that tries to recover it.
The record, the KV keys and the incident-id formula are the SDK's persisted cutover contract
(``recovery-incident.ts``): :meth:`ChatRecoveryIncident.to_json` writes exactly the SDK's
camelCase shape and :meth:`~ChatRecoveryIncident.from_json` reads records of older builds, whose
optional fields may be missing. Keys this build does not know are kept in ``extra`` so a record
written by a newer build survives a round trip.

Also here, because they only rewrite one record: admitting and finishing an attempt in flight
(:func:`admit_attempt`, :func:`finish_attempt`) and choosing which abandoned incidents to sweep
(:func:`select_stale_incident_keys`). The budget decision itself is in :mod:`.decision`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final
from urllib.parse import quote

from ....errors import AgentsError
from .config import ChatRecoveryConfig
from .constants import (
    ACTIVE_STATUSES,
    CHAT_RECOVERY_INCIDENT_KEY_PREFIX,
    CHAT_RECOVERY_INCIDENT_TTL_MS,
)
from .context import ChatRecoveryKind

__all__ = [
    "ChatRecoveryAttempt",
    "ChatRecoveryIncident",
    "ChatRecoveryRecordError",
    "admit_attempt",
    "chat_recovery_incident_id",
    "chat_recovery_incident_key",
    "dead_isolate_count",
    "finish_attempt",
    "live_attempts",
    "select_stale_incident_keys",
]


class ChatRecoveryRecordError(AgentsError, ValueError):
    """A stored incident record is not an incident (a required field is missing or mistyped)."""


# -- identity -----------------------------------------------------------------------------------


def chat_recovery_incident_id(
    request_id: str,
    recovery_root_request_id: str | None = None,
    latest_user_message_id: str | None = None,
) -> str:
    """``"<root or request id>:<latest user message id or ''>"`` — the SDK's formula.

    The recovery kind is deliberately left out: a turn that flips between retry and continue
    across restarts must spend one shared budget.
    """
    root = recovery_root_request_id if recovery_root_request_id is not None else request_id
    return f"{root}:{latest_user_message_id or ''}"


def chat_recovery_incident_key(incident_id: str) -> str:
    """The KV key of an incident: the prefix and ``encodeURIComponent(incident_id)``."""
    return CHAT_RECOVERY_INCIDENT_KEY_PREFIX + quote(incident_id, safe="-_.!~*'()")


# -- the record ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChatRecoveryAttempt:
    """One attempt in flight: the isolate (object instance) that runs it, and its token.

    An isolate killed by a memory-limit reset cannot write, so it cannot clear its entry; the
    next isolate that finds an entry it did not write knows that attempt died.
    """

    isolate: str
    token: str

    def to_json(self) -> dict[str, str]:
        return {"isolate": self.isolate, "token": self.token}


_REQUIRED: Final = (
    "incidentId",
    "requestId",
    "recoveryKind",
    "attempt",
    "maxAttempts",
    "status",
    "firstSeenAt",
    "lastAttemptAt",
)
_OPTIONAL: Final = (
    "recoveryRootRequestId",
    "lastProgressAt",
    "reason",
    "progress",
    "workBaseline",
    "interruptedAttempts",
    "attemptsInFlight",
    "transientRetries",
)


@dataclass(frozen=True, slots=True)
class ChatRecoveryIncident:
    """The durable per-incident record (the SDK's ``ChatRecoveryIncident``).

    Optional fields are ``None`` when absent from the stored JSON (older builds) and are then
    left out of :meth:`to_json`. Their meaning:

    ``last_progress_at``
        Epoch ms of the last evaluation that saw forward progress; the no-progress window is
        measured from it (falls back to ``first_seen_at``).
    ``progress``
        High-water mark of the durable progress counter seen by this incident. Sourced from the
        persisted counter, never the transcript, which compaction shrinks.
    ``work_baseline``
        The counter when the incident opened; work = ``progress - work_baseline``. Missing means
        "the current marker": an older in-flight incident is never falsely sealed.
    ``interrupted_attempts``
        Attempts whose isolate died before finishing. Never reset by progress — a turn that
        re-runs and dies again streams output too — and never counted by the dying isolate.
    ``attempts_in_flight``
        Attempts currently running; an entry left by another isolate means that isolate died.
    ``transient_retries``
        Recoveries scheduled after transient stream errors or stalls; not debounced and not
        reset by progress, capped by ``max_attempts``.
    """

    incident_id: str
    request_id: str
    recovery_kind: ChatRecoveryKind
    attempt: int
    max_attempts: float
    status: str
    first_seen_at: int
    last_attempt_at: int
    recovery_root_request_id: str | None = None
    last_progress_at: int | None = None
    reason: str | None = None
    progress: int | None = None
    work_baseline: int | None = None
    interrupted_attempts: int | None = None
    attempts_in_flight: tuple[ChatRecoveryAttempt, ...] | None = None
    transient_retries: int | None = None
    #: Keys of the stored record this build does not know, kept verbatim.
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def root_request_id(self) -> str:
        """The recovery root, falling back to the request id for records without one."""
        return self.recovery_root_request_id or self.request_id

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_STATUSES

    def to_json(self) -> dict[str, Any]:
        """The SDK's camelCase record; optional fields only when set."""
        out: dict[str, Any] = {
            "incidentId": self.incident_id,
            "requestId": self.request_id,
            "recoveryRootRequestId": self.recovery_root_request_id,
            "recoveryKind": self.recovery_kind,
            "attempt": self.attempt,
            "maxAttempts": self.max_attempts,
            "status": self.status,
            "firstSeenAt": self.first_seen_at,
            "lastAttemptAt": self.last_attempt_at,
            "lastProgressAt": self.last_progress_at,
            "progress": self.progress,
            "workBaseline": self.work_baseline,
            "interruptedAttempts": self.interrupted_attempts,
            "attemptsInFlight": None
            if self.attempts_in_flight is None
            else [a.to_json() for a in self.attempts_in_flight],
            "transientRetries": self.transient_retries,
            "reason": self.reason,
        }
        out = {k: v for k, v in out.items() if v is not None}
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out

    @classmethod
    def from_json(cls, data: Any) -> ChatRecoveryIncident:
        """Read a stored record; raises :class:`ChatRecoveryRecordError` if it is not one."""
        if not isinstance(data, Mapping):
            raise ChatRecoveryRecordError(f"incident record must be an object, got {data!r}")
        missing = [k for k in _REQUIRED if data.get(k) is None]
        if missing:
            raise ChatRecoveryRecordError(f"incident record lacks {', '.join(missing)}")
        kind = data["recoveryKind"]
        if kind not in ("retry", "continue"):
            raise ChatRecoveryRecordError(f"incident recoveryKind must be retry|continue: {kind!r}")
        return cls(
            incident_id=_text(data, "incidentId"),
            request_id=_text(data, "requestId"),
            recovery_kind=kind,
            attempt=_int(data, "attempt"),
            max_attempts=_count_or_inf(data, "maxAttempts"),
            status=_text(data, "status"),
            first_seen_at=_int(data, "firstSeenAt"),
            last_attempt_at=_int(data, "lastAttemptAt"),
            recovery_root_request_id=_opt(data, "recoveryRootRequestId", _text),
            last_progress_at=_opt(data, "lastProgressAt", _int),
            reason=_opt(data, "reason", _text),
            progress=_opt(data, "progress", _int),
            work_baseline=_opt(data, "workBaseline", _int),
            interrupted_attempts=_opt(data, "interruptedAttempts", _int),
            attempts_in_flight=_opt(data, "attemptsInFlight", _attempts),
            transient_retries=_opt(data, "transientRetries", _int),
            extra={k: v for k, v in data.items() if k not in _REQUIRED and k not in _OPTIONAL},
        )


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise ChatRecoveryRecordError(f"incident {key} must be a string, got {value!r}")
    return value


def _number(data: Mapping[str, Any], key: str) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ChatRecoveryRecordError(f"incident {key} must be a number, got {value!r}")
    return value


def _int(data: Mapping[str, Any], key: str) -> int:
    value = _number(data, key)
    if math.isinf(value):
        raise ChatRecoveryRecordError(f"incident {key} must be finite, got {value!r}")
    return int(value)


def _count_or_inf(data: Mapping[str, Any], key: str) -> float:
    value = _number(data, key)
    return value if math.isinf(value) else int(value)


def _attempts(data: Mapping[str, Any], key: str) -> tuple[ChatRecoveryAttempt, ...]:
    value = data[key]
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise ChatRecoveryRecordError(f"incident {key} must be a list, got {value!r}")
    out = []
    for entry in value:
        if not isinstance(entry, Mapping):
            raise ChatRecoveryRecordError(f"incident {key} entry must be an object: {entry!r}")
        out.append(ChatRecoveryAttempt(_text(entry, "isolate"), _text(entry, "token")))
    return tuple(out)


def _opt(data: Mapping[str, Any], key: str, read: Any) -> Any:
    return None if data.get(key) is None else read(data, key)


# -- attempts in flight -------------------------------------------------------------------------


def dead_isolate_count(
    recorded: Sequence[ChatRecoveryAttempt] | None, current: ChatRecoveryAttempt
) -> int:
    """How many other isolates left entries: each died mid-attempt once, however many entries."""
    return len({a.isolate for a in recorded or () if a.isolate != current.isolate})


def live_attempts(
    recorded: Sequence[ChatRecoveryAttempt] | None, current: ChatRecoveryAttempt
) -> tuple[ChatRecoveryAttempt, ...]:
    """The recorded attempts still running in ``current``'s isolate."""
    return tuple(a for a in recorded or () if a.isolate == current.isolate)


def admit_attempt(
    existing: ChatRecoveryIncident,
    attempt: ChatRecoveryAttempt,
    config: ChatRecoveryConfig,
    *,
    awaiting_client_interaction: bool = False,
) -> tuple[ChatRecoveryIncident, bool]:
    """Admit a scheduled recovery attempt before it does anything heavy: ``(incident, exhausted)``.

    Counts the isolates that died mid-attempt (entries another isolate left), drops their
    entries and records ``attempt`` — unless the interruption budget is now spent, in which case
    the caller gives up with ``interrupted_attempts_exceeded`` instead of running the turn. This
    catches deaths the replay of a turn cannot see (a reset before the callback started its turn
    leaves no turn to replay). A turn parked on a client interaction is counted, never sealed.
    The caller must persist *and confirm* the result before running: an unconfirmed write is
    lost with a memory-limit reset, and so would be the count.
    """
    interrupted = (existing.interrupted_attempts or 0) + dead_isolate_count(
        existing.attempts_in_flight, attempt
    )
    exhausted = not awaiting_client_interaction and interrupted >= config.max_interrupted_attempts
    live = live_attempts(existing.attempts_in_flight, attempt)
    running = live if exhausted else (*live, attempt)
    return (
        replace(
            existing,
            interrupted_attempts=interrupted if interrupted > 0 else existing.interrupted_attempts,
            attempts_in_flight=running or None,
        ),
        exhausted,
    )


def finish_attempt(
    existing: ChatRecoveryIncident, attempt: ChatRecoveryAttempt
) -> ChatRecoveryIncident | None:
    """Drop ``attempt`` once it finished in this isolate; ``None`` when it was not recorded."""
    recorded = existing.attempts_in_flight or ()
    remaining = tuple(a for a in recorded if a.token != attempt.token)
    if len(remaining) == len(recorded):
        return None
    return replace(existing, attempts_in_flight=remaining or None)


# -- sweeping -----------------------------------------------------------------------------------


def select_stale_incident_keys(
    entries: Mapping[str, ChatRecoveryIncident | Mapping[str, Any] | None], now_ms: int
) -> list[str]:
    """Keys of incidents with no attempt for longer than the TTL (the caller deletes them).

    Sweep *before* reading an incident: a TTL-expired identity is also past its no-progress
    window, so a genuinely abandoned turn starts a fresh budget instead of resuming a dead one.
    Unreadable records count as inactive since epoch 0 and are swept too.
    """
    stale = []
    for key, record in entries.items():
        if isinstance(record, ChatRecoveryIncident):
            last = record.last_attempt_at
        elif isinstance(record, Mapping):
            value = record.get("lastAttemptAt", record.get("firstSeenAt"))
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            last = value if ok else 0
        else:
            last = 0
        if now_ms - last > CHAT_RECOVERY_INCIDENT_TTL_MS:
            stale.append(key)
    return stale
