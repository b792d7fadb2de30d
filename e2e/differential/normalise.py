"""What legitimately differs between two runs of one script, replaced by placeholders.

Ids made of random hex (``run_…``, ``msg_…``, ``call_…``, ``u_…``) and the SDK's message ids
(``assistant_<ms>_<random>``, counted as ``msg``) become ``<run1>``, ``<msg1>``… in order of
first appearance (the same id keeps its placeholder, so "the resumed run is a new run" stays
visible), and clock readings and durations become ``"<time>"``. Everything else is compared as the
client received it.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["TIME_KEYS", "normalised"]

#: Keys whose values are clock readings or measured durations.
TIME_KEYS = frozenset(
    {"timestamp", "startedAt", "lastUpdatedAt", "totalDurationMs", "createdAt", "updatedAt"}
)
_ID = re.compile(r"\b(?:(run|msg|call|u)_[0-9a-f]{8,}|assistant_[0-9]+_[0-9a-z]+)\b")


def _mask_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "<time>" if k in TIME_KEYS else _mask_times(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_times(item) for item in value]
    return value


def normalised(value: Any) -> Any:
    """``value`` with random ids and times replaced (see the module docstring)."""
    text = json.dumps(_mask_times(value))
    names: dict[str, str] = {}
    counts: dict[str, int] = {}

    def name(match: re.Match[str]) -> str:
        found, kind = match[0], match[1] or "msg"
        if found not in names:
            counts[kind] = counts.get(kind, 0) + 1
            names[found] = f"<{kind}{counts[kind]}>"
        return names[found]

    return json.loads(_ID.sub(name, text))
