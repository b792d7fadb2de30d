"""The exception tree of the agent server: one root under :class:`~agents.errors.AgentsError`.

Every error the server package raises on purpose derives from :class:`AgentServerError`, so a
route can catch exactly what the server refused (and turn it into an HTTP answer) without
swallowing a bug. Each class carries what a caller needs to answer well — the HTTP status a
route should use, the offending value — so no route has to parse a message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import AgentsError

__all__ = [
    "AgentNotFoundError",
    "AgentServerError",
    "RequestError",
    "StreamClosedError",
    "StreamPayloadError",
    "StreamRangeError",
]


class AgentServerError(AgentsError):
    """Root of every error the agent server (``agents.server``) raises deliberately."""


class RequestError(AgentServerError):
    """A request the server refuses: HTTP ``status``, a stable ``code``, a message, details —
    answered as ``{"error", "code", …}``, with the session's state untouched."""

    def __init__(self, http_status: int, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.status = http_status
        self.code = code
        self.details = details

    def body(self) -> dict[str, Any]:
        return {"error": str(self), "code": self.code, **self.details}


class AgentNotFoundError(RequestError):
    """An agent type the registry does not know; names the ones it does."""

    def __init__(self, agent_type: str, available: Sequence[str]) -> None:
        super().__init__(
            404,
            "AGENT_NOT_FOUND",
            f"unknown agent type {agent_type!r}; registered: {', '.join(available) or 'none'}",
            agentType=agent_type,
            availableTypes=list(available),
        )
        self.agent_type = agent_type
        self.available_types = list(available)


class StreamRangeError(AgentServerError, ValueError):
    """A ``fromSequence`` the session's stream cannot serve.

    ``status`` is the HTTP answer a route should give: 400 when ``value`` is not a whole number
    at all, 416 (Range Not Satisfiable) when it is one outside ``0..latest_sequence + 1``.
    The message names the value and the valid range.
    """

    def __init__(self, message: str, *, value: Any, latest_sequence: int, status: int) -> None:
        super().__init__(message)
        self.value = value
        self.latest_sequence = latest_sequence
        self.status = status


class StreamPayloadError(AgentServerError, TypeError):
    """A chunk (or a run's final output) that cannot be streamed: not a JSON object, not
    JSON-serialisable, or too large for one stored row. Nothing was stored or sent."""


class StreamClosedError(AgentServerError):
    """The session's stream holds a terminal event (``end``/``fail``): a new run must call
    ``reopen()`` before it appends, finishes or fails again."""
