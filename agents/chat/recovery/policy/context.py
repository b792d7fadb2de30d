"""The contexts chat recovery hands to user hooks: ``on_chat_recovery``, ``should_keep_recovering``
and ``on_exhausted``.

Field names are the SDK's (``ChatRecoveryContext``, ``ChatRecoveryProgressContext``,
``ChatRecoveryExhaustedContext``) in snake_case. The exhausted context doubles as the payload of
the ``chat:recovery:exhausted`` event, so :meth:`ChatRecoveryExhaustedContext.to_json` gives the
SDK's camelCase shape.

This module imports nothing from the rest of the package: the contexts are plain values, built
by the decision code and by the agent that wires recovery in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "ChatRecoveryContext",
    "ChatRecoveryExhaustedContext",
    "ChatRecoveryKind",
    "ChatRecoveryProgressContext",
]

#: ``"retry"`` re-runs an unanswered user message; ``"continue"`` extends a partial assistant
#: message. Deliberately not part of an incident's identity: one interrupted turn can flip
#: between the two across restarts and must share one budget.
ChatRecoveryKind = Literal["retry", "continue"]


@dataclass(frozen=True, slots=True)
class ChatRecoveryContext:
    """What ``on_chat_recovery(ctx)`` sees for an interrupted turn about to be recovered.

    ``recovery_root_request_id`` stays the same for the whole continuation chain while
    ``request_id`` changes with every continuation, so budgets a user keeps for an incident
    should be keyed by the root. ``created_at`` (epoch ms the turn started) lets a hook refuse to
    replay a turn that was orphaned for too long.
    """

    incident_id: str
    recovery_root_request_id: str
    attempt: int
    max_attempts: float
    recovery_kind: ChatRecoveryKind
    stream_id: str
    request_id: str
    partial_text: str
    partial_parts: Sequence[Any]
    recovery_data: Any
    messages: Sequence[Mapping[str, Any]]
    created_at: int
    last_body: Mapping[str, Any] | None = None
    last_client_tools: Sequence[Any] | None = None


@dataclass(frozen=True, slots=True)
class ChatRecoveryProgressContext:
    """What ``should_keep_recovering(ctx)`` sees on every attempt from the second on.

    ``work`` is recovery work since the incident opened, in the unit of ``max_recovery_work``
    (durably flushed stream segments): the signal that tells a healthy long turn from a runaway
    loop. ``age_ms`` is wall time since the first interruption — informative only; the SDK no
    longer bounds a progressing turn by age.
    """

    incident_id: str
    request_id: str
    recovery_root_request_id: str
    attempt: int
    max_attempts: float
    recovery_kind: ChatRecoveryKind
    work: int
    age_ms: int


@dataclass(frozen=True, slots=True)
class ChatRecoveryExhaustedContext:
    """What ``on_exhausted(ctx)`` sees once recovery gives up, and the exhausted event's payload.

    ``reason`` is an open string: ``max_attempts_exceeded``, ``no_progress_timeout``,
    ``work_budget_exceeded``, ``recovery_aborted``, ``interrupted_attempts_exceeded``,
    ``stable_timeout`` or ``out_of_memory`` today (see :mod:`.incident`). ``terminal_message``
    is the banner the user was shown.
    """

    incident_id: str
    request_id: str
    recovery_root_request_id: str
    attempt: int
    max_attempts: float
    recovery_kind: ChatRecoveryKind
    stream_id: str
    created_at: int
    partial_text: str
    partial_parts: Sequence[Any]
    reason: str
    terminal_message: str

    def to_json(self) -> dict[str, Any]:
        """The SDK's camelCase shape (the ``chat:recovery:exhausted`` event payload)."""
        return {
            "incidentId": self.incident_id,
            "requestId": self.request_id,
            "recoveryRootRequestId": self.recovery_root_request_id,
            "attempt": self.attempt,
            "maxAttempts": self.max_attempts,
            "recoveryKind": self.recovery_kind,
            "streamId": self.stream_id,
            "createdAt": self.created_at,
            "partialText": self.partial_text,
            "partialParts": list(self.partial_parts),
            "reason": self.reason,
            "terminalMessage": self.terminal_message,
        }
