"""The Agents SDK's WebSocket wire protocol: message types, frame builders and parsers.

Every frame here is exactly what the TypeScript SDK (``agents`` on npm) puts on the wire, field for
field, so Cloudflare's own clients (``AgentClient`` from ``agents/client``, ``useAgent``) work
against a Python agent unchanged. The SDK's sources for each frame:

* ``cf_agent_identity`` ``{type, name, agent[, stateFollows: true]}`` — sent first on connect;
  ``stateFollows`` tells the client that a ``cf_agent_state`` frame comes next, so its ``ready``
  promise settles only once the state has landed (``websockets/websockets.ts``,
  ``sendConnectFrames``).
* ``cf_agent_state`` ``{type, state}`` — both directions: the server pushes the state on connect
  and on every change; a client sends it to propose a new state (``client.ts``, ``setState``).
* ``cf_agent_state_error`` ``{type, error}`` — a refused client update: ``"Connection is
  readonly"`` or the generic ``"State update rejected"`` (details are logged server-side only).
* ``cf_agent_mcp_servers`` ``{type, mcp: {prompts, resources, servers, tools}}`` — sent after the
  state on connect; a Python agent has no MCP servers, so the lists are empty.
* ``rpc`` — requests ``{type, id, method, args}``; answers ``{type, id, success: true, result,
  done}`` (``done: false`` for intermediate chunks of a streaming method) or ``{type, id,
  success: false, error}``.

JSON is written compactly, like ``JSON.stringify``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

__all__ = [
    "CF_AGENT_IDENTITY",
    "CF_AGENT_MCP_SERVERS",
    "CF_AGENT_STATE",
    "CF_AGENT_STATE_ERROR",
    "RPC",
    "STATE_READONLY_ERROR",
    "STATE_REJECTED_ERROR",
    "camel_case_to_kebab_case",
    "dumps",
    "identity_frame",
    "is_rpc_request",
    "is_state_frame",
    "mcp_servers_frame",
    "parse_frame",
    "rpc_chunk_frame",
    "rpc_error_frame",
    "rpc_result_frame",
    "state_error_frame",
    "state_frame",
]

CF_AGENT_IDENTITY: Final = "cf_agent_identity"
CF_AGENT_STATE: Final = "cf_agent_state"
CF_AGENT_STATE_ERROR: Final = "cf_agent_state_error"
CF_AGENT_MCP_SERVERS: Final = "cf_agent_mcp_servers"
RPC: Final = "rpc"

#: The SDK's texts for refused client state updates (``websockets/websockets.ts``).
STATE_READONLY_ERROR: Final = "Connection is readonly"
STATE_REJECTED_ERROR: Final = "State update rejected"

_MISSING: Any = object()


def dumps(value: Any) -> str:
    """Compact JSON, as ``JSON.stringify`` writes it (non-ASCII kept as is)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def identity_frame(name: str, agent: str, *, state_follows: bool = False) -> dict[str, Any]:
    frame: dict[str, Any] = {"type": CF_AGENT_IDENTITY, "name": name, "agent": agent}
    if state_follows:
        frame["stateFollows"] = True
    return frame


def state_frame(state: Any) -> dict[str, Any]:
    return {"type": CF_AGENT_STATE, "state": state}


def state_error_frame(error: str) -> dict[str, Any]:
    return {"type": CF_AGENT_STATE_ERROR, "error": error}


def mcp_servers_frame(mcp: dict[str, Any] | None = None) -> dict[str, Any]:
    """The MCP-servers frame (``mcp``: the SDK's ``MCPServersState``; none: no servers)."""
    return {
        "mcp": mcp if mcp is not None else {"prompts": [], "resources": [], "servers": {},
                                            "tools": []},
        "type": CF_AGENT_MCP_SERVERS,
    }  # fmt: skip


def rpc_result_frame(rpc_id: str, result: Any = _MISSING, *, done: bool = True) -> dict[str, Any]:
    """A successful answer; without ``result`` the key is absent (JS ``undefined``)."""
    frame: dict[str, Any] = {"done": done, "id": rpc_id}
    if result is not _MISSING:
        frame["result"] = result
    frame["success"] = True
    frame["type"] = RPC
    return frame


def rpc_chunk_frame(rpc_id: str, chunk: Any) -> dict[str, Any]:
    """An intermediate chunk of a streaming method (``done: false``)."""
    return rpc_result_frame(rpc_id, chunk, done=False)


def rpc_error_frame(rpc_id: Any, error: str) -> dict[str, Any]:
    return {"error": error, "id": rpc_id, "success": False, "type": RPC}


def parse_frame(message: Any) -> Any:
    """The JSON value of a text frame, or ``None`` for binary frames and non-JSON text."""
    if not isinstance(message, str):
        return None
    try:
        return json.loads(message)
    except ValueError:
        return None


def is_state_frame(frame: Any) -> bool:
    """``{"type": "cf_agent_state", "state": ...}`` (the ``state`` key must be present)."""
    return isinstance(frame, dict) and frame.get("type") == CF_AGENT_STATE and "state" in frame


def is_rpc_request(frame: Any) -> bool:
    """The SDK's ``isRPCRequest``: string ``id`` and ``method``, list ``args``."""
    return (
        isinstance(frame, dict)
        and frame.get("type") == RPC
        and isinstance(frame.get("id"), str)
        and isinstance(frame.get("method"), str)
        and isinstance(frame.get("args"), list)
    )


_UPPER = re.compile(r"[A-Z]")


def camel_case_to_kebab_case(text: str) -> str:
    """The SDK's ``camelCaseToKebabCase`` (``utils.ts``), which routing and clients share.

    ``MyAgent`` → ``my-agent``; an all-uppercase name is lowercased with ``_`` → ``-``
    (``MY_AGENT`` → ``my-agent``); remaining underscores become hyphens, a trailing one is dropped.
    """
    if text == text.upper() and text != text.lower():
        return text.lower().replace("_", "-")
    kebab = _UPPER.sub(lambda m: "-" + m.group(0).lower(), text)
    if kebab.startswith("-"):
        kebab = kebab[1:]
    kebab = kebab.replace("_", "-")
    return kebab[:-1] if kebab.endswith("-") else kebab
