"""Durations and step configs as the Workflows engine reads them.

A duration is a number of milliseconds or a string ``"<n> <unit>"`` (``"10 seconds"``,
``"1 minute"``, ``"2 hours"``; the unit singular or plural; an unknown unit counts as
milliseconds), the rule Cloudflare's engine applies. A step's config is ``{retries: {limit,
delay, backoff}, timeout}``; what it leaves out comes from the engine's defaults: 5 retries, a
1 s delay doubling each time, a 10 minute timeout. The retry delay after attempt ``n`` is
``delay`` (constant), ``delay * n`` (linear) or ``delay * 2**(n-1)`` (exponential).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_EVENT_TIMEOUT",
    "StepConfig",
    "duration_ms",
    "step_config",
]

#: ``wait_for_event``'s timeout when none is given.
DEFAULT_EVENT_TIMEOUT = "24 hours"

_UNITS = {
    "year": 31_557_600_000.0,
    "month": 2_592_000_000.0,
    "week": 604_800_000.0,
    "day": 86_400_000.0,
    "hour": 3_600_000.0,
    "minute": 60_000.0,
    "second": 1_000.0,
}
_TEXT = re.compile(r"([^ ]+) +(\w\w*?)s?")
_BACKOFFS = ("constant", "linear", "exponential")


def duration_ms(value: Any) -> float:
    """``value`` (ms, or ``"<n> <unit>"``) in milliseconds; ``nan`` when it is not one."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        return math.nan
    try:
        return float(value)
    except ValueError:
        pass
    match = _TEXT.fullmatch(value.strip())
    if match is None:
        return math.nan
    try:
        amount = float(match.group(1))
    except ValueError:
        return math.nan
    return amount * _UNITS.get(match.group(2), 1.0)


@dataclass(frozen=True)
class StepConfig:
    """A step's retries and timeout, defaults applied (times in ms)."""

    limit: int = 5
    delay_ms: float = 1_000.0
    backoff: str = "exponential"
    timeout_ms: float = 600_000.0

    def retry_delay(self, attempts: int) -> float:
        """How long to wait after the ``attempts``-th failed attempt."""
        if self.backoff == "exponential":
            return float(self.delay_ms * 2 ** (attempts - 1))
        if self.backoff == "linear":
            return self.delay_ms * attempts
        return self.delay_ms

    def as_js(self) -> dict[str, Any]:
        """The config as the engine hands it to a step's callback (``ctx.config``)."""
        return {
            "retries": {"limit": self.limit, "delay": self.delay_ms, "backoff": self.backoff},
            "timeout": self.timeout_ms,
        }


def step_config(config: Any) -> StepConfig | None:
    """``config`` with the defaults applied, or ``None`` when it is not a valid step config."""
    if config is None:
        return StepConfig()
    if not isinstance(config, Mapping) or set(config) - {"retries", "timeout"}:
        return None
    out = StepConfig()
    retries = config.get("retries")
    if retries is not None:
        if not isinstance(retries, Mapping) or set(retries) - {"limit", "delay", "backoff"}:
            return None
        limit = retries.get("limit", out.limit)
        delay = duration_ms(retries.get("delay", out.delay_ms))
        backoff = retries.get("backoff", out.backoff)
        if isinstance(limit, bool) or not isinstance(limit, int | float) or limit < 0:
            return None
        if math.isnan(delay) or delay < 0 or backoff not in _BACKOFFS:
            return None
        out = StepConfig(int(limit), delay, str(backoff), out.timeout_ms)
    if "timeout" in config:
        timeout = duration_ms(config["timeout"])
        if math.isnan(timeout) or timeout <= 0:
            return None
        out = StepConfig(out.limit, out.delay_ms, out.backoff, timeout)
    return out
