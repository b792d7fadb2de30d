"""The exception tree of the agents library: one root, named subclasses that carry context.

Every error the library raises on purpose derives from :class:`AgentsError`, so ``except
AgentsError`` catches exactly what the library decided to refuse, never a bug of its own. They all
live here, so the whole tree reads in one place; each is exported from ``agents``.
"""

from __future__ import annotations

__all__ = [
    "AgentsError",
    "FiberAbortedError",
    "FiberConflictError",
    "FiberError",
    "FiberRecoveryExpiredError",
    "InvalidMessageError",
    "McpError",
    "McpProtocolError",
    "McpToolError",
    "NotInFiberError",
    "QueueError",
    "RetryOptionsError",
    "RpcMethodError",
    "ScheduleError",
    "SqlQueryError",
    "StateValidationError",
]


class AgentsError(Exception):
    """Root of every error the agents library raises deliberately."""


class SqlQueryError(AgentsError):
    """``self.sql(...)`` failed; the message names the query and SQLite's reason."""

    def __init__(self, query: str, cause: BaseException) -> None:
        super().__init__(f"SQL query failed: {cause}\n  query: {query.strip()}")
        self.query = query
        self.cause = cause


class StateValidationError(AgentsError):
    """``validate_state_change`` refused a new state; nothing was persisted or broadcast."""


class RpcMethodError(AgentsError):
    """A WebSocket RPC frame named a method that is missing or not ``@callable``."""


class ScheduleError(AgentsError):
    """A schedule was created or used wrongly (bad ``when``, unknown callback, bad cron)."""


class QueueError(AgentsError):
    """``queue()`` was used wrongly (unknown callback, payload not JSON, bad retry options)."""


class RetryOptionsError(AgentsError, ValueError):
    """Retry options that cannot work (unknown key, fewer than one attempt, base > max)."""


class InvalidMessageError(AgentsError, ValueError):
    """A chat message (from a client, or read back from storage) is not a UI message.

    ``field`` names what is wrong — ``"message"`` (not an object), ``"id"``, ``"role"`` or
    ``"parts"`` — and ``value`` is the offending value.
    """

    def __init__(self, message: str, *, field: str, value: object = None) -> None:
        super().__init__(message)
        self.field = field
        self.value = value


class FiberError(AgentsError):
    """A durable fiber was used wrongly."""


class NotInFiberError(FiberError):
    """``self.stash()`` was called outside a ``run_fiber`` callback."""


class FiberAbortedError(FiberError):
    """Raised by ``FiberSignal.throw_if_aborted`` once ``cancel_fiber`` was called."""


class FiberConflictError(FiberError):
    """``start_fiber`` got a blank id/key, or an id and a key naming two different fibers."""


class FiberRecoveryExpiredError(FiberError):
    """A recovery hook kept failing until ``fiber_recovery_max_age_ms``; the row was dropped.

    Reported through ``on_error``; ``__cause__`` is the hook's last exception.
    """


class McpError(AgentsError):
    """An MCP server could not be reached or used; the message names the server and why."""


class McpProtocolError(McpError):
    """An MCP server answered a request with a JSON-RPC error (``code``, ``message``)."""

    def __init__(self, message: str, *, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class McpToolError(McpError):
    """An MCP tool answered ``isError: true``; the message is the tool's own text."""
