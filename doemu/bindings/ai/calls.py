"""The last calls of ``env.AI.run``, kept in memory for the admin API and the inspector.

A bounded ring (the newest :data:`MAX_CALLS`): what a developer wants when a chat agent's model
call misbehaves is the few calls just made (which model, what the endpoint answered, how long it
took, how many tokens), not a history, so nothing is written to disk and a restart forgets
them. A record holds no inputs, outputs or key: only the model names, the HTTP status, the
error text (already redacted by :mod:`.upstream`), the latency and the token counts.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["MAX_CALLS", "AiCall", "CallLog"]

#: How many calls the ring keeps.
MAX_CALLS = 50


@dataclass
class AiCall:
    """One ``run()``: ``task`` is ``text`` or ``embeddings``; ``status`` the endpoint's HTTP
    status (``None``: it was not reached); ``latency_ms`` until the answer (for a stream, until
    the endpoint accepted it); ``tokens`` the usage when the answer carried one."""

    at: float
    model: str
    endpoint_model: str | None
    task: str | None
    stream: bool
    status: int | None = None
    ok: bool = False
    error: str | None = None
    latency_ms: float | None = None
    tokens: dict[str, int] | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


class CallLog:
    """The ring of :class:`AiCall` (see the module docstring)."""

    def __init__(self, size: int = MAX_CALLS) -> None:
        self._calls: deque[AiCall] = deque(maxlen=size)
        self.total = 0  # every call since start, beyond what the ring keeps

    def start(self, model: str, stream: bool) -> tuple[AiCall, float]:
        """A new record (in the ring at once, so a call still running is listed) and the
        monotonic time it started."""
        call = AiCall(at=time.time() * 1000.0, model=model, endpoint_model=None, task=None,
                      stream=stream)  # fmt: skip
        self._calls.append(call)
        self.total += 1
        return call, time.monotonic()

    @staticmethod
    def finish(
        call: AiCall, started: float, error: str | None = None, tokens: dict[str, int] | None = None
    ) -> None:
        call.latency_ms = round((time.monotonic() - started) * 1000.0, 1)
        call.ok = error is None
        call.error = error
        call.tokens = tokens

    def recent(self) -> list[dict[str, Any]]:
        """The kept calls, newest first."""
        return [call.as_json() for call in reversed(self._calls)]
