"""agents: durable, long-running AI agents on Cloudflare's Python Workers surface.

A pure user of ``workers``/``js`` (never of doemu internals), so agents run on doemu locally and
on Cloudflare unchanged. Start with :class:`Agent`; the documentation's "Durable agents" page
(docs/agents.md) maps the TypeScript SDK's names to these.

The tree is the table of contents, layers top to bottom (a module imports only from below):

* ``agent``, ``routing`` — the :class:`Agent` façade; ``route_agent_request`` for the Worker.
* ``mcp_agent`` — :class:`McpAgent`, an MCP server with one agent per session.
* ``fibers/``, ``schedules/``, ``queue``, ``rpc``, ``ops`` (the operation ledger of costly
  calls), ``usage`` (tokens and cost) — features the Agent owns, one object each, its public
  methods delegating to them.
* ``keepalive``, ``retry`` — what those features build on (the heartbeat, back-off).
* ``core/`` — the façade/feature contract (``host``), SQL and schema, the wire protocol,
  connections and WebSocket events, state, named callbacks.
* ``options``, ``errors`` — plain values and the exception tree.
"""

from __future__ import annotations

# First, before any module of the package: OpenAI's `openai-agents` is also imported as
# `agents`, and pip merges the two into one folder; importing this raises ImportError saying so.
from . import _installation as _installation  # isort: skip
from .agent import Agent as Agent
from .core.connections import Connection as Connection
from .core.connections import ConnectionContext as ConnectionContext
from .core.portable import from_js as from_js
from .core.portable import js_array as js_array
from .core.portable import js_object as js_object
from .core.portable import wait_until as wait_until
from .current import AgentContext as AgentContext
from .current import get_current_agent as get_current_agent
from .errors import AgentsError as AgentsError
from .errors import FiberAbortedError as FiberAbortedError
from .errors import FiberConflictError as FiberConflictError
from .errors import FiberError as FiberError
from .errors import FiberRecoveryExpiredError as FiberRecoveryExpiredError
from .errors import InvalidMessageError as InvalidMessageError
from .errors import NotInFiberError as NotInFiberError
from .errors import QueueError as QueueError
from .errors import RetryOptionsError as RetryOptionsError
from .errors import RpcMethodError as RpcMethodError
from .errors import ScheduleError as ScheduleError
from .errors import SqlQueryError as SqlQueryError
from .errors import StateValidationError as StateValidationError
from .fibers.ledger import FiberRecord as FiberRecord
from .fibers.types import FiberContext as FiberContext
from .fibers.types import FiberRecoveryContext as FiberRecoveryContext
from .fibers.types import FiberResolution as FiberResolution
from .fibers.types import FiberSignal as FiberSignal
from .fibers.types import FiberStatus as FiberStatus
from .keepalive import KeepAlive as KeepAlive
from .mcp.server import McpServer as McpServer
from .mcp_agent import McpAgent as McpAgent
from .mcp_agent import route_mcp_request as route_mcp_request
from .ops import Operation as Operation
from .ops import OperationDataError as OperationDataError
from .ops import OperationError as OperationError
from .ops import OperationInFlightError as OperationInFlightError
from .ops import OperationOutcome as OperationOutcome
from .ops import OperationRecord as OperationRecord
from .ops import operation_id as operation_id
from .options import AgentOptions as AgentOptions
from .options import RetryOptions as RetryOptions
from .queue import QueueItem as QueueItem
from .routing import AgentRoute as AgentRoute
from .routing import get_agent_by_name as get_agent_by_name
from .routing import route_agent_request as route_agent_request
from .rpc import StreamingResponse as StreamingResponse
from .rpc import callable as callable
from .schedules.types import Schedule as Schedule
from .usage import UsageEntry as UsageEntry
from .usage import UsageError as UsageError
from .usage import UsageTotals as UsageTotals

__all__ = [
    "Agent",
    "AgentContext",
    "AgentOptions",
    "AgentRoute",
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
    "InvalidMessageError",
    "KeepAlive",
    "McpAgent",
    "McpServer",
    "NotInFiberError",
    "Operation",
    "OperationDataError",
    "OperationError",
    "OperationInFlightError",
    "OperationOutcome",
    "OperationRecord",
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
    "UsageEntry",
    "UsageError",
    "UsageTotals",
    "callable",
    "from_js",
    "get_agent_by_name",
    "get_current_agent",
    "js_array",
    "js_object",
    "operation_id",
    "route_agent_request",
    "route_mcp_request",
    "wait_until",
]
