"""agents.server: one Durable Object per session, running an agent loop, streamed to clients.

:func:`create_agent_server` builds the session class from an :class:`AgentRegistry` of
:func:`define_agent` definitions and an LLM adapter factory; each object hosts one session whose
runs are driven by :func:`agents.providers.model_reply`, streamed through its
:class:`SessionStream` (SSE and hibernatable WebSockets, gap-free sequences), checkpointed per
step, and recovered after a crash. Sub-agents (:func:`sub_agent_tool`, and the companion tools
of agents with persistent children) run in sibling objects; usage and custom metrics roll up
across them. Hooks, endpoints and tools get typed contexts (:class:`BeforeStartContext`,
:class:`ServerToolContext` …); the v7 chat routes speak the AI SDK's UI-message stream
(:func:`handle_chat_stream`). The errors the package raises on purpose derive from
:class:`AgentServerError`.
"""

from __future__ import annotations

from .chat_routes import ChatHandler as ChatHandler
from .chat_routes import session_chat_handler as session_chat_handler
from .chat_ui import handle_chat_stream as handle_chat_stream
from .contexts import AfterResumeContext as AfterResumeContext
from .contexts import AfterRetryContext as AfterRetryContext
from .contexts import AfterStartContext as AfterStartContext
from .contexts import BeforeResumeContext as BeforeResumeContext
from .contexts import BeforeRetryContext as BeforeRetryContext
from .contexts import BeforeStartContext as BeforeStartContext
from .contexts import ChatContext as ChatContext
from .contexts import CompleteContext as CompleteContext
from .contexts import EndpointContext as EndpointContext
from .contexts import Logger as Logger
from .contexts import ServerToolContext as ServerToolContext
from .contexts import TransformResponseContext as TransformResponseContext
from .definition import AgentDefinition as AgentDefinition
from .definition import ApprovalTool as ApprovalTool
from .definition import SubAgentTool as SubAgentTool
from .definition import define_agent as define_agent
from .definition import needs_approval as needs_approval
from .definition import sub_agent_tool as sub_agent_tool
from .errors import AgentNotFoundError as AgentNotFoundError
from .errors import AgentServerError as AgentServerError
from .errors import RequestError as RequestError
from .errors import StreamClosedError as StreamClosedError
from .errors import StreamPayloadError as StreamPayloadError
from .errors import StreamRangeError as StreamRangeError
from .factory import create_agent_server as create_agent_server
from .hooks import AbortResult as AbortResult
from .hooks import ExecutionState as ExecutionState
from .hooks import LLMAdapterContext as LLMAdapterContext
from .hooks import ServerHooks as ServerHooks
from .metrics import MetricError as MetricError
from .registry import AgentFactoryContext as AgentFactoryContext
from .registry import AgentRegistry as AgentRegistry
from .rollup import DOUsageStore as DOUsageStore
from .rollup import UsageStore as UsageStore
from .rollup import UsageStoreContext as UsageStoreContext
from .server import AgentServer as AgentServer
from .streams import SessionStream as SessionStream
from .subagents import session_object_name as session_object_name
from .workspace import SessionWorkspaces as SessionWorkspaces
from .workspace import WorkspaceContext as WorkspaceContext
from .workspace import WorkspaceRegistry as WorkspaceRegistry

__all__ = [
    "AbortResult",
    "AfterResumeContext",
    "AfterRetryContext",
    "AfterStartContext",
    "AgentDefinition",
    "AgentFactoryContext",
    "AgentNotFoundError",
    "AgentRegistry",
    "AgentServer",
    "AgentServerError",
    "ApprovalTool",
    "BeforeResumeContext",
    "BeforeRetryContext",
    "BeforeStartContext",
    "ChatContext",
    "ChatHandler",
    "CompleteContext",
    "DOUsageStore",
    "EndpointContext",
    "ExecutionState",
    "LLMAdapterContext",
    "Logger",
    "MetricError",
    "RequestError",
    "ServerHooks",
    "ServerToolContext",
    "SessionStream",
    "SessionWorkspaces",
    "StreamClosedError",
    "StreamPayloadError",
    "StreamRangeError",
    "SubAgentTool",
    "TransformResponseContext",
    "UsageStore",
    "UsageStoreContext",
    "WorkspaceContext",
    "WorkspaceRegistry",
    "create_agent_server",
    "define_agent",
    "handle_chat_stream",
    "needs_approval",
    "session_chat_handler",
    "session_object_name",
    "sub_agent_tool",
]
