"""agents.server: one Durable Object per session, running an agent loop, streamed to clients.

:func:`create_agent_server` builds the session class from an :class:`AgentRegistry` of
:func:`define_agent` definitions and an LLM adapter factory; each object hosts one session whose
runs are driven by :func:`agents.providers.model_reply`, streamed through its
:class:`SessionStream` (SSE and hibernatable WebSockets, gap-free sequences), checkpointed per
step, and recovered after a crash. Sub-agents (:func:`sub_agent_tool`) run in sibling objects;
usage rolls up across them. The errors the package raises on purpose derive from
:class:`AgentServerError`.
"""

from __future__ import annotations

from .definition import AgentDefinition as AgentDefinition
from .definition import SubAgentTool as SubAgentTool
from .definition import define_agent as define_agent
from .definition import sub_agent_tool as sub_agent_tool
from .errors import AgentNotFoundError as AgentNotFoundError
from .errors import AgentServerError as AgentServerError
from .errors import RequestError as RequestError
from .errors import StreamClosedError as StreamClosedError
from .errors import StreamPayloadError as StreamPayloadError
from .errors import StreamRangeError as StreamRangeError
from .factory import create_agent_server as create_agent_server
from .hooks import AbortResult as AbortResult
from .hooks import EndpointContext as EndpointContext
from .hooks import ExecutionState as ExecutionState
from .hooks import LLMAdapterContext as LLMAdapterContext
from .hooks import ServerHooks as ServerHooks
from .registry import AgentFactoryContext as AgentFactoryContext
from .registry import AgentRegistry as AgentRegistry
from .server import AgentServer as AgentServer
from .streams import SessionStream as SessionStream
from .subagents import session_object_name as session_object_name

__all__ = [
    "AbortResult",
    "AgentDefinition",
    "AgentFactoryContext",
    "AgentNotFoundError",
    "AgentRegistry",
    "AgentServer",
    "AgentServerError",
    "EndpointContext",
    "ExecutionState",
    "LLMAdapterContext",
    "RequestError",
    "ServerHooks",
    "SessionStream",
    "StreamClosedError",
    "StreamPayloadError",
    "StreamRangeError",
    "SubAgentTool",
    "create_agent_server",
    "define_agent",
    "session_object_name",
    "sub_agent_tool",
]
