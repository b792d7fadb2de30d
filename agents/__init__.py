"""agents: durable, long-running AI agents on Cloudflare's Python Workers surface.

A pure user of ``workers``/``js`` (never of doemu internals), so agents run on doemu locally and
on Cloudflare unchanged.
"""

from __future__ import annotations

from .agent import Agent as Agent
from .errors import AgentsError as AgentsError
from .errors import FiberError as FiberError
from .errors import NotInFiberError as NotInFiberError
from .errors import RpcMethodError as RpcMethodError
from .errors import ScheduleError as ScheduleError
from .errors import SqlQueryError as SqlQueryError
from .errors import StateValidationError as StateValidationError
from .keepalive import KeepAlive as KeepAlive
from .options import AgentOptions as AgentOptions
from .options import RetryOptions as RetryOptions

__all__ = [
    "Agent",
    "AgentOptions",
    "AgentsError",
    "FiberError",
    "KeepAlive",
    "NotInFiberError",
    "RetryOptions",
    "RpcMethodError",
    "ScheduleError",
    "SqlQueryError",
    "StateValidationError",
]
