"""``chat_recovery``: the budgets that bound how an interrupted chat turn is recovered.

:class:`ChatRecoveryConfig` carries the SDK's ``ChatRecoveryConfig`` fields in snake_case with
its defaults, already resolved (floored, clamped, validated) when constructed, so the decision
code never re-checks a budget. :func:`resolve_chat_recovery` turns what a user may assign to
``AIChatAgent.chat_recovery`` — ``True``, ``False``, ``None``, a config, or a mapping with
snake_case or the SDK's camelCase keys — into a config, or ``None`` when recovery is off.

Where this differs from the SDK, on purpose:

* The SDK silently replaces a negative or non-numeric budget with its default. Here it raises
  :class:`ChatRecoveryConfigError`: a typo in a budget should fail at start-up, not quietly
  recover forever or never.
* The SDK keeps recovery always on and reads a legacy ``false`` as the defaults. Here ``False``
  turns recovery off, as the issue asks ("on by default"); ``None`` means "not configured" and
  gets the defaults, like the SDK's ``undefined``.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

from ....errors import AgentsError
from .context import ChatRecoveryExhaustedContext, ChatRecoveryProgressContext

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_INTERRUPTED_ATTEMPTS",
    "DEFAULT_MAX_RECOVERY_WORK",
    "DEFAULT_NO_PROGRESS_TIMEOUT_MS",
    "DEFAULT_STABLE_TIMEOUT_MS",
    "DEFAULT_TERMINAL_MESSAGE",
    "ChatRecoveryConfig",
    "ChatRecoveryConfigError",
    "ChatRecoverySpec",
    "OnExhausted",
    "ShouldKeepRecovering",
    "resolve_chat_recovery",
]

#: Secondary backstop: a tight no-progress alarm loop. It resets on progress and is debounced,
#: so under normal deploy cadence the no-progress window seals a stuck turn first.
DEFAULT_MAX_ATTEMPTS: Final = 10
#: Attempts whose isolate died before finishing (the original turn counts). A deterministic
#: memory-limit reset dies every time; a deploy rarely lands on one turn five times in a row.
DEFAULT_MAX_INTERRUPTED_ATTEMPTS: Final = 5
#: How long a scheduled recovery waits for the agent to be idle before it reschedules.
DEFAULT_STABLE_TIMEOUT_MS: Final = 10_000
#: PRIMARY bound: an incident that made no forward progress for this long is sealed.
DEFAULT_NO_PROGRESS_TIMEOUT_MS: Final = 5 * 60 * 1000
#: Runaway-loop backstop, in durably flushed stream segments since the incident opened. The only
#: meter that keeps climbing when a crash loop credits a little progress on every wake.
DEFAULT_MAX_RECOVERY_WORK: Final = 10_000
DEFAULT_TERMINAL_MESSAGE: Final = (
    "The assistant was interrupted and could not recover. Please try again."
)

#: ``should_keep_recovering(ctx)``: return ``False`` to stop with ``recovery_aborted``. May be
#: sync or async; a hook that raises counts as "keep recovering".
ShouldKeepRecovering = Callable[[ChatRecoveryProgressContext], "bool | Awaitable[bool]"]
#: ``on_exhausted(ctx)``: called once when recovery gives up. May be sync or async.
OnExhausted = Callable[[ChatRecoveryExhaustedContext], "Awaitable[None] | None"]


class ChatRecoveryConfigError(AgentsError, ValueError):
    """``chat_recovery`` cannot work: an unknown key, or a budget that is negative, NaN or not
    a number. ``field`` names the offending key as the user spelled it."""

    def __init__(self, message: str, *, field: str | None = None, value: object = None) -> None:
        super().__init__(message)
        self.field = field
        self.value = value


def _number(field: str, value: object, *, allow_inf: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ChatRecoveryConfigError(
            f"chat_recovery.{field} must be a number, got {value!r}", field=field, value=value
        )
    if math.isnan(value) or value < 0:
        raise ChatRecoveryConfigError(
            f"chat_recovery.{field} must be >= 0, got {value!r}", field=field, value=value
        )
    if math.isinf(value) and not allow_inf:
        raise ChatRecoveryConfigError(
            f"chat_recovery.{field} must be finite, got {value!r}", field=field, value=value
        )
    return value


def _floor(value: float) -> float:
    """``Math.floor`` that keeps ``inf`` (a disabled bound) and returns an ``int`` otherwise."""
    return value if math.isinf(value) else math.floor(value)


@dataclass(frozen=True, slots=True)
class ChatRecoveryConfig:
    """Resolved chat-recovery budgets; construction validates and normalizes every field.

    Counts are floored and read as at least 1 (``max_attempts``, ``max_interrupted_attempts``),
    timeouts are floored; ``math.inf`` disables a bound (not allowed for ``stable_timeout_ms``,
    which would make a recovery wait forever instead of rescheduling). ``max_recovery_work`` is
    kept as given, as the SDK does.
    """

    max_attempts: float = DEFAULT_MAX_ATTEMPTS
    max_interrupted_attempts: float = DEFAULT_MAX_INTERRUPTED_ATTEMPTS
    stable_timeout_ms: float = DEFAULT_STABLE_TIMEOUT_MS
    no_progress_timeout_ms: float = DEFAULT_NO_PROGRESS_TIMEOUT_MS
    max_recovery_work: float = DEFAULT_MAX_RECOVERY_WORK
    terminal_message: str = DEFAULT_TERMINAL_MESSAGE
    should_keep_recovering: ShouldKeepRecovering | None = None
    on_exhausted: OnExhausted | None = None

    def __post_init__(self) -> None:
        normalized: dict[str, object] = {
            "max_attempts": max(1, _floor(_number("max_attempts", self.max_attempts))),
            "max_interrupted_attempts": max(
                1, _floor(_number("max_interrupted_attempts", self.max_interrupted_attempts))
            ),
            "stable_timeout_ms": _floor(
                _number("stable_timeout_ms", self.stable_timeout_ms, allow_inf=False)
            ),
            "no_progress_timeout_ms": _floor(
                _number("no_progress_timeout_ms", self.no_progress_timeout_ms)
            ),
            "max_recovery_work": _number("max_recovery_work", self.max_recovery_work),
        }
        for name, value in normalized.items():
            object.__setattr__(self, name, value)
        if not isinstance(self.terminal_message, str):
            raise ChatRecoveryConfigError(
                f"chat_recovery.terminal_message must be a string, got {self.terminal_message!r}",
                field="terminal_message",
                value=self.terminal_message,
            )
        for hook in ("should_keep_recovering", "on_exhausted"):
            value = getattr(self, hook)
            if value is not None and not callable(value):
                raise ChatRecoveryConfigError(
                    f"chat_recovery.{hook} must be callable, got {value!r}",
                    field=hook,
                    value=value,
                )


#: What ``AIChatAgent.chat_recovery`` may be set to.
ChatRecoverySpec = bool | ChatRecoveryConfig | Mapping[str, Any] | None

_KEYS: Final = {
    **{f.name: f.name for f in fields(ChatRecoveryConfig)},
    "maxAttempts": "max_attempts",
    "maxInterruptedAttempts": "max_interrupted_attempts",
    "stableTimeoutMs": "stable_timeout_ms",
    "noProgressTimeoutMs": "no_progress_timeout_ms",
    "maxRecoveryWork": "max_recovery_work",
    "terminalMessage": "terminal_message",
    "shouldKeepRecovering": "should_keep_recovering",
    "onExhausted": "on_exhausted",
}
_NUMERIC: Final = frozenset(
    {
        "max_attempts",
        "max_interrupted_attempts",
        "stable_timeout_ms",
        "no_progress_timeout_ms",
        "max_recovery_work",
    }
)
#: The SDK's deprecated alias: ``max_oom_retries: n`` means ``max_interrupted_attempts: n + 1``.
_OOM_KEYS: Final = frozenset({"maxOomRetries", "max_oom_retries"})


def _from_mapping(spec: Mapping[str, Any]) -> ChatRecoveryConfig:
    kwargs: dict[str, Any] = {}
    legacy_oom: float | None = None
    for key, value in spec.items():
        if value is None:  # the SDK's ``??``: an explicit null is "unset"
            continue
        if key in _OOM_KEYS:
            legacy_oom = _floor(_number(key, value))
            continue
        name = _KEYS.get(key) if isinstance(key, str) else None
        if name is None:
            raise ChatRecoveryConfigError(f"unknown chat_recovery option {key!r}", field=str(key))
        if name in kwargs:
            raise ChatRecoveryConfigError(
                f"chat_recovery option {name!r} given twice", field=str(key), value=value
            )
        if name in _NUMERIC:
            _number(key, value)  # report the key as the user spelled it
        kwargs[name] = value
    if legacy_oom is not None and "max_interrupted_attempts" not in kwargs:
        kwargs["max_interrupted_attempts"] = legacy_oom + 1
    return ChatRecoveryConfig(**kwargs)


def resolve_chat_recovery(value: ChatRecoverySpec) -> ChatRecoveryConfig | None:
    """The config ``value`` asks for, or ``None`` when recovery is off (``False``).

    ``True`` and ``None`` give the defaults; a mapping's missing (or ``None``) keys fall back to
    them. Raises :class:`ChatRecoveryConfigError` for anything that cannot work.
    """
    if value is None or value is True:
        return ChatRecoveryConfig()
    if value is False:
        return None
    if isinstance(value, ChatRecoveryConfig):
        return value
    if isinstance(value, Mapping):
        return _from_mapping(value)
    raise ChatRecoveryConfigError(
        "chat_recovery must be True, False, None, a ChatRecoveryConfig or a mapping, "
        f"got {value!r}",
        value=value,
    )
