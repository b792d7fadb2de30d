"""Agent options: the Python spelling of the SDK's ``static options = {...}``."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["AgentOptions", "RetryOptions"]


@dataclass(frozen=True)
class RetryOptions:
    """Retry with full-jitter exponential back-off (``retry``, queues, failing one-shots)."""

    max_attempts: int = 3
    base_delay_ms: int = 100
    max_delay_ms: int = 3000

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if self.base_delay_ms < 0 or self.max_delay_ms < self.base_delay_ms:
            raise ValueError(
                "expected 0 <= base_delay_ms <= max_delay_ms, "
                f"got {self.base_delay_ms} and {self.max_delay_ms}"
            )


@dataclass(frozen=True)
class AgentOptions:
    """Per-class options; override as ``options = AgentOptions(keep_alive_interval_ms=2000)``."""

    keep_alive_interval_ms: int = 30_000
    retry: RetryOptions = field(default_factory=RetryOptions)
    fiber_recovery_max_age_ms: int = 86_400_000
    #: How many times a failing ``on_fiber_recovered`` is tried for one fiber before it is
    #: dropped (reported through ``on_error``), whatever its age; 0: no bound but the age.
    fiber_recovery_max_attempts: int = 20
    fiber_recovery_scan_deadline_ms: int = 10_000
    hung_schedule_timeout_seconds: int = 30
