"""Five-field cron expressions for ``schedule("0 8 * * *", ...)``, evaluated in UTC.

The SDK accepts standard five-field cron (minute hour day-of-month month day-of-week) and computes
the next run in the Worker's time zone, which on Cloudflare is always UTC; so does this module.
Six-field (seconds) and seven-field forms that croniter would also accept are refused, so an
expression means the same thing here and in the TypeScript SDK.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from croniter import croniter

__all__ = ["is_valid_cron", "next_cron_time_s"]


def is_valid_cron(expression: str) -> bool:
    """True for a well-formed five-field cron expression."""
    if not isinstance(expression, str) or len(expression.split()) != 5:
        return False
    try:
        return bool(croniter.is_valid(expression))
    except Exception:  # croniter raises on some malformed inputs instead of returning False
        return False


def next_cron_time_s(expression: str, now_ms: float) -> int:
    """The first matching whole second strictly after ``now_ms`` (Unix seconds, UTC)."""
    start = datetime.fromtimestamp(now_ms / 1000, tz=UTC)
    nxt = croniter(expression, start).get_next(float)
    return math.floor(nxt)
