"""``get_current_agent()``: the agent, connection and request of the event being handled.

The SDK's ``getCurrentAgent()`` lets a tool (or any helper several calls deep) reach the agent
that runs it without threading it through every signature. Here it reads three context
variables the :class:`~agents.agent.Agent` sets when it handles an event:

* ``fetch`` — the agent and the request (a WebSocket upgrade also has its new connection);
* a WebSocket message or close — the agent and the connection;
* the alarm, ``on_start`` — the agent alone.

asyncio copies the context into every task created while an event is handled, so work started
there — a chat turn, a fiber, a queue item, a tool the model calls — sees the same values. A
direct RPC call from another object's stub (``await stub.method()``) is not an event the agent
can wrap: there ``agent`` is ``None``, as it is outside any agent.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any, NamedTuple

from .core.connections import Connection, current_connection

__all__ = ["AgentContext", "agent_context", "get_current_agent"]

_agent: contextvars.ContextVar[Any] = contextvars.ContextVar("agents_current_agent", default=None)
_request: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "agents_current_request", default=None
)


class AgentContext(NamedTuple):
    """What :func:`get_current_agent` answers; unpacks as ``agent, connection, request``."""

    agent: Any
    connection: Connection | None
    request: Any


def get_current_agent() -> AgentContext:
    """The agent handling the current event, its connection and its request (each may be
    ``None``: an alarm has no request, an HTTP request no connection)."""
    return AgentContext(_agent.get(), current_connection.get(), _request.get())


@contextlib.contextmanager
def agent_context(agent: Any, request: Any = None) -> Iterator[None]:
    """Make ``agent`` (and ``request``, when given) current for the block (the framework's)."""
    agent_token = _agent.set(agent)
    request_token = _request.set(request) if request is not None else None
    try:
        yield
    finally:
        if request_token is not None:
            _request.reset(request_token)
        _agent.reset(agent_token)
