"""The persisted names and numbers of chat recovery: KV keys, tuning constants and reasons.

The keys and their value shapes are the SDK's cutover contract (``recovery-incident.ts``): a
build that changes them strands every in-flight incident. Reasons are open strings; the
exhaustion reasons are what ``on_exhausted(ctx).reason`` may carry.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ACTIVE_STATUSES",
    "CHAT_LAST_TERMINAL_KEY",
    "CHAT_RECOVERING_FLAG_TTL_MS",
    "CHAT_RECOVERING_KEY",
    "CHAT_RECOVERY_ALARM_DEBOUNCE_MS",
    "CHAT_RECOVERY_INCIDENT_KEY_PREFIX",
    "CHAT_RECOVERY_INCIDENT_TTL_MS",
    "CHAT_RECOVERY_PROGRESS_KEY",
    "CHAT_RECOVERY_STABLE_RETRY_DELAY_SECONDS",
    "EXHAUSTION_REASONS",
    "REASON_AWAITING_CLIENT_INTERACTION",
    "REASON_CONTINUE_DISABLED",
    "REASON_CONVERSATION_CHANGED",
    "REASON_INTERRUPTED_ATTEMPTS_EXCEEDED",
    "REASON_MAX_ATTEMPTS_EXCEEDED",
    "REASON_NO_PROGRESS_TIMEOUT",
    "REASON_NO_UNANSWERED_USER_MESSAGE",
    "REASON_OUT_OF_MEMORY",
    "REASON_RECOVERY_ABORTED",
    "REASON_STABLE_TIMEOUT",
    "REASON_STABLE_TIMEOUT_RETRY",
    "REASON_USER_CANCELLED",
    "REASON_WORK_BUDGET_EXCEEDED",
]

# -- persisted keys (cutover contract) ----------------------------------------------------------

#: ``<prefix><quote(incident_id)>`` → the incident's JSON record.
CHAT_RECOVERY_INCIDENT_KEY_PREFIX: Final = "cf:chat-recovery:incident:"
#: The durable, monotonic progress marker (an integer). It is never derived from the transcript:
#: compaction shrinks the transcript, which would read as negative progress and seal a healthy
#: turn (SDK #1628).
CHAT_RECOVERY_PROGRESS_KEY: Final = "cf:chat-recovery:progress"
#: ``{"requestId"?, "at"}`` while a recovery is scheduled, so "recovering…" survives isolates.
CHAT_RECOVERING_KEY: Final = "cf:chat:recovering"
#: ``{"requestId", "body", "messageIds"?}`` of the last terminal turn, replayed on reconnect.
CHAT_LAST_TERMINAL_KEY: Final = "cf:chat:last-terminal"

# -- tuning constants ---------------------------------------------------------------------------

#: Recovery triggers within this window of the last attempt collapse into that attempt: one
#: deploy drops and reconnects sockets several times over ~11–22 s and must cost one attempt.
CHAT_RECOVERY_ALARM_DEBOUNCE_MS: Final = 30_000
#: Delay before retrying a recovery that timed out waiting for a stable (idle) agent.
CHAT_RECOVERY_STABLE_RETRY_DELAY_SECONDS: Final = 3
#: Incidents with no attempt for this long are abandoned and swept, so storage stays bounded.
CHAT_RECOVERY_INCIDENT_TTL_MS: Final = 60 * 60 * 1000
#: A "recovering…" flag older than this is stale (its clear never ran); not a budget.
CHAT_RECOVERING_FLAG_TTL_MS: Final = 15 * 60 * 1000

# -- reasons ------------------------------------------------------------------------------------

REASON_MAX_ATTEMPTS_EXCEEDED: Final = "max_attempts_exceeded"
REASON_NO_PROGRESS_TIMEOUT: Final = "no_progress_timeout"
REASON_WORK_BUDGET_EXCEEDED: Final = "work_budget_exceeded"
REASON_RECOVERY_ABORTED: Final = "recovery_aborted"
#: Not in the issue's list, but the published SDK seals crash loops with it (#2613).
REASON_INTERRUPTED_ATTEMPTS_EXCEEDED: Final = "interrupted_attempts_exceeded"
#: Given up after the stable-state wait kept timing out; set by the give-up path, not the budget.
REASON_STABLE_TIMEOUT: Final = "stable_timeout"
#: The alarm memory-limit breaker's seal (#1825); also given up from outside the budget.
REASON_OUT_OF_MEMORY: Final = "out_of_memory"
#: Every reason ``on_exhausted(ctx)`` may see today (an open set: treat unknown ones gracefully).
EXHAUSTION_REASONS: Final = frozenset(
    {
        REASON_MAX_ATTEMPTS_EXCEEDED,
        REASON_NO_PROGRESS_TIMEOUT,
        REASON_WORK_BUDGET_EXCEEDED,
        REASON_RECOVERY_ABORTED,
        REASON_INTERRUPTED_ATTEMPTS_EXCEEDED,
        REASON_STABLE_TIMEOUT,
        REASON_OUT_OF_MEMORY,
    }
)
#: Reasons recorded on non-exhausted transitions.
REASON_STABLE_TIMEOUT_RETRY: Final = "stable_timeout_retry"
REASON_AWAITING_CLIENT_INTERACTION: Final = "awaiting_client_interaction"
REASON_CONVERSATION_CHANGED: Final = "conversation_changed"
REASON_NO_UNANSWERED_USER_MESSAGE: Final = "no_unanswered_user_message"
REASON_CONTINUE_DISABLED: Final = "continue_disabled"
REASON_USER_CANCELLED: Final = "user_cancelled"

#: Statuses of an incident that is still being recovered (not yet terminal).
ACTIVE_STATUSES: Final = frozenset({"detected", "scheduled", "attempting"})
