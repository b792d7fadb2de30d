"""The exception tree of the agents library: one root, named subclasses that carry context."""

from __future__ import annotations

__all__ = [
    "AgentsError",
    "FiberError",
    "NotInFiberError",
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


class ScheduleError(AgentsError):
    """A schedule was created or used wrongly (bad ``when``, unknown callback, bad cron)."""


class FiberError(AgentsError):
    """A durable fiber was used wrongly."""


class NotInFiberError(FiberError):
    """``self.stash()`` was called outside a ``run_fiber`` callback."""


class RpcMethodError(AgentsError):
    """A WebSocket RPC frame named a method that is missing or not ``@callable``."""
