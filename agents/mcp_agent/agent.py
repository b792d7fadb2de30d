"""``McpAgent``: an MCP server whose every session is one durable agent.

Cloudflare's ``McpAgent`` in Python. The entry Worker (:mod:`agents.mcp_agent.routing`) gives
each MCP session its own object, named ``streamable-http:<Mcp-Session-Id>``, so everything a
session keeps — the agent's ``state`` (``initial_state``, ``set_state``), its SQL tables, the
``props`` the Worker authenticated it with — is in that object's SQLite and survives eviction,
a SIGKILL and a restart: the same ``Mcp-Session-Id`` carries on.

What the object keeps for the transport is the SDK's: the ``initialize`` request (a session
without one is unknown: ``404``) and the ``props``, in the table ``cf_agents_mcp_session``.
Every activation builds the server again — :meth:`McpAgent.create_server`, then
:meth:`McpAgent.init`, where tools, resources and prompts are registered — before the first
message is answered (``on_start``, lazily with the routing's props, as the SDK's ``onStart``).

Answers are ``application/json`` (the transport allows JSON or SSE for a POST; no tool here
sends progress or server-to-client requests, which are what SSE would carry). ``GET`` (the
server-to-client stream) answers ``405``, which the spec allows; ``DELETE`` ends the session:
it is forgotten at once and the object destroyed from its alarm (the SDK's
``_cf_scheduleDestroy``).
"""

from __future__ import annotations

import inspect
import json
from typing import Any, ClassVar

from workers import Response

from ..agent import Agent
from ..mcp.jsonrpc import (
    INVALID_REQUEST,
    JsonRpcError,
    error_message,
    is_request,
    parse_messages,
)
from ..mcp.server import McpServer, negotiate_version
from .routing import SESSION_HEADER, SESSION_PREFIX, McpHandler, json_response, session_not_found

__all__ = ["McpAgent"]

_SCHEMA = """CREATE TABLE IF NOT EXISTS cf_agents_mcp_session (
  key TEXT PRIMARY KEY NOT NULL,
  value TEXT NOT NULL
)"""


class McpAgent(Agent):
    """Subclass it, set ``server_name`` (and ``server_version``, ``instructions``), register in
    :meth:`init`, serve with :meth:`serve` (see the module docstring and the README)::

        class Counter(McpAgent):
            server_name = "counter"
            initial_state = {"count": 0}

            async def init(self):
                @self.server.tool(description="Add to this session's counter")
                def add(amount: int) -> str:
                    self.set_state({"count": self.state["count"] + amount})
                    return f"count = {self.state['count']}"

    Do not override ``on_start`` (it builds the server); ``init`` is the hook."""

    #: ``serverInfo.name`` (the class name when unset), ``serverInfo.version``, ``instructions``.
    server_name: ClassVar[str | None] = None
    server_version: ClassVar[str] = "0.1.0"
    instructions: ClassVar[str | None] = None

    @classmethod
    def serve(cls, path: str, *, binding: str = "MCP_OBJECT") -> McpHandler:
        """The entry Worker's handler of MCP's streamable HTTP at ``path``, each session an
        instance of the class bound as ``binding`` (Cloudflare's default: ``MCP_OBJECT``)::

            class Default(WorkerEntrypoint):
                async def fetch(self, request):
                    return await Counter.serve("/mcp").fetch(request, self.env, self.ctx)
        """
        return McpHandler(path, binding)

    def __init__(self, ctx: Any, env: Any) -> None:
        self.server: McpServer = self.create_server()
        #: What the Worker routed this session with (``route_mcp_request(..., props=…)``, or
        #: ``ctx.props`` under :meth:`serve`); kept in SQLite, so it outlives an eviction.
        self.props: Any = None
        super().__init__(ctx, env)

    def create_server(self) -> McpServer:
        """A new, empty server (each activation); override to build it differently."""
        return McpServer(
            self.server_name or type(self).__name__,
            self.server_version,
            instructions=self.instructions,
        )

    async def init(self) -> None:
        """Register the tools, resources and prompts on ``self.server`` (each activation)."""

    async def on_start(self, props: Any = None) -> None:
        self.sql(_SCHEMA)
        if props is not None:
            self._put("props", props)
            self.props = props
        else:
            self.props = self._get("props")
        self.server = self.create_server()
        started = self.init()
        if inspect.isawaitable(started):
            await started

    @property
    def session_id(self) -> str:
        """The MCP session this object is (its name without ``streamable-http:``)."""
        return self.name.removeprefix(SESSION_PREFIX)

    @property
    def initialize_request(self) -> dict[str, Any] | None:
        """The session's ``initialize`` request (``None``: the session is unknown or ended)."""
        value = self._get("initialize")
        return value if isinstance(value, dict) else None

    def _get(self, key: str) -> Any:
        rows = self.sql("SELECT value FROM cf_agents_mcp_session WHERE key = ?", key)
        return json.loads(rows[0]["value"]) if rows else None

    def _put(self, key: str, value: Any) -> None:
        self.sql(
            "INSERT OR REPLACE INTO cf_agents_mcp_session (key, value) VALUES (?, ?)",
            key,
            json.dumps(value),
        )

    # -- the transport, object side ---------------------------------------------------------------
    async def on_request(self, request: Any) -> Any:
        method = str(request.method).upper()
        if method == "POST":
            return await self._post(await request.text())
        if method == "DELETE":
            if self.initialize_request is None:
                return session_not_found()
            self.sql("DELETE FROM cf_agents_mcp_session WHERE key = 'initialize'")
            await self.schedule_destroy()
            return Response(None, status=204)
        return json_response(
            error_message(None, -32000, "Method not allowed."), 405, {"allow": "POST, DELETE"}
        )

    async def _post(self, body: str) -> Any:
        try:
            messages, batched = parse_messages(body)
        except JsonRpcError as exc:
            return json_response(exc.to_message(None), 400)
        initialize = [m for m in messages if m.get("method") == "initialize" and is_request(m)]
        headers: dict[str, str] = {}
        if initialize:
            if len(messages) > 1:
                problem = "Invalid Request: Only one initialization request is allowed"
                return json_response(error_message(None, INVALID_REQUEST, problem), 400)
            params = initialize[0].get("params")
            if not isinstance(params, dict):
                params = {}
            self._put(
                "initialize",
                {
                    **initialize[0],
                    "params": params,
                    "negotiated": negotiate_version(params.get("protocolVersion")),
                },
            )
            headers[SESSION_HEADER] = self.session_id
        elif self.initialize_request is None:
            return session_not_found()
        answers = [a for a in [await self.server.handle(m) for m in messages] if a is not None]
        if not answers:  # only notifications or responses
            return Response(None, status=202, headers=list(headers.items()))
        return json_response(answers if batched else answers[0], 200, headers)
