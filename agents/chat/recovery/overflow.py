"""Context overflow, the reactive layer (the SDK's Think ``contextOverflow.reactive``).

A long, tool-heavy conversation can outgrow the model's context window; the provider then
refuses the request ("prompt is too long", ``context_length_exceeded``) and the turn would die.
With ``context_overflow`` on, a turn that fails with an error the agent's
``classify_chat_error`` calls ``"context_overflow"`` discards its cut-off partial (never
persisted: the turn restarts from scratch, so keeping it would orphan it beside the answer),
compacts the transcript with the agent's ``compact_messages`` and runs again — at most
``max_retries`` times (default 1). If compaction cannot shorten the history, or the budget is
spent, the overflow surfaces through ``on_chat_error`` with ``classification:
"context_overflow"`` and the error frame: it never loops, never ends silently.

Like the SDK's core, nothing here matches provider errors by itself: assign
:func:`default_context_overflow_classifier` (the common providers' wordings) or write your own.
The *proactive* guard (``{"proactive": {"max_input_tokens": N, "headroom": 0.9,
"max_compactions": 1}}``) compacts before a step whose previous step's input tokens crossed
``max_input_tokens × headroom``. Only a loop that sees each step's usage can apply it: the
model loop of :mod:`agents.providers` does, through :func:`compact_transcript`; a reply that
does not come from that loop is covered by the reactive layer only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...core.protocol import dumps
from ...errors import AgentsError

__all__ = [
    "CONTEXT_OVERFLOW",
    "ContextOverflowConfig",
    "ContextOverflowConfigError",
    "compact_after_overflow",
    "compact_transcript",
    "default_context_overflow_classifier",
    "resolve_context_overflow",
]

CONTEXT_OVERFLOW = "context_overflow"

#: How the common providers word "the prompt does not fit" (Anthropic, OpenAI, Google, Bedrock,
#: Mistral, Workers AI and OpenAI-compatible servers).
_OVERFLOW = re.compile(
    r"prompt is too long|context[_ ]length[_ ]exceeded|maximum context length|"
    r"context window|exceeds the (?:maximum|model's) (?:number of )?(?:input )?tokens|"
    r"input is too long|too many (?:input )?tokens|request too large for model|"
    r"string too long|reduce the length of the messages",
    re.IGNORECASE,
)


class ContextOverflowConfigError(AgentsError, ValueError):
    """A ``context_overflow`` setting this port cannot honour, named."""


@dataclass(frozen=True, slots=True)
class ContextOverflowConfig:
    reactive: bool = True
    max_retries: int = 1
    #: The proactive guard: off when ``None``.
    max_input_tokens: int | None = None
    headroom: float = 0.9
    max_compactions: int = 1


def _whole(value: Any, name: str, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ContextOverflowConfigError(
            f"context_overflow {name} must be a whole number ≥ {minimum}, got {value!r}"
        )
    return value


def _proactive(value: Any) -> tuple[int | None, float, int]:
    if value is None or value is False:
        return None, 0.9, 1
    if not isinstance(value, Mapping):
        raise ContextOverflowConfigError(
            "context_overflow.proactive must be a dict with max_input_tokens (and optionally "
            f"headroom, max_compactions), got {type(value).__name__}"
        )
    unknown = set(value) - {"max_input_tokens", "maxInputTokens", "headroom", "max_compactions",
                            "maxCompactions"}  # fmt: skip
    if unknown:
        raise ContextOverflowConfigError(
            f"unknown context_overflow.proactive keys: {sorted(unknown)}"
        )
    limit = _whole(value.get("max_input_tokens", value.get("maxInputTokens")),
                   "proactive.max_input_tokens", 1)  # fmt: skip
    headroom = value.get("headroom", 0.9)
    if not isinstance(headroom, int | float) or isinstance(headroom, bool) or not 0 < headroom <= 1:
        raise ContextOverflowConfigError(
            f"context_overflow proactive.headroom must be in (0, 1], got {headroom!r}"
        )
    compactions = _whole(value.get("max_compactions", value.get("maxCompactions", 1)),
                         "proactive.max_compactions", 0)  # fmt: skip
    return limit, float(headroom), compactions


def resolve_context_overflow(value: Any) -> ContextOverflowConfig | None:
    """``None``/``False`` → off; ``True`` → reactive, one retry; a dict with ``reactive``,
    ``max_retries`` and ``proactive`` (or the SDK's camelCase names)."""
    if value is None or value is False:
        return None
    if value is True:
        return ContextOverflowConfig()
    if isinstance(value, ContextOverflowConfig):
        return value
    if not isinstance(value, Mapping):
        raise ContextOverflowConfigError(
            f"context_overflow must be True, False or a dict, got {type(value).__name__}"
        )
    unknown = set(value) - {"reactive", "max_retries", "maxRetries", "proactive"}
    if unknown:
        raise ContextOverflowConfigError(f"unknown context_overflow keys: {sorted(unknown)}")
    retries = _whole(value.get("max_retries", value.get("maxRetries", 1)), "max_retries", 0)
    limit, headroom, compactions = _proactive(value.get("proactive"))
    reactive = bool(value.get("reactive", False))
    if not reactive and limit is None:
        return None
    return ContextOverflowConfig(reactive, retries, limit, headroom, compactions)


def default_context_overflow_classifier(error: Any) -> str | None:
    """``"context_overflow"`` when ``error`` (an exception, or an in-band error's text) reads
    like a provider refusing a prompt that does not fit, else ``None``."""
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return CONTEXT_OVERFLOW if _OVERFLOW.search(text) else None


async def compact_after_overflow(agent: Any, request_id: str, error: Any, compactions: int) -> bool:
    """The reactive layer for ``agent``'s turn ``request_id``: True when ``error`` is an
    overflow, the budget allows another run, and compaction shortened the transcript (now
    persisted, replacing the old one in one transaction)."""
    config = resolve_context_overflow(agent.context_overflow)
    if config is None or not config.reactive or compactions >= config.max_retries:
        return False
    if agent.classify_chat_error(error) != CONTEXT_OVERFLOW:
        return False
    return await compact_transcript(agent, request_id, "reactive")


async def compact_transcript(agent: Any, request_id: str, reason: str) -> bool:
    """Compact ``agent``'s transcript with its ``compact_messages``: True when the result is
    shorter and now persisted (replacing the old transcript in one transaction), with a
    ``chat:context:compacted`` event naming ``reason``."""
    before = agent.messages
    compacted = await agent.compact_messages(list(before))
    if compacted is None or len(dumps(compacted)) >= len(dumps(before)):
        return False  # nothing shorter

    def replace() -> None:  # the compacted transcript, in its own order, all or nothing
        agent._chat_store.clear()
        agent.persist_messages(compacted)

    agent.ctx.storage.transactionSync(replace)
    agent._emit(
        "chat:context:compacted",
        {
            "requestId": request_id,
            "reason": reason,
            "messagesBefore": len(before),
            "messagesAfter": len(compacted),
        },
    )
    return True
