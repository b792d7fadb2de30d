"""One MCP server as the agent sees it: connect, discover, call tools, and its state.

States are the SDK's ``MCPConnectionState`` values: ``connecting`` → ``discovering`` → ``ready``,
or ``failed`` with the reason in ``error``, or ``authenticating`` (with ``auth_url``) when the
server answered ``401`` and the connection has an OAuth client (:mod:`agents.mcp.oauth`): the
stored token is refreshed once first, and only then does the browser flow begin.

A tool call whose session the server has forgotten (HTTP 404: the server restarted, or the
session idled out) initializes again and retries once, as a fresh client would.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..errors import McpError, McpToolError
from .oauth import McpOAuth
from .transport import PROTOCOL_VERSION, McpSessionExpired, McpUnauthorized, StreamableHttp

__all__ = ["CLIENT_INFO", "McpConnection", "tool_output"]

_log = logging.getLogger("agents.mcp")

#: How this client introduces itself in ``initialize``.
CLIENT_INFO = {"name": "agents-python", "version": "0.1.0"}
#: Pages of ``tools/list`` followed at most (a server that loops its cursor must not hang us).
_MAX_PAGES = 50


class McpConnection:
    """The client of one MCP server (see the module docstring)."""

    def __init__(
        self,
        server_id: str,
        name: str,
        url: str,
        headers: Mapping[str, str],
        oauth: McpOAuth | None = None,
    ) -> None:
        self.id = server_id
        self.name = name
        self.url = url
        self.transport = StreamableHttp(url, headers)
        self.oauth = oauth
        if oauth is not None:
            self.transport.authorization = oauth.authorization
        self.state = "connecting"
        self.error: str | None = None
        self.auth_url: str | None = None
        self.instructions: str | None = None
        self.capabilities: dict[str, Any] | None = None
        self.server_info: dict[str, Any] | None = None
        self.tools: list[dict[str, Any]] = []

    async def connect(self) -> None:
        """Initialize the session and list the tools; ``failed`` (never raising) otherwise."""
        self.state, self.error, self.auth_url = "connecting", None, None
        try:
            try:
                await self._initialize()
            except McpUnauthorized as exc:
                if self.oauth is None:
                    raise
                if not (self.oauth.can_refresh() and await self.oauth.refresh()):
                    await self._authenticate(exc.www_authenticate)
                    return
                await self._initialize()
            self.state = "discovering"
            await self.discover()
            self.state = "ready"
        except Exception as exc:
            self.state, self.error = "failed", str(exc)
            _log.warning("MCP server %s (%s): %s", self.name, self.url, exc)

    async def _authenticate(self, challenge: str | None) -> None:
        """``authenticating``: the pending authorization URL, or a new one."""
        assert self.oauth is not None
        self.auth_url = self.oauth.pending_auth_url() or await self.oauth.begin(challenge)
        self.state = "authenticating"

    async def _initialize(self) -> None:
        transport = self.transport
        transport.session_id = transport.protocol_version = None
        result = await transport.request(
            "initialize",
            {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO},
        )
        if not isinstance(result, dict):
            raise McpError(f"MCP server {self.url}: initialize answered {result!r}")
        version = result.get("protocolVersion")
        transport.protocol_version = version if isinstance(version, str) else PROTOCOL_VERSION
        capabilities = result.get("capabilities")
        self.capabilities = capabilities if isinstance(capabilities, dict) else {}
        instructions = result.get("instructions")
        self.instructions = instructions if isinstance(instructions, str) else None
        info = result.get("serverInfo")
        self.server_info = info if isinstance(info, dict) else None
        await transport.notify("notifications/initialized")

    async def discover(self) -> None:
        """List the server's tools (every page)."""
        tools: list[dict[str, Any]] = []
        if self.capabilities is not None and "tools" in self.capabilities:
            cursor: str | None = None
            for _ in range(_MAX_PAGES):
                params = {"cursor": cursor} if cursor else None
                page = await self.transport.request("tools/list", params)
                tools += [t for t in (page or {}).get("tools") or [] if isinstance(t, dict)]
                cursor = (page or {}).get("nextCursor")
                if not cursor:
                    break
        self.tools = tools

    async def call_tool(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """``tools/call``: the server's result (``content``, ``structuredContent``, ``isError``)."""
        params = {"name": name, "arguments": dict(arguments)}
        try:
            result = await self.transport.request("tools/call", params)
        except McpSessionExpired:
            await self._initialize()
            result = await self.transport.request("tools/call", params)
        except McpUnauthorized:  # the access token expired mid-session: refresh once
            if self.oauth is None or not await self.oauth.refresh():
                raise
            result = await self.transport.request("tools/call", params)
        return result if isinstance(result, dict) else {"content": []}

    async def close(self) -> None:
        await self.transport.close()

    def describe(self) -> dict[str, Any]:
        """This server in the ``cf_agent_mcp_servers`` frame's ``servers`` map (the SDK's keys)."""
        return {
            "name": self.name,
            "server_url": self.url,
            "auth_url": self.auth_url,
            "state": self.state,
            "error": self.error,
            "instructions": self.instructions,
            "capabilities": self.capabilities,
        }


def tool_output(result: Mapping[str, Any]) -> Any:
    """What a model reads of a ``tools/call`` result: the structured content when there is
    some, else the text parts joined; an ``isError`` result raises :class:`McpToolError`."""
    texts = [
        str(part.get("text", ""))
        for part in result.get("content") or []
        if isinstance(part, dict) and part.get("type") == "text"
    ]
    if result.get("isError"):
        raise McpToolError("\n".join(texts) or "the MCP tool failed")
    structured = result.get("structuredContent")
    if structured is not None:
        return structured
    if texts and len(texts) == len(result.get("content") or []):
        return "\n".join(texts)
    return list(result.get("content") or [])
