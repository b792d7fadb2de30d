"""Where bounded recovery keeps its durable state: the incidents and the progress counter.

Both live in the agent's synchronous KV under the SDK's keys, so they commit in the same turn
as the writes they describe (a flushed segment and its progress tick, a scheduled attempt and
its incident). An incident that cannot be read back — written by a newer version, or damaged —
is dropped with a warning rather than wedging every later recovery.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from . import CHAT_RECOVERY_PROGRESS_KEY, ChatRecoveryIncident, chat_recovery_incident_key

__all__ = ["IncidentStore"]

_log = logging.getLogger("agents.chat.recovery")


class IncidentStore:
    """Incident records and the durable monotonic progress counter of one agent."""

    __slots__ = ("_kv",)

    def __init__(self, kv: Callable[[], Any]) -> None:
        self._kv = kv

    def bump_progress(self) -> None:
        """One more flushed segment: never derived from the transcript, which compaction
        shrinks."""
        self._kv().put(CHAT_RECOVERY_PROGRESS_KEY, self.progress() + 1)

    def progress(self) -> int:
        value = self._kv().get(CHAT_RECOVERY_PROGRESS_KEY)
        return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0

    def read(self, incident_id: str) -> ChatRecoveryIncident | None:
        raw = self._kv().get(chat_recovery_incident_key(incident_id))
        if not isinstance(raw, Mapping):
            return None
        try:
            return ChatRecoveryIncident.from_json(raw)
        except Exception:
            _log.warning("unreadable chat recovery incident %s dropped", incident_id)
            return None

    def write(self, incident: ChatRecoveryIncident | None, incident_id: str) -> None:
        key = chat_recovery_incident_key(incident_id)
        if incident is None:
            self._kv().delete(key)
        else:
            self._kv().put(key, incident.to_json())
