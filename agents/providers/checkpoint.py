"""Where a model turn stands, durably: which message, which step, which provider request.

The loop writes one small record (sync KV, key :data:`CHECKPOINT_KEY`) before each request and
when a step ends, and the provider's handle as soon as it is known (OpenAI's response id). When
the chat layer recovers an interrupted turn — a continuation of the persisted partial, or a
retry of a turn killed before its first chunk was stored — :func:`plan_turn` reads it back:
the same assistant message, the same step, and how to resume that step by the provider's
strategy. A turn that finished, a different user message or a different provider starts fresh.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "CHECKPOINT_KEY",
    "CURSOR_TRAIL",
    "Plan",
    "TurnCheckpoint",
    "load_checkpoint",
    "plan_turn",
]

CHECKPOINT_KEY = "cf_agents_model_turn"
#: How many text cursors the checkpoint keeps (see :attr:`TurnCheckpoint.cursor`).
CURSOR_TRAIL = 4


@dataclass(slots=True)
class TurnCheckpoint:
    user_message_id: str | None
    message_id: str
    provider: str
    step: int = 0
    #: Requests made for this step so far (each non-retrieving attempt is a new operation).
    request: int = 0
    #: Whether the step's request ended (its tools may still have been running).
    done: bool = False
    finished: bool = False
    handle: dict[str, Any] | None = None
    #: A done step's output — ``{"text", "calls": [[id, name, args, position]], "reason"}`` —
    #: so a recovery re-emits what storage missed instead of paying for it again.
    output: dict[str, Any] | None = None
    #: Text cursors of the step's stored response (a retrieving provider): ``[seq, chars]`` —
    #: the event's sequence number and the step's text length once it was streamed — the
    #: newest :data:`CURSOR_TRAIL` of them. A recovery re-attaches after the newest one the
    #: persisted text covers (the chat layer stores chunks in segments, so the newest may be
    #: ahead of what reached storage).
    cursor: list[list[int]] | None = None

    def save(self, kv: Any) -> None:
        kv.put(CHECKPOINT_KEY, asdict(self))

    def mark(self, seq: int, chars: int) -> None:
        """A text cursor: event ``seq`` streamed, the step's text is ``chars`` long."""
        self.cursor = [*(self.cursor or ()), [seq, chars]][-CURSOR_TRAIL:]

    def next_step(self) -> None:
        """The next step: its first request, nothing known of it yet."""
        self.step += 1
        self.request, self.done, self.handle, self.output, self.cursor = 0, False, None, None, None


def load_checkpoint(kv: Any) -> TurnCheckpoint | None:
    raw = kv.get(CHECKPOINT_KEY)
    if not isinstance(raw, Mapping):
        return None
    try:
        return TurnCheckpoint(**dict(raw))
    except TypeError:
        return None


@dataclass(frozen=True, slots=True)
class Plan:
    checkpoint: TurnCheckpoint
    #: The partial assistant message being continued (persisted), if any.
    partial: Mapping[str, Any] | None
    #: The step was cut mid-request: resume it (by strategy) rather than start the next one.
    resume_step: bool


def _latest_user_id(messages: Sequence[Mapping[str, Any]]) -> str | None:
    for message in reversed(messages):
        if message.get("role") == "user":
            return str(message.get("id"))
    return None


def plan_turn(
    saved: TurnCheckpoint | None,
    provider: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    continuation: bool,
    new_id: str,
) -> Plan:
    """Where this reply starts (see the module docstring)."""
    user_id = _latest_user_id(messages)
    last = messages[-1] if messages else None
    partial = (
        last if continuation and last is not None and last.get("role") == "assistant" else None
    )
    if saved is not None and not saved.finished and saved.provider == provider:
        if partial is not None and partial.get("id") == saved.message_id:
            return Plan(saved, partial, not saved.done)
        unknown = all(m.get("id") != saved.message_id for m in messages)
        if partial is None and unknown and saved.user_message_id == user_id:
            return Plan(saved, None, not saved.done)  # a retry of the turn it was in
    if partial is not None:  # continuing a message this loop did not start (or finished)
        fresh = TurnCheckpoint(user_id, str(partial.get("id")), provider, step=_steps(partial))
        return Plan(fresh, partial, False)
    return Plan(TurnCheckpoint(user_id, new_id, provider), None, False)


def _steps(message: Mapping[str, Any]) -> int:
    return sum(1 for p in message.get("parts") or () if p.get("type") == "step-start")
