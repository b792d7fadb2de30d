"""retry(): attempts, full-jitter back-off bounds, should_retry, defaults, and Agent.retry."""

from __future__ import annotations

import asyncio
import importlib
import random as stdlib_random
from collections.abc import Callable
from typing import Any

import pytest

from agents import Agent, AgentOptions, RetryOptions
from doemu.testing.plugin import HarnessFactory

retry_module = importlib.import_module("agents.retry")
retry = retry_module.retry
backoff_delay_ms = retry_module.backoff_delay_ms


class Flaky:
    """Fails ``failures`` times, then returns ``"ok"``; records the attempt numbers it saw."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.attempts: list[int] = []

    async def __call__(self, attempt: int) -> str:
        self.attempts.append(attempt)
        if len(self.attempts) <= self.failures:
            raise RuntimeError(f"failure {len(self.attempts)}")
        return "ok"


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    record: list[float] = []

    async def sleep(seconds: float) -> None:
        record.append(seconds)

    monkeypatch.setattr(retry_module, "sleep", sleep)
    return record


async def test_succeeds_after_failures_passing_the_attempt_number(slept: list[float]) -> None:
    fn = Flaky(2)
    assert await retry(fn, max_attempts=3) == "ok"
    assert fn.attempts == [1, 2, 3]
    assert len(slept) == 2


async def test_reraises_the_last_error_after_max_attempts(slept: list[float]) -> None:
    fn = Flaky(10)
    with pytest.raises(RuntimeError, match="failure 4"):
        await retry(fn, max_attempts=4)
    assert fn.attempts == [1, 2, 3, 4]
    assert len(slept) == 3  # no sleep after the last attempt


async def test_single_attempt_never_sleeps(slept: list[float]) -> None:
    with pytest.raises(RuntimeError):
        await retry(Flaky(1), max_attempts=1)
    assert slept == []


async def test_backoff_is_full_jitter_capped_exponential(
    slept: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retry_module, "random", lambda: 0.999999)
    with pytest.raises(RuntimeError):
        await retry(Flaky(10), max_attempts=5, base_delay_ms=100, max_delay_ms=500)
    # Upper bounds min(500, 100 * 2**n) for n = 1..4 are 200, 400, 500, 500 (exclusive).
    assert slept == [0.199, 0.399, 0.499, 0.499]

    slept.clear()
    monkeypatch.setattr(retry_module, "random", lambda: 0.0)
    with pytest.raises(RuntimeError):
        await retry(Flaky(10), max_attempts=3, base_delay_ms=100, max_delay_ms=500)
    assert slept == [0.0, 0.0]


def test_backoff_delays_stay_within_bounds_with_real_randomness(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = stdlib_random.Random(7)
    monkeypatch.setattr(retry_module, "random", rng.random)
    for attempt in range(1, 8):
        upper = min(100 * 2**attempt, 3000)
        samples = [backoff_delay_ms(attempt, 100, 3000) for _ in range(200)]
        assert all(0 <= d < upper for d in samples)
        assert all(isinstance(d, int) for d in samples)
        assert max(samples) > upper * 0.8  # the whole range is used, not a fixed delay
        assert min(samples) < upper * 0.2


async def test_should_retry_can_stop_early(slept: list[float]) -> None:
    seen: list[tuple[str, int]] = []

    def only_transient(error: BaseException, next_attempt: int) -> bool:
        seen.append((str(error), next_attempt))
        return "transient" in str(error)

    calls = 0

    async def fn() -> None:
        nonlocal calls
        calls += 1
        raise ValueError("transient" if calls == 1 else "fatal")

    with pytest.raises(ValueError, match="fatal"):
        await retry(fn, max_attempts=5, should_retry=only_transient)
    assert calls == 2
    assert seen == [("transient", 2), ("fatal", 3)]
    assert len(slept) == 1


async def test_sync_functions_and_defaults(slept: list[float]) -> None:
    calls: list[int] = []

    def sync_fn() -> int:
        calls.append(1)
        if len(calls) < 2:
            raise KeyError("once")
        return 42

    assert await retry(sync_fn, defaults=RetryOptions(max_attempts=2)) == 42
    with pytest.raises(RuntimeError, match="failure 3"):
        await retry(Flaky(10))  # the SDK's default: three attempts
    assert len(slept) == 1 + 2


async def test_cancellation_is_never_retried(slept: list[float]) -> None:
    calls = 0

    async def fn() -> None:
        nonlocal calls
        calls += 1
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await retry(fn, max_attempts=5)
    assert calls == 1
    assert slept == []


async def test_invalid_options_are_refused() -> None:
    with pytest.raises(retry_module.RetryOptionsError):
        await retry(Flaky(0), max_attempts=0)
    with pytest.raises(retry_module.RetryOptionsError):
        await retry(Flaky(0), base_delay_ms=500, max_delay_ms=100)


async def test_retry_options_json_uses_the_sdk_keys() -> None:
    assert retry_module.retry_options_to_json({"max_attempts": 2}) == {"maxAttempts": 2}
    assert retry_module.retry_options_to_json(RetryOptions()) == {
        "maxAttempts": 3,
        "baseDelayMs": 100,
        "maxDelayMs": 3000,
    }
    assert retry_module.retry_options_from_json({"maxDelayMs": 9}) == {"max_delay_ms": 9}
    assert retry_module.retry_options_from_json("garbage") is None


ATTEMPTS: dict[str, list[int]] = {}


class Retrier(Agent):
    options = AgentOptions(retry=RetryOptions(max_attempts=4, base_delay_ms=10, max_delay_ms=50))

    async def flaky(self, failures: int) -> dict[str, Any]:
        seen = ATTEMPTS.setdefault(self.name, [])

        async def fn(attempt: int) -> str:
            seen.append(attempt)
            if attempt <= failures:
                raise RuntimeError(f"attempt {attempt}")
            return "done"

        try:
            return {"result": await self.retry(fn)}
        except RuntimeError as exc:
            return {"error": str(exc)}

    async def limited(self) -> str:
        try:
            await self.retry(lambda: 1 / 0, max_attempts=2)
        except ZeroDivisionError:
            return "gave up"
        return "unexpected"


async def test_agent_retry_uses_the_class_options(
    doemu_harness: HarnessFactory, unique_name: Callable[[str], str], slept: list[float]
) -> None:
    h = await doemu_harness({"RETRIER": Retrier})
    name = unique_name("retrier")
    stub = h.env.RETRIER.getByName(name)
    assert await stub.flaky(3) == {"result": "done"}
    assert ATTEMPTS[name] == [1, 2, 3, 4]
    ATTEMPTS[name].clear()
    assert await stub.flaky(10) == {"error": "attempt 4"}  # options.retry.max_attempts == 4
    assert all(s < 0.05 for s in slept)  # capped by options.retry.max_delay_ms
    assert await stub.limited() == "gave up"
