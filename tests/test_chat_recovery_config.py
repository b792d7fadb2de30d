"""Chat recovery's config: the SDK's defaults, its snake/camel spellings, normalization, errors."""

from __future__ import annotations

import math
from typing import Any

import pytest

from agents.chat.recovery import (
    DEFAULT_TERMINAL_MESSAGE,
    ChatRecoveryConfig,
    ChatRecoveryConfigError,
    ChatRecoveryProgressContext,
    resolve_chat_recovery,
)
from agents.errors import AgentsError

# == config ======================================================================================


def test_defaults_are_the_sdks() -> None:
    config = resolve_chat_recovery(True)
    assert config == ChatRecoveryConfig()
    assert config is not None
    assert (
        config.max_attempts,
        config.max_interrupted_attempts,
        config.stable_timeout_ms,
        config.no_progress_timeout_ms,
        config.max_recovery_work,
    ) == (10, 5, 10_000, 300_000, 10_000)
    assert config.terminal_message == (
        "The assistant was interrupted and could not recover. Please try again."
    )
    assert config.should_keep_recovering is None and config.on_exhausted is None


def test_none_means_defaults_and_false_means_off() -> None:
    assert resolve_chat_recovery(None) == ChatRecoveryConfig()
    assert resolve_chat_recovery(False) is None
    config = ChatRecoveryConfig(max_attempts=3)
    assert resolve_chat_recovery(config) is config


def test_snake_and_camel_case_mappings_agree() -> None:
    def hook(ctx: ChatRecoveryProgressContext) -> bool:
        return True

    async def done(ctx: Any) -> None:
        return None

    snake = resolve_chat_recovery(
        {
            "max_attempts": 4,
            "max_interrupted_attempts": 2,
            "stable_timeout_ms": 500,
            "no_progress_timeout_ms": 60_000,
            "max_recovery_work": 7,
            "terminal_message": "gone",
            "should_keep_recovering": hook,
            "on_exhausted": done,
        }
    )
    camel = resolve_chat_recovery(
        {
            "maxAttempts": 4,
            "maxInterruptedAttempts": 2,
            "stableTimeoutMs": 500,
            "noProgressTimeoutMs": 60_000,
            "maxRecoveryWork": 7,
            "terminalMessage": "gone",
            "shouldKeepRecovering": hook,
            "onExhausted": done,
        }
    )
    assert snake == camel == ChatRecoveryConfig(4, 2, 500, 60_000, 7, "gone", hook, done)


@pytest.mark.parametrize(
    ("spec", "field", "expected"),
    [
        ({"maxAttempts": 0}, "max_attempts", 1),  # read as at least 1, as the SDK
        ({"maxAttempts": 2.9}, "max_attempts", 2),  # floored
        ({"maxAttempts": math.inf}, "max_attempts", math.inf),
        ({"maxInterruptedAttempts": 0}, "max_interrupted_attempts", 1),
        ({"maxInterruptedAttempts": math.inf}, "max_interrupted_attempts", math.inf),
        ({"maxOomRetries": 3}, "max_interrupted_attempts", 4),  # deprecated alias: n + 1
        ({"max_oom_retries": 0}, "max_interrupted_attempts", 1),
        ({"maxOomRetries": 3, "maxInterruptedAttempts": 7}, "max_interrupted_attempts", 7),
        ({"stableTimeoutMs": 0}, "stable_timeout_ms", 0),
        ({"noProgressTimeoutMs": 1.5}, "no_progress_timeout_ms", 1),
        ({"noProgressTimeoutMs": math.inf}, "no_progress_timeout_ms", math.inf),
        ({"maxRecoveryWork": math.inf}, "max_recovery_work", math.inf),
        ({"maxRecoveryWork": 0}, "max_recovery_work", 0),
        ({"maxAttempts": None}, "max_attempts", 10),  # explicit null = unset, as the SDK's ??
        ({}, "terminal_message", DEFAULT_TERMINAL_MESSAGE),
    ],
)
def test_config_normalization(spec: dict[str, Any], field: str, expected: object) -> None:
    config = resolve_chat_recovery(spec)
    assert config is not None
    assert getattr(config, field) == expected


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"maxAttempts": -1}, "maxAttempts"),
        ({"max_attempts": -0.5}, "max_attempts"),
        ({"maxInterruptedAttempts": -3}, "maxInterruptedAttempts"),
        ({"maxOomRetries": -1}, "maxOomRetries"),
        ({"stableTimeoutMs": -10}, "stableTimeoutMs"),
        ({"stableTimeoutMs": math.inf}, "stable_timeout_ms"),
        ({"noProgressTimeoutMs": -1}, "noProgressTimeoutMs"),
        ({"maxRecoveryWork": -1}, "maxRecoveryWork"),
        ({"maxRecoveryWork": math.nan}, "maxRecoveryWork"),
        ({"maxAttempts": "10"}, "maxAttempts"),
        ({"maxAttempts": True}, "maxAttempts"),
        ({"noProgressTimeoutMs": [1]}, "noProgressTimeoutMs"),
        ({"terminalMessage": 5}, "terminal_message"),
        ({"shouldKeepRecovering": "yes"}, "should_keep_recovering"),
        ({"onExhausted": 1}, "on_exhausted"),
        ({"maxAttempt": 3}, "maxAttempt"),  # unknown key
        ({"maxAttempts": 3, "max_attempts": 4}, "max_attempts"),  # given twice
    ],
)
def test_config_validation_errors(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(ChatRecoveryConfigError) as info:
        resolve_chat_recovery(spec)
    assert isinstance(info.value, AgentsError) and isinstance(info.value, ValueError)
    assert info.value.field == field


@pytest.mark.parametrize("value", [1, "on", 0.5, ["maxAttempts"]])
def test_config_of_the_wrong_type(value: Any) -> None:
    with pytest.raises(ChatRecoveryConfigError):
        resolve_chat_recovery(value)


def test_a_directly_built_config_is_validated_too() -> None:
    with pytest.raises(ChatRecoveryConfigError):
        ChatRecoveryConfig(max_attempts=-1)
    with pytest.raises(ChatRecoveryConfigError):
        ChatRecoveryConfig(max_recovery_work=math.nan)
