"""Companion tools: the model manages persistent sub-agents itself (the seed's v7 tools).

An agent that may keep persistent children — it has a ``sub_agent_tool(..., persistent=True)``
or names ``persistent_sub_agents`` — gets six tools injected when it is registered:

========================== ===================================================================
``companion__spawnAgent``   start the persistent child ``name`` of ``agentType`` with a message;
                            ``blocking`` (default) waits for its answer, else returns at once.
                            Re-spawning a child that finished continues its preserved session
                            (the critic loop: ask, revise, ask the same critic again).
``companion__sendMessage``  a follow-up message to a child already spawned (blocking or not)
``companion__listChildren`` the persistent children: name, type, session, status
``companion__getChildStatus`` one child's status, read from its object
``companion__waitForResult`` wait until the child's run ends; its output or error
``companion__terminateChild`` abort the child's run (a hard stop)
========================== ===================================================================

Each call is a ledger operation of the model loop, run as an *idempotent* tool: the child's run
is started under the operation's id as its run key, so a parent recovered after a crash that
calls again re-attaches to the run it started (resuming it when it was cut too) instead of
starting another, and reads on from the last chunk it copied. A blocking call whose child waits
for its own client suspends the parent (``suspended_awaiting_children``), as a sub-agent does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..providers import Tool, ToolContext
from ..providers.tools import PENDING
from .subagents import (
    ChildOutcome,
    SubAgentError,
    call_session,
    follow_child,
    persistent_child_session,
    settle_child,
    start_child,
)

if TYPE_CHECKING:
    from .server import AgentServer

__all__ = ["COMPANION_PREFIX", "companion_tools"]

COMPANION_PREFIX = "companion__"
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: KV key (per child session) of the stream sequence its last run started at.
_RUN_START = "cf:server:child-run-start:"


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


_NAME_FIELD = _string("The child's name (1-64 letters, digits, '-' or '_'), unique per parent.")


def _schema(required: Sequence[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required)}


class _Companions:
    """The six tools' bodies over one run of ``server``."""

    def __init__(self, server: AgentServer, types: Sequence[str], timeout_ms: int) -> None:
        self.server = server
        self.types = list(types)
        self.timeout_ms = timeout_ms

    # -- helpers -----------------------------------------------------------------------------
    def _name(self, args: dict[str, Any]) -> str:
        name = args.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise SubAgentError(f"name must be 1-64 letters, digits, '-' or '_', got {name!r}")
        return name

    def _known(self, name: str) -> Any:
        session = persistent_child_session(self.server, name)
        for child in self.server.sessions.children():
            if child.session_id == session and child.mode == "persistent":
                return child
        return None

    async def _run(
        self, name: str, agent_type: str, message: Any, blocking: bool, ctx: ToolContext
    ) -> Any:
        if not isinstance(message, str) or not message.strip():
            raise SubAgentError("message must be a non-empty string")
        server = self.server
        child = persistent_child_session(server, name)
        parent = server.session.session_id or server.name
        kv = server.ctx.storage.kv
        cursor_key = f"cf:server:child-cursor:{ctx.idempotency_key}"
        if blocking and kv.get(cursor_key) is None:
            server.stream.append({"type": "subagent_start", "subSessionId": child,
                                  "agentType": agent_type, "toolCallId": ctx.call_id,
                                  "name": name, "agentId": parent})  # fmt: skip
        answer = await start_child(server, child=child, agent_type=agent_type, message=message,
                                   key=ctx.idempotency_key, call_id=ctx.call_id,
                                   mode="persistent", name=name)  # fmt: skip
        kv.put(_RUN_START + child, int(answer["startSequence"]))
        if not blocking:
            return {"name": name, "childSessionId": child, "agentType": agent_type,
                    "status": "running", "runId": answer.get("streamId")}  # fmt: skip
        outcome = await follow_child(server, child, agent_type, int(answer["startSequence"]),
                                     cursor_key=cursor_key)  # fmt: skip
        if outcome.status == "suspended":
            server.sessions.set_child_status(child, "suspended")
            return PENDING
        server.stream.append({"type": "subagent_end", "subSessionId": child,
                              "agentType": agent_type, "toolCallId": ctx.call_id, "name": name,
                              "output": outcome.output, "error": outcome.error,
                              "agentId": parent})  # fmt: skip
        settle_child(server, child, agent_type, ctx.call_id, outcome)
        return self._result(name, child, agent_type, outcome)

    @staticmethod
    def _result(name: str, child: str, agent_type: str, outcome: ChildOutcome) -> dict[str, Any]:
        result: dict[str, Any] = {"name": name, "childSessionId": child,
                                  "agentType": agent_type, "status": outcome.status}  # fmt: skip
        if outcome.error is not None:
            result["error"] = outcome.error
        else:
            result["output"] = outcome.output
        return result

    async def _busy(self, child: str) -> bool:
        status, body = await call_session(self.server, child, "/status")
        return status == 200 and bool(body.get("isExecuting") or body.get("status") == "active")

    # -- the tools ---------------------------------------------------------------------------
    async def spawn(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        name = self._name(args)
        agent_type = args.get("agentType")
        if agent_type not in self.types:
            raise SubAgentError(f"agentType must be one of {self.types}, got {agent_type!r}")
        known = self._known(name)
        if known is not None and known.agent_type != agent_type:
            raise SubAgentError(f"child {name!r} is a {known.agent_type}, not a {agent_type}")
        if known is not None and known.tool_call_id != ctx.call_id:
            if await self._busy(known.session_id):
                raise SubAgentError(f"child {name!r} is still running: wait for its result "
                                    "(companion__waitForResult) first")  # fmt: skip
        blocking = args.get("blocking", True) is not False
        return await self._run(name, str(agent_type), args.get("message"), blocking, ctx)

    async def send(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        name = self._name(args)
        known = self._known(name)
        if known is None:
            raise SubAgentError(f"no child named {name!r}: spawn it first")
        if known.tool_call_id != ctx.call_id and await self._busy(known.session_id):
            raise SubAgentError(f"child {name!r} is still running: wait for its result first")
        blocking = args.get("blocking", False) is True
        return await self._run(name, known.agent_type, args.get("message"), blocking, ctx)

    async def list_children(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        return {"children": [
            {"name": c.name, "agentType": c.agent_type, "childSessionId": c.session_id,
             "status": c.status}
            for c in self.server.sessions.children() if c.mode == "persistent"
        ]}  # fmt: skip

    async def status(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        name = self._name(args)
        known = self._known(name)
        if known is None:
            raise SubAgentError(f"no child named {name!r}")
        code, body = await call_session(self.server, known.session_id, "/status")
        if code != 200:
            raise SubAgentError(f"child {name!r} did not answer: {body.get('error', code)}")
        return {"name": name, "childSessionId": known.session_id, "agentType": known.agent_type,
                "status": body.get("status"), "isExecuting": body.get("isExecuting"),
                "output": body.get("output"), "error": body.get("error")}  # fmt: skip

    async def wait(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        name = self._name(args)
        known = self._known(name)
        if known is None:
            raise SubAgentError(f"no child named {name!r}")
        server = self.server
        start = server.ctx.storage.kv.get(_RUN_START + known.session_id)
        timeout = args.get("timeoutMs", self.timeout_ms)
        if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1:
            raise SubAgentError(f"timeoutMs must be a whole number ≥ 1, got {timeout!r}")
        outcome = await follow_child(server, known.session_id, known.agent_type,
                                     int(start or 0), copy=False, timeout_ms=timeout,
                                     abort_on_timeout=False)  # fmt: skip
        if outcome.status == "suspended":
            server.sessions.set_child_status(known.session_id, "suspended")
            return PENDING
        if outcome.status == "timeout":
            return {"name": name, "childSessionId": known.session_id, "status": "running",
                    "timedOut": True}  # fmt: skip
        if known.status not in ("completed", "failed"):
            settle_child(server, known.session_id, known.agent_type, known.tool_call_id, outcome)
        return self._result(name, known.session_id, known.agent_type, outcome)

    async def terminate(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        name = self._name(args)
        known = self._known(name)
        if known is None:
            raise SubAgentError(f"no child named {name!r}")
        reason = str(args.get("reason") or "terminated by its parent")
        path = f"/chat/{known.session_id}/abort"
        code, body = await call_session(self.server, known.session_id, path, {"reason": reason})
        terminated = code == 200
        if terminated:
            outcome = ChildOutcome("failed", error=f"aborted: {reason}")
            settle_child(self.server, known.session_id, known.agent_type, known.tool_call_id,
                         outcome)  # fmt: skip
        status = "failed" if terminated else body.get("code", "NOT_EXECUTING")
        return {"name": name, "childSessionId": known.session_id, "terminated": terminated,
                "status": status}  # fmt: skip


def companion_tools(server: AgentServer, types: Sequence[str], timeout_ms: int) -> list[Tool]:
    """The six companion tools for a run of ``server`` whose agent may spawn ``types``."""
    c = _Companions(server, types, timeout_ms)
    kind = {"type": "string", "enum": list(types), "description": "The agent type to spawn."}
    message = _string("What to ask the child.")
    return [
        Tool(f"{COMPANION_PREFIX}spawnAgent",
             "Spawn (or re-consult) a persistent child agent by name. blocking (default true) "
             "waits for its answer; a child that finished keeps its memory when spawned again.",
             _schema(["agentType", "name", "message"], agentType=kind, name=_NAME_FIELD,
                     message=message, blocking={"type": "boolean"}),
             execute=c.spawn, idempotent=True),
        Tool(f"{COMPANION_PREFIX}sendMessage",
             "Send a follow-up message to a child already spawned (blocking: wait for it).",
             _schema(["name", "message"], name=_NAME_FIELD, message=message,
                     blocking={"type": "boolean"}),
             execute=c.send, idempotent=True),
        Tool(f"{COMPANION_PREFIX}listChildren", "List this agent's persistent children.",
             _schema([]), execute=c.list_children, idempotent=True),
        Tool(f"{COMPANION_PREFIX}getChildStatus", "A child's current status.",
             _schema(["name"], name=_NAME_FIELD), execute=c.status, idempotent=True),
        Tool(f"{COMPANION_PREFIX}waitForResult",
             "Wait until a child's run ends; its output or error.",
             _schema(["name"], name=_NAME_FIELD, timeoutMs={"type": "integer"}),
             execute=c.wait, idempotent=True),
        Tool(f"{COMPANION_PREFIX}terminateChild", "Stop a child's run now.",
             _schema(["name"], name=_NAME_FIELD, reason={"type": "string"}),
             execute=c.terminate, idempotent=True),
    ]  # fmt: skip
