"""``Think`` (the SDK's ``@cloudflare/think``): a chat agent defined by ``get_model()``,
``system`` and ``tools``, with a workspace, MCP tools, compaction between turns and sub-agent
``chat()``. Layers, top to bottom: ``agent`` → ``workspace``, ``tools``.
"""

from __future__ import annotations

from .agent import SUMMARY_PROMPT as SUMMARY_PROMPT
from .agent import Think as Think
from .tools import mcp_tools as mcp_tools
from .workspace import Workspace as Workspace
from .workspace import WorkspaceError as WorkspaceError
from .workspace import workspace_tools as workspace_tools

__all__ = ["SUMMARY_PROMPT", "Think", "Workspace", "WorkspaceError", "mcp_tools", "workspace_tools"]
