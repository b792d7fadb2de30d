"""Which failures of a reply are transient, and what bounded recovery does with them.

A reply can fail in ways that say nothing about the conversation: the provider's connection
dropped mid-stream, or the provider refused a request for now (429 with ``Retry-After``, a 5xx,
"overloaded"). The published package routes a dropped read into bounded recovery (its
``isRecoverableStreamReadError``); a refusal of a *recovery* turn (a continuation or retry) goes
the same way here, so a rate-limited continuation is retried after ``Retry-After`` within the
incident's budget instead of leaving a silently truncated answer (issue 31).

The chat layer sits below the provider adapters, so it reads duck-typed attributes rather than
their classes: an exception (or one in its ``__cause__``/``__context__`` chain) with
``transient = True`` is transient; with an integer ``status`` it is a *refusal* (the provider
answered with an HTTP error), else a *read* failure; ``retry_after`` (seconds) is honoured.
``agents.providers.errors`` sets these. Messages a platform uses for a lost connection count
too (workerd's "Network connection lost.").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["TransientFailure", "http_refusal", "transient_failure"]

_CONNECTION_LOST = re.compile(r"network connection lost|connection (?:reset|dropped)", re.I)


@dataclass(frozen=True, slots=True)
class TransientFailure:
    """A transient failure: ``refused`` (an HTTP refusal) or a read that broke; the provider's
    ``retry_after`` in seconds when it sent one."""

    refused: bool
    retry_after: float | None = None


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 16:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def transient_failure(exc: BaseException) -> TransientFailure | None:
    """``exc`` as a transient failure, or ``None`` when it is not one."""
    for e in _chain(exc):
        if getattr(e, "transient", False) is True or _CONNECTION_LOST.search(str(e)):
            after = getattr(e, "retry_after", None)
            retry_after = float(after) if isinstance(after, int | float) else None
            return TransientFailure(_status(e) is not None, retry_after)
    return None


def http_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` is the provider answering with an HTTP error (``status`` ≥ 400): the chat
    turn shows it as ``streamText`` does, as an in-band error ending ``outcome: "error"``."""
    return any((s := _status(e)) is not None and s >= 400 for e in _chain(exc))
