"""Sub-agents in sibling objects: a tool call that runs another agent in its own session.

A sub-agent cannot run inside its parent's object: one object hosts one session, with one
SQLite file. So the call starts the child in a sibling object of the same namespace
(``idFromName("session:<child session>")``), whose session id is derived from the parent's and
the tool call's — or from the tool's name for a *persistent* child, which keeps its session
(and its memory) when consulted again. The child's chunks are copied into the parent's stream
between ``subagent_start`` and ``subagent_end``; its final output is the tool's result.

A child that suspends on its own client tool suspends the parent too
(``suspended_awaiting_children``): the call returns no result, its ledger entry stays open,
and when the child's run ends it tells the parent (``/children/settled``), whose run then
continues and reads the rest of the child's stream.

Recovery: the call runs under the operation ledger as an idempotent tool (its idempotency key
is the child run's key), so a parent recovered after a crash calls again — the child's
``/start`` with that key re-attaches to the run it already started instead of starting another,
and the parent reads on from the last child chunk it copied (a cursor in its KV).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..providers import Tool, ToolContext
from ..providers.base import post_sse
from ..providers.tools import PENDING
from .definition import SubAgentTool
from .errors import AgentServerError
from .session import ChildRef

__all__ = [
    "SubAgentError",
    "call_session",
    "session_object_name",
    "session_stub",
    "sub_agent_as_tool",
]


class SubAgentError(AgentServerError):
    """A sub-agent could not be started or failed; the parent's model reads why."""


def session_object_name(session_id: str) -> str:
    """The object name that hosts session ``session_id`` (``idFromName`` of it)."""
    return f"session:{session_id}"


def session_stub(server: Any, session_id: str) -> Any:
    """The stub of the object hosting ``session_id`` in the server's sub-agent namespace."""
    namespace = server.sub_agent_namespace_of()
    return namespace.get(namespace.idFromName(session_object_name(session_id)))


async def call_session(
    server: Any, session_id: str, path: str, body: Any = None
) -> tuple[int, Any]:
    """``path`` on session ``session_id``'s object (POST with a JSON ``body``, else GET): its
    status and JSON answer (``{}`` when the answer is not JSON)."""
    stub = session_stub(server, session_id)
    if body is None:
        response = await stub.fetch(f"http://agent{path}")
    else:
        response = await stub.fetch(
            f"http://agent{path}",
            method="POST",
            body=json.dumps(body),
            headers={"content-type": "application/json"},
        )
    text = await response.text()
    try:
        answer = json.loads(text)
    except ValueError:
        answer = {}
    return int(response.status), answer


def _child_session(server: Any, tool: SubAgentTool, call_id: str) -> str:
    parent = server.session.session_id or server.name
    return f"{parent}-child-{tool.name}" if tool.persistent else f"{parent}-remote-{call_id}"


async def _run_child(
    server: Any, tool: SubAgentTool, args: Mapping[str, Any], ctx: ToolContext
) -> Any:
    namespace = server.sub_agent_namespace_of()
    child = _child_session(server, tool, ctx.call_id)
    stub = namespace.get(namespace.idFromName(session_object_name(child)))
    record = server.session
    parent = record.session_id or server.name
    server.sessions.add_child(
        ChildRef(
            child,
            tool.agent_type,
            ctx.call_id,
            "persistent" if tool.persistent else "ephemeral",
            tool.name,
            "active",
        )
    )
    kv = server.ctx.storage.kv
    cursor_key = f"cf:server:child-cursor:{ctx.idempotency_key}"
    cursor = kv.get(cursor_key)
    if cursor is None:
        server.stream.append(
            {
                "type": "subagent_start",
                "subSessionId": child,
                "agentType": tool.agent_type,
                "toolCallId": ctx.call_id,
                "agentId": parent,
            }
        )
    message = args.get("message")
    body = {
        "agentType": tool.agent_type,
        "sessionId": child,
        "parentSessionId": parent,
        "rootSessionId": record.root_session_id or parent,
        "idempotencyKey": ctx.idempotency_key,
        "input": {
            "message": message if isinstance(message, str) and message else json.dumps(dict(args))
        },
    }
    started = await stub.fetch(
        "http://agent/start",
        method="POST",
        body=json.dumps(body),
        headers={"content-type": "application/json"},
    )
    answer = await started.json()
    if started.status >= 400:
        server.sessions.set_child_status(child, "failed")
        raise SubAgentError(
            f"sub-agent {tool.agent_type!r} refused to start: {answer.get('error', answer)}"
        )
    position = int(cursor if cursor is not None else answer.get("startSequence", 0))
    output: Any = None
    failed: str | None = None
    events = post_sse(
        stub.fetch,
        f"sub-agent {tool.agent_type}",
        f"http://agent/sse?fromSequence={position}",
        {},
        method="GET",
    )
    try:
        async for event in events:
            data = json.loads(event.data)
            if data.get("type") == "chunk":
                server.stream.append(data["chunk"])
                kv.put(cursor_key, int(data["sequence"]) + 1)
            elif data.get("type") == "end":
                output = data.get("finalOutput")
                break
            elif data.get("type") == "fail":
                failed = str(data.get("error"))
                break
            elif data.get("type") == "suspended":  # waiting for its client: so does the parent
                server.sessions.set_child_status(child, "suspended")
                return PENDING
            elif data.get("type") == "interrupted":
                failed = f"the sub-agent was interrupted: {data.get('reason')}"
                break
    finally:
        await events.aclose()
    server.stream.append(
        {
            "type": "subagent_end",
            "subSessionId": child,
            "agentType": tool.agent_type,
            "toolCallId": ctx.call_id,
            "output": output,
            "error": failed,
            "agentId": parent,
        }
    )
    server.sessions.set_child_status(child, "failed" if failed else "completed")
    server.usage_event({"kind": "subagent", "agentType": tool.agent_type, "childSessionId": child,
                        "toolCallId": ctx.call_id, "success": failed is None,
                        "at": int(server._core.now())})  # fmt: skip
    if failed is not None:
        raise SubAgentError(f"sub-agent {tool.agent_type!r} failed: {failed}")
    return output


def sub_agent_as_tool(server: Any, tool: SubAgentTool) -> Tool:
    """The model-loop tool that runs ``tool``'s agent in a sibling object."""

    async def execute(args: dict[str, Any], ctx: ToolContext) -> Any:
        return await _run_child(server, tool, args, ctx)

    description = tool.description or f"Delegate to the {tool.agent_type} agent."
    return Tool(tool.name, description, tool.parameters, execute=execute, idempotent=True)
