"""agents: durable, long-running AI agents on Cloudflare's Python Workers surface.

A pure user of ``workers``/``js`` (never of doemu internals), so agents run on doemu locally and
on Cloudflare unchanged. Start with :class:`Agent`; the README's "Durable agents" guide maps the
TypeScript SDK's names to these.
"""

from __future__ import annotations

from .agent import Agent as Agent
from .core.connections import Connection as Connection
from .core.connections import ConnectionContext as ConnectionContext
from .errors import AgentsError as AgentsError
from .errors import FiberError as FiberError
from .errors import NotInFiberError as NotInFiberError
from .errors import RpcMethodError as RpcMethodError
from .errors import ScheduleError as ScheduleError
from .errors import SqlQueryError as SqlQueryError
from .errors import StateValidationError as StateValidationError
from .fibers.managed import FiberRecord as FiberRecord
from .fibers.types import FiberAbortedError as FiberAbortedError
from .fibers.types import FiberConflictError as FiberConflictError
from .fibers.types import FiberContext as FiberContext
from .fibers.types import FiberRecoveryContext as FiberRecoveryContext
from .fibers.types import FiberRecoveryExpiredError as FiberRecoveryExpiredError
from .fibers.types import FiberResolution as FiberResolution
from .fibers.types import FiberSignal as FiberSignal
from .fibers.types import FiberStatus as FiberStatus
from .keepalive import KeepAlive as KeepAlive
from .options import AgentOptions as AgentOptions
from .options import RetryOptions as RetryOptions
from .queue import QueueError as QueueError
from .queue import QueueItem as QueueItem
from .retry import RetryOptionsError as RetryOptionsError
from .routing import route_agent_request as route_agent_request
from .rpc import StreamingResponse as StreamingResponse
from .rpc import callable as callable
from .schedules.scheduler import Schedule as Schedule

__all__ = [
    "Agent",
    "AgentOptions",
    "AgentsError",
    "Connection",
    "ConnectionContext",
    "FiberAbortedError",
    "FiberConflictError",
    "FiberContext",
    "FiberError",
    "FiberRecord",
    "FiberRecoveryContext",
    "FiberRecoveryExpiredError",
    "FiberResolution",
    "FiberSignal",
    "FiberStatus",
    "KeepAlive",
    "NotInFiberError",
    "QueueError",
    "QueueItem",
    "RetryOptions",
    "RetryOptionsError",
    "RpcMethodError",
    "Schedule",
    "ScheduleError",
    "SqlQueryError",
    "StateValidationError",
    "StreamingResponse",
    "callable",
    "route_agent_request",
]
