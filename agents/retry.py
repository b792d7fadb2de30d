"""``retry(fn, ...)``: retries with full-jitter exponential back-off, as the SDK's ``tryN``.

Schedules, queue items and user code (``self.retry(fn)``) share one policy so that a failing
callback behaves the same wherever it runs:

* ``fn`` is called with the attempt number (1-based) when it takes a parameter, as the SDK passes
  ``attempt`` to its callback; sync and async functions both work.
* After attempt ``n`` fails, the next one waits ``floor(random() × min(max_delay_ms,
  base_delay_ms × 2ⁿ))`` ms — "full jitter", so many failing callers do not retry in lock-step.
* ``should_retry(error, next_attempt)`` may stop early; the last error is re-raised unchanged.

``sleep`` and ``random`` are module-level hooks on purpose: the back-off is real time (a
Durable Object has no other timer that an alarm handler could wait on), and tests replace them
to assert the delays without waiting.

:func:`run_callback` is the one retry-and-report path of schedule and queue callbacks:
``method(payload, record)`` with the record's retry options, the final failure reported through
``on_error(error, record)``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random as _random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from .core.callbacks import call_with_optional_args
from .core.host import AgentHost, Core
from .errors import RetryOptionsError
from .options import RetryOptions

_log = logging.getLogger("agents.retry")

__all__ = [
    "RetryOptionsError",
    "RetrySpec",
    "backoff_delay_ms",
    "random",
    "resolve_retry_options",
    "retry",
    "retry_options_from_json",
    "retry_options_to_json",
    "run_callback",
    "sleep",
]

T = TypeVar("T")

#: Awaited with a delay in **seconds** between attempts; tests replace it.
sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep
#: Returns a float in ``[0, 1)`` for the jitter; tests replace it.
random: Callable[[], float] = _random.random

#: Retry options as a user may pass them: the dataclass, or a partial mapping (snake_case or the
#: SDK's camelCase keys) whose missing fields fall back to the agent's ``options.retry``.
RetrySpec = RetryOptions | Mapping[str, Any]

_FIELDS = {
    "max_attempts": "max_attempts",
    "maxAttempts": "max_attempts",
    "base_delay_ms": "base_delay_ms",
    "baseDelayMs": "base_delay_ms",
    "max_delay_ms": "max_delay_ms",
    "maxDelayMs": "max_delay_ms",
}
_SDK_KEYS = {
    "max_attempts": "maxAttempts",
    "base_delay_ms": "baseDelayMs",
    "max_delay_ms": "maxDelayMs",
}


def backoff_delay_ms(attempt: int, base_delay_ms: float, max_delay_ms: float) -> int:
    """The wait after failed attempt ``attempt`` (1-based): in ``[0, min(max, base·2ⁿ))``."""
    upper: float = min(base_delay_ms * float(2**attempt), max_delay_ms)
    return math.floor(float(random()) * upper)


def _normalize(spec: RetrySpec | None) -> dict[str, int]:
    """Only the fields the caller set, snake_case; validated one by one."""
    if spec is None:
        return {}
    if isinstance(spec, RetryOptions):
        return {
            "max_attempts": spec.max_attempts,
            "base_delay_ms": spec.base_delay_ms,
            "max_delay_ms": spec.max_delay_ms,
        }
    out: dict[str, int] = {}
    for key, value in spec.items():
        field = _FIELDS.get(key)
        if field is None:
            raise RetryOptionsError(f"unknown retry option {key!r}")
        if value is None:
            continue
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value):
            raise RetryOptionsError(f"retry option {key!r} must be a finite number, got {value!r}")
        out[field] = int(value)
    return out


def resolve_retry_options(spec: RetrySpec | None, defaults: RetryOptions) -> RetryOptions:
    """``spec``'s fields over ``defaults``; raises :class:`RetryOptionsError` if unusable."""
    merged = {**_normalize(defaults), **_normalize(spec)}
    try:
        return RetryOptions(**merged)
    except ValueError as exc:
        raise RetryOptionsError(f"invalid retry options: {exc}") from exc


def retry_options_to_json(spec: RetrySpec | None) -> dict[str, int] | None:
    """The SDK's ``retry_options`` column shape (camelCase, only the fields given), or None."""
    fields = _normalize(spec)
    if not fields:
        return None
    return {_SDK_KEYS[k]: v for k, v in fields.items()}


def retry_options_from_json(value: Any) -> dict[str, int] | None:
    """Parse a stored ``retry_options`` object back into partial snake_case fields (None if bad)."""
    if not isinstance(value, Mapping):
        return None
    try:
        return _normalize(value) or None
    except RetryOptionsError:
        return None


async def retry(
    fn: Callable[..., Any],
    *,
    max_attempts: int | None = None,
    base_delay_ms: int | None = None,
    max_delay_ms: int | None = None,
    should_retry: Callable[[BaseException, int], bool] | None = None,
    defaults: RetryOptions | None = None,
) -> Any:
    """Run ``fn`` until it succeeds or the attempts run out; returns its result.

    Unset limits come from ``defaults`` (the agent's ``options.retry``; else the SDK's defaults
    3 / 100 ms / 3000 ms). ``should_retry(error, next_attempt)`` returning false re-raises at once.
    Only :class:`Exception` is retried: cancellation (an object reset) always propagates.
    """
    opts = resolve_retry_options(
        {
            "max_attempts": max_attempts,
            "base_delay_ms": base_delay_ms,
            "max_delay_ms": max_delay_ms,
        },
        defaults or RetryOptions(),
    )
    attempt = 1
    while True:
        try:
            return await call_with_optional_args(fn, attempt)
        except Exception as exc:
            next_attempt = attempt + 1
            if next_attempt > opts.max_attempts:
                raise
            if should_retry is not None and not should_retry(exc, next_attempt):
                raise
            await sleep(backoff_delay_ms(attempt, opts.base_delay_ms, opts.max_delay_ms) / 1000)
            attempt = next_attempt


async def run_callback(
    core: Core,
    host: AgentHost,
    method: Callable[..., Any],
    record: Any,
    payload: Any,
    retry_options: Any,
    *,
    label: str,
) -> None:
    """Run a schedule's or queue item's callback as ``method(payload, record)`` with retries.

    The record's own retry options apply (unreadable ones fall back to ``host.options.retry``);
    the final failure is logged and reported through ``on_error(error, record)``.
    """
    defaults = host.options.retry
    try:
        opts = resolve_retry_options(retry_options, defaults)
    except RetryOptionsError:
        opts = defaults

    async def attempt() -> Any:
        return await call_with_optional_args(method, payload, record)

    try:
        await retry(attempt, defaults=opts)
    except Exception as exc:
        _log.error("%s failed after %d attempts: %r", label, opts.max_attempts, exc)
        await core.report(exc, record)
