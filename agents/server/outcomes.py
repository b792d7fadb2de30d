"""How a run stops: it ends (``completed`` / ``failed``) or pauses (``interrupted``,
``suspended_*``), written to the session row and its stream in one synchronous step.

Every stop goes through here so the bookkeeping that depends on "the run stopped" is in one
place: the stream's terminal or pause event, the ``run_*`` chunk, the ``interruptContext`` of an
interrupted run, and the end of the last ``/resume``'s idempotency window (a pause makes the run
resumable again, so an identical ``/resume`` after it is a new request, not a duplicate).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..core.portable import wait_until
from .calls import (
    output_of,
    pending_approvals,
    pending_client_calls,
    step_has_server_results,
)
from .contexts import CompleteContext
from .hooks import call_hook

if TYPE_CHECKING:
    from .server import AgentServer

__all__ = ["LAST_RESUME_KEY", "crashed", "end_run", "pause_run", "settle_run"]

#: KV key of the last accepted ``/resume`` (its body's hash and its answer) while no stop since
#: has made the run resumable again: a duplicate of it gets the same answer and changes nothing.
LAST_RESUME_KEY = "cf:server:last-resume"


def _base(server: AgentServer) -> dict[str, Any]:
    record = server.session
    return {"runId": record.run_id, "agentId": record.session_id}


def pause_run(server: AgentServer, status: str, chunk: Mapping[str, Any], **event: Any) -> None:
    """The run stops without ending: ``status``, the ``chunk`` (``run_interrupted`` /
    ``run_suspended``), and a pause event after which SSE readers close."""
    server.ctx.storage.kv.delete(LAST_RESUME_KEY)
    server.sessions.update(status=status)
    server.stream.append({**chunk, **_base(server)})
    server.stream.pause(event)


def end_run(server: AgentServer, *, output: Any = None, error: str | None = None) -> None:
    """The run ends: ``completed`` with ``output``, or ``failed`` with ``error``."""
    if error is not None:
        server.sessions.update(status="failed", error=error)
        server.stream.append({"type": "run_failed", "error": error, **_base(server)})
        server.stream.fail(error)
    else:
        server.sessions.update(status="completed", output=output, error=None)
        server.stream.append({"type": "run_completed", "output": output, **_base(server)})
        server.stream.finish(output)


def interrupted(server: AgentServer, reason: str, source: str) -> None:
    """The run is interrupted (``source``: ``request`` — a soft interrupt it observed — or
    ``crash`` — the process running it stopped); ``/resume`` continues it."""
    record = server.session
    context = {
        "reason": reason,
        "source": source,
        "runId": record.run_id,
        "stepCount": record.step_count,
        "interruptedAt": int(server._core.now()),
    }
    server.sessions.update(interrupt_reason=None, interrupt_context=context)
    pause_run(
        server,
        "interrupted",
        {"type": "run_interrupted", "reason": reason},
        type="interrupted",
        reason=reason,
    )


def crashed(server: AgentServer) -> None:
    """On activation: a run left ``active`` by a process that stopped is interrupted."""
    interrupted(server, "the process running this session stopped", "crash")


async def settle_run(server: AgentServer, result: Mapping[str, Any]) -> None:
    """The run's turn ended (``on_chat_response``): its status, its stream's end (or pause),
    the parent told, the ``on_complete`` hook."""
    status = result.get("status")
    if status in ("skipped", "recovering"):
        return
    record = server.session
    message = result.get("message")
    outcome: str
    if server._abort_reason is not None or status == "aborted":
        error = f"aborted: {server._abort_reason or 'the run was cancelled'}"
        server._abort_reason = None
        server.sessions.update(aborted=True)
        end_run(server, error=error)
        outcome = "failed"
    elif status == "error":
        end_run(server, error=str(result.get("error") or "the run failed"))
        outcome = "failed"
    elif server._interrupt_seen is not None:
        reason, server._interrupt_seen = server._interrupt_seen, None
        interrupted(server, reason, "request")
        outcome = "interrupted"
    elif approvals := pending_approvals(message):
        # Server tools a person must approve first (``needs_approval``): nothing ran them yet.
        pending = {**pending_client_calls(message), **approvals}
        for call_id, call in approvals.items():
            server.stream.append({"type": "tool_approval_request", "toolCallId": call_id,
                                  "approvalId": call_id, "toolName": call["toolName"],
                                  "input": call["input"], **_base(server)})  # fmt: skip
        pause_run(
            server,
            "suspended_approval",
            {"type": "run_suspended", "reason": "approval", "toolCalls": pending},
            type="suspended",
            reason="approval",
            sessionId=record.session_id,
            toolCalls=pending,
        )
        return
    elif pending := pending_client_calls(message):
        # A batch that mixed server and client calls: the server ones ran and their results are
        # stored; the client's results complete the step without running them again.
        reason = "step_partial" if step_has_server_results(message) else "client_tool"
        pause_run(
            server,
            f"suspended_{reason}",
            {"type": "run_suspended", "reason": reason, "toolCalls": pending},
            type="suspended",
            reason=reason,
            sessionId=record.session_id,
            toolCalls=pending,
        )
        return
    elif waiting := [c.session_id for c in server.sessions.children() if c.status == "suspended"]:
        pause_run(
            server,
            "suspended_awaiting_children",
            {"type": "run_suspended", "reason": "awaiting_children", "children": waiting},
            type="suspended",
            reason="awaiting_children",
            sessionId=record.session_id,
            children=waiting,
        )
        return
    else:
        end_run(server, output=output_of(message))
        outcome = "completed"
    record = server.session
    if record.parent_session_id:
        wait_until(server.ctx, server.tell_parent(record.parent_session_id))
    await call_hook(
        server.hooks.on_complete,
        CompleteContext(
            env=server.env,
            session_id=record.session_id or server.name,
            run_id=record.run_id or "",
            agent_type=record.agent_type or "",
            status=outcome,
            result=record.output,
            error=record.error,
            logger=server.log,
            record_metric=server.metric_recorder(f"{record.run_id}:on_complete"),
        ),
    )
