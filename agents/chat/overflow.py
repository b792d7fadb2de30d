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
The SDK's *proactive* guard (compact before a step whose previous input tokens crossed a
threshold) needs a model loop with per-step usage, which this port leaves to the agent; asking
for it is refused by name rather than silently ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.protocol import dumps
from ..errors import AgentsError

__all__ = [
    "CONTEXT_OVERFLOW",
    "ContextOverflowConfig",
    "ContextOverflowConfigError",
    "compact_after_overflow",
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


def resolve_context_overflow(value: Any) -> ContextOverflowConfig | None:
    """``None``/``False`` → off; ``True`` → reactive, one retry; a dict with ``reactive`` and
    ``max_retries`` (or the SDK's ``maxRetries``)."""
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
    if value.get("proactive"):
        raise ContextOverflowConfigError(
            "context_overflow.proactive needs per-step token usage from a model loop, which "
            "AIChatAgent does not run; compact in your own loop, or use the reactive layer"
        )
    unknown = set(value) - {"reactive", "max_retries", "maxRetries", "proactive"}
    if unknown:
        raise ContextOverflowConfigError(f"unknown context_overflow keys: {sorted(unknown)}")
    retries = value.get("max_retries", value.get("maxRetries", 1))
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
        raise ContextOverflowConfigError(
            f"context_overflow max_retries must be a whole number ≥ 0, got {retries!r}"
        )
    if not value.get("reactive", False):
        return None
    return ContextOverflowConfig(True, retries)


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
    if config is None or compactions >= config.max_retries:
        return False
    if agent.classify_chat_error(error) != CONTEXT_OVERFLOW:
        return False
    before = agent.messages
    compacted = await agent.compact_messages(list(before))
    if compacted is None or len(dumps(compacted)) >= len(dumps(before)):
        return False  # nothing shorter: the overflow surfaces

    def replace() -> None:  # the compacted transcript, in its own order, all or nothing
        agent._chat_store.clear()
        agent.persist_messages(compacted)

    agent.ctx.storage.transactionSync(replace)
    agent._emit(
        "chat:context:compacted",
        {
            "requestId": request_id,
            "reason": "reactive",
            "messagesBefore": len(before),
            "messagesAfter": len(compacted),
        },
    )
    return True
