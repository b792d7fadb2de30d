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

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..providers import Tool, ToolContext
from ..providers.base import post_sse
from ..providers.tools import PENDING
from .definition import SubAgentTool
from .errors import AgentServerError
from .session import ChildRef

__all__ = [
    "ChildOutcome",
    "SubAgentError",
    "call_session",
    "check_input",
    "child_message",
    "follow_child",
    "persistent_child_session",
    "session_object_name",
    "session_stub",
    "settle_child",
    "start_child",
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


def persistent_child_session(server: Any, name: str) -> str:
    """The session of the persistent child ``name`` of this session."""
    return f"{server.session.session_id or server.name}-child-{name}"


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (dict,),
}


def check_input(schema: Mapping[str, Any], args: Mapping[str, Any], what: str) -> None:
    """``args`` against ``schema``'s required properties and their JSON types (the depth a
    model's call needs checking at: nested shapes are the child's to judge)."""
    for key in schema.get("required") or ():
        if key not in args:
            raise SubAgentError(f"{what}: the input needs {key!r}")
    for key, spec in (schema.get("properties") or {}).items():
        kind = spec.get("type") if isinstance(spec, Mapping) else None
        if key not in args or not isinstance(kind, str) or kind not in _JSON_TYPES:
            continue
        value = args[key]
        ok = isinstance(value, _JSON_TYPES[kind]) and not (
            kind in ("number", "integer") and isinstance(value, bool)
        )
        if not ok:
            raise SubAgentError(f"{what}: input.{key} must be a {kind}, got {value!r}")


def child_message(args: Mapping[str, Any]) -> str:
    """What the child is asked: the ``message`` when that is the input, else the input as
    JSON."""
    message = args.get("message")
    if isinstance(message, str) and message and set(args) == {"message"}:
        return message
    return json.dumps(dict(args), sort_keys=True)


async def start_child(
    server: Any,
    *,
    child: str,
    agent_type: str,
    message: str,
    key: str,
    call_id: str,
    mode: str,
    name: str | None,
) -> dict[str, Any]:
    """Start (or, for a ``key`` seen before, re-attach to) a run of ``agent_type`` on session
    ``child`` in its own object; its ``/start`` answer. Raises :class:`SubAgentError` when the
    child refuses."""
    record = server.session
    parent = record.session_id or server.name
    server.sessions.add_child(ChildRef(child, agent_type, call_id, mode, name, "active"))
    body = {
        "agentType": agent_type,
        "sessionId": child,
        "parentSessionId": parent,
        "rootSessionId": record.root_session_id or parent,
        "idempotencyKey": key,
        "input": {"message": message},
    }
    status, answer = await call_session(server, child, "/start", body)
    if status >= 400:
        server.sessions.set_child_status(child, "failed")
        raise SubAgentError(f"sub-agent {agent_type!r} refused to start: "
                            f"{answer.get('error', answer)}")  # fmt: skip
    return dict(answer)


@dataclass(frozen=True, slots=True)
class ChildOutcome:
    """How a child's run stood when the parent stopped reading it."""

    status: str  # completed | failed | suspended | timeout
    output: Any = None
    error: str | None = None


async def follow_child(
    server: Any,
    child: str,
    agent_type: str,
    start: int,
    *,
    cursor_key: str | None = None,
    copy: bool = True,
    timeout_ms: int | None = None,
    abort_on_timeout: bool = True,
) -> ChildOutcome:
    """Read the child's stream from ``start`` (or from the ``cursor_key``'s position, kept in
    the parent's KV, after a recovery) to its end or its suspension, copying its chunks into
    this session's stream (``copy``). After ``timeout_ms`` the child is aborted and the outcome
    is a failure saying so — or, without ``abort_on_timeout``, the outcome is ``timeout`` and
    the child runs on."""
    kv = server.ctx.storage.kv
    stored = kv.get(cursor_key) if cursor_key else None
    position = int(stored if stored is not None else start)
    stub = session_stub(server, child)
    events = post_sse(stub.fetch, f"sub-agent {agent_type}",
                      f"http://agent/sse?fromSequence={position}", {}, method="GET")  # fmt: skip
    try:
        async with asyncio.timeout(timeout_ms / 1000 if timeout_ms else None):
            async for event in events:
                data = json.loads(event.data)
                kind = data.get("type")
                if kind == "chunk":
                    if copy:
                        server.stream.append(data["chunk"])
                    if cursor_key:
                        kv.put(cursor_key, int(data["sequence"]) + 1)
                elif kind == "end":
                    return ChildOutcome("completed", data.get("finalOutput"))
                elif kind == "fail":
                    return ChildOutcome("failed", error=str(data.get("error")))
                elif kind == "suspended":
                    return ChildOutcome("suspended")
                elif kind == "interrupted":
                    reason = data.get("reason")
                    return ChildOutcome("failed", error=f"the sub-agent was interrupted: {reason}")
    except TimeoutError:
        if not abort_on_timeout:
            return ChildOutcome("timeout")
        await call_session(server, child, "/abort", {"reason": f"timed out after {timeout_ms} ms"})
        return ChildOutcome("failed", error=f"timed out after {timeout_ms} ms")
    finally:
        await events.aclose()
    return ChildOutcome("failed", error="the sub-agent's stream ended without its outcome")


async def _run_child(
    server: Any, tool: SubAgentTool, args: Mapping[str, Any], ctx: ToolContext
) -> Any:
    check_input(tool.parameters, args, f"sub-agent {tool.agent_type!r}")
    child = _child_session(server, tool, ctx.call_id)
    parent = server.session.session_id or server.name
    cursor_key = f"cf:server:child-cursor:{ctx.idempotency_key}"
    if server.ctx.storage.kv.get(cursor_key) is None:
        server.stream.append({"type": "subagent_start", "subSessionId": child,
                              "agentType": tool.agent_type, "toolCallId": ctx.call_id,
                              "agentId": parent})  # fmt: skip
    answer = await start_child(
        server,
        child=child,
        agent_type=tool.agent_type,
        message=child_message(args),
        key=ctx.idempotency_key,
        call_id=ctx.call_id,
        mode="persistent" if tool.persistent else "ephemeral",
        name=tool.name,
    )
    outcome = await follow_child(server, child, tool.agent_type, int(answer["startSequence"]),
                                 cursor_key=cursor_key, timeout_ms=tool.timeout_ms)  # fmt: skip
    if outcome.status == "suspended":  # waiting for its client: so does the parent
        server.sessions.set_child_status(child, "suspended")
        return PENDING
    server.stream.append({"type": "subagent_end", "subSessionId": child,
                          "agentType": tool.agent_type, "toolCallId": ctx.call_id,
                          "output": outcome.output, "error": outcome.error,
                          "agentId": parent})  # fmt: skip
    settle_child(server, child, tool.agent_type, ctx.call_id, outcome)
    if outcome.error is not None:
        raise SubAgentError(f"sub-agent {tool.agent_type!r} failed: {outcome.error}")
    return outcome.output


def settle_child(
    server: Any, child: str, agent_type: str, call_id: str, outcome: ChildOutcome
) -> None:
    """A child's call ended: its status, and a ``subagent`` usage entry."""
    server.sessions.set_child_status(child, outcome.status)
    server.usage_event({"kind": "subagent", "agentType": agent_type, "childSessionId": child,
                        "toolCallId": call_id, "success": outcome.status == "completed",
                        "at": int(server._core.now())})  # fmt: skip


def sub_agent_as_tool(server: Any, tool: SubAgentTool) -> Tool:
    """The model-loop tool that runs ``tool``'s agent in a sibling object."""

    async def execute(args: dict[str, Any], ctx: ToolContext) -> Any:
        return await _run_child(server, tool, args, ctx)

    description = tool.description or f"Delegate to the {tool.agent_type} agent."
    return Tool(tool.name, description, tool.parameters, execute=execute, idempotent=True)
