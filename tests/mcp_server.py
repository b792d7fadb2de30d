"""A real MCP server for the MCP client's tests, built with the official ``mcp`` SDK.

``McpTestServer()`` serves an ``MCPServer`` over streamable HTTP (the SDK's own Starlette app,
under uvicorn on a free loopback port, in a thread) so the agents' client meets the reference
implementation's wire behaviour: session ids, SSE answers, its errors. Its tools:

* ``add(a, b)`` — a structured result;
* ``greet(name)`` — text;
* ``tick()`` — counts its calls on the server (what the tests count from outside);
* ``explode()`` — a tool that fails (``isError``).

``token="…"`` requires ``Authorization: Bearer …`` on every request (401 otherwise);
``oauth=True`` makes it an OAuth-protected MCP server the SDK's way (``auth=AuthSettings(…)``
with :class:`tests.mcp_oauth_provider.AutoConsentProvider` as its authorization server, on the
same origin: RFC 9728 resource metadata, RFC 8414 metadata, registration, ``/authorize``,
``/token``; ``self.oauth`` counts what clients did); ``restart()`` serves again on the same
port with every session forgotten (tokens and registrations are kept).
"""

from __future__ import annotations

import socket
import threading
from typing import Any

import httpx
import uvicorn
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from .mcp_oauth_provider import AutoConsentProvider
from .polling import eventually_sync

__all__ = ["McpTestServer", "consent"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _RequireToken:
    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != f"Bearer {self.token}".encode():
                await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class McpTestServer:
    """See the module docstring; a context manager."""

    def __init__(
        self, *, token: str | None = None, oauth: bool = False, name: str = "test-tools"
    ) -> None:
        self.token = token
        self.oauth = AutoConsentProvider() if oauth else None
        self.name = name
        self.port = _free_port()
        self.ticks = 0
        self.calls: list[str] = []
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def _app(self) -> ASGIApp:
        origin = f"http://127.0.0.1:{self.port}"
        auth = AuthSettings(
            issuer_url=origin,  # type: ignore[arg-type]  # pydantic validates the string
            resource_server_url=self.url,  # type: ignore[arg-type]
            client_registration_options=ClientRegistrationOptions(enabled=True),
            validate_token_resource=True,
        )
        mcp = MCPServer(
            self.name,
            instructions="Arithmetic and greetings, for tests.",
            auth_server_provider=self.oauth,
            auth=auth if self.oauth is not None else None,
        )

        @mcp.tool(description="Add two integers.")
        def add(a: int, b: int) -> dict[str, int]:
            self.calls.append("add")
            return {"sum": a + b}

        @mcp.tool(description="Greet someone by name.", structured_output=False)
        def greet(name: str) -> str:
            self.calls.append("greet")
            return f"Hello, {name}!"

        @mcp.tool(
            description="Count a side effect on the server; answers the count so far.",
            structured_output=False,
        )
        def tick() -> str:
            self.calls.append("tick")
            self.ticks += 1
            return f"tick {self.ticks}"

        @mcp.tool(description="Always fails.", structured_output=False)
        def explode() -> str:
            raise ToolError("the tool exploded")

        app: ASGIApp = mcp.streamable_http_app()
        return _RequireToken(app, self.token) if self.token else app

    def start(self) -> McpTestServer:
        config = uvicorn.Config(
            self._app(), host="127.0.0.1", port=self.port, log_level="warning", lifespan="on"
        )
        server = self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=server.run, daemon=True)
        self._thread.start()
        eventually_sync(lambda: server.started, within=15, what="the MCP server to start")
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def restart(self) -> None:
        """Serve again on the same port: every session is forgotten (a server restart)."""
        self.stop()
        self.start()

    def __enter__(self) -> McpTestServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def consent(auth_url: str) -> str:
    """The browser at the authorization server: where it is sent back (the callback URL)."""
    answer = httpx.get(auth_url, timeout=10)
    assert answer.status_code == 302, answer.text
    return str(answer.headers["location"])
