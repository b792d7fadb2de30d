"""The MCP *server* side: :class:`McpAgent`, one durable agent per MCP session.

Layers, top to bottom: ``agent`` (the object: sessions, state, the server's methods) →
``routing`` (the entry Worker: checks, session ids, forwarding). The protocol itself —
JSON-RPC and the registry of tools, resources and prompts — is :mod:`agents.mcp.server`, below
the ``Agent``; this package sits above it because ``McpAgent`` *is* an ``Agent``.
Import it from ``agents`` (``from agents import McpAgent``) or from here.
"""

from __future__ import annotations

from .agent import McpAgent as McpAgent
from .routing import McpHandler as McpHandler
from .routing import route_mcp_request as route_mcp_request

__all__ = ["McpAgent", "McpHandler", "route_mcp_request"]
