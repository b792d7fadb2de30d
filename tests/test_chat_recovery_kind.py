"""Which recovery a dead turn gets (continue or retry) and when a changed conversation skips it."""

from __future__ import annotations

from typing import Any

import pytest

from agents.chat.recovery import classify_recovery_kind, superseded_reason

# == classification and a changed conversation ====================================================

USER = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
ASSISTANT = {"id": "a0", "role": "assistant", "parts": []}
SNAP = {"requestId": "r1", "continuation": False, "latestUserMessageId": "u1"}


@pytest.mark.parametrize(
    ("snapshot", "stream_id", "text", "parts", "messages", "kind", "pre_stream"),
    [
        (SNAP, "", "", [], [ASSISTANT, USER], "retry", True),  # died before any stream
        (SNAP, "s1", "", [], [ASSISTANT, USER], "retry", False),  # empty partial of a new turn
        (SNAP, "s1", "w0", [], [ASSISTANT, USER], "continue", False),
        (SNAP, "s1", "", [{"type": "step-start"}], [USER], "continue", False),
        ({**SNAP, "continuation": True}, "", "", [], [USER], "continue", False),
        (SNAP, "", "", [], [USER, ASSISTANT], "continue", False),  # partial already persisted
        (SNAP, "", "", [], [{**USER, "id": "u2"}], "continue", False),  # not that user message
        ({**SNAP, "latestUserMessageId": None}, "", "", [], [USER], "continue", False),
        (None, "", "", [], [USER], "continue", False),
        (SNAP, "", "", [], [], "continue", False),
    ],
)
def test_classify_recovery_kind(
    snapshot: Any,
    stream_id: str,
    text: str,
    parts: list[Any],
    messages: Any,
    kind: str,
    pre_stream: bool,
) -> None:
    c = classify_recovery_kind(
        snapshot, stream_id=stream_id, partial_text=text, partial_parts=parts, messages=messages
    )
    assert (c.kind, c.retry_pre_stream) == (kind, pre_stream)


@pytest.mark.parametrize(
    ("kind", "target", "messages", "reason"),
    [
        ("continue", "a0", [USER, ASSISTANT], None),
        ("continue", "a0", [USER, ASSISTANT, {**USER, "id": "u2"}], None),  # last assistant is a0
        ("continue", "a0", [ASSISTANT, USER, {**ASSISTANT, "id": "a1"}], "conversation_changed"),
        ("continue", None, [USER], None),
        ("retry", "u1", [ASSISTANT, USER], None),
        ("retry", "u1", [ASSISTANT, {**USER, "id": "u2"}], "conversation_changed"),
        ("retry", "u1", [USER, ASSISTANT], "no_unanswered_user_message"),
        ("retry", None, [], "no_unanswered_user_message"),
    ],
)
def test_a_changed_conversation_skips_the_recovery(
    kind: Any, target: str | None, messages: Any, reason: str | None
) -> None:
    assert superseded_reason(kind, target_id=target, messages=messages) == reason
