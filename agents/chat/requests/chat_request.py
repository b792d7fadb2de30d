"""Chat requests: ``cf_agent_use_chat_request`` and ``cf_agent_chat_messages``, and queueing turns.

Functions of the agent (its private chat parts), kept apart from the façade in
:mod:`agents.chat.agent`: what a request does before its turn runs — parse and validate it,
apply ``message_concurrency``, save the user's messages all or nothing, show them to the other
connections, queue the turn.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ...core.connections import Connection
from ...core.portable import wait_until
from ...errors import InvalidMessageError
from ..protocol import frames
from ..protocol.frames import ChatFrame
from ..recovery import CHAT_LAST_TERMINAL_KEY
from ..transcript.incoming import auto_transform_messages, validate_message
from ..transcript.messages import origin_message_ids
from ..turns.queue import TurnSkipped, merge_queued_user_messages, parse_policy, wait_for_time
from ..turns.turn import TurnSpec

__all__ = ["chat_error", "chat_request", "enqueue_turn", "merge_queued", "set_messages"]

_log = logging.getLogger("agents.chat")


def chat_error(agent: Any, connection: Connection, request_id: str, message: str) -> None:
    """A request this agent cannot run: its sender gets an error frame naming why."""
    _log.warning("agent %s: chat request %s refused: %s", agent.name, request_id, message)
    connection._send_quiet(frames.response_frame(request_id, message, done=True, error=True))


def chat_request(agent: Any, connection: Connection, frame: ChatFrame) -> None:
    """``cf_agent_use_chat_request``: parse, decide (``message_concurrency``), save all or
    nothing, show the others, queue the turn (research §2.2, §5.2)."""
    request_id = frame.id
    if not request_id:
        _log.warning("agent %s: chat request without an id ignored", agent.name)
        return
    raw = frame.init.get("body")
    try:
        body = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        body = None
    if not isinstance(body, dict):
        chat_error(agent, connection, request_id, "the chat request's body is not a JSON object")
        return
    try:
        incoming = [validate_message(m) for m in auto_transform_messages(body.get("messages"))]
    except InvalidMessageError as exc:
        chat_error(agent, connection, request_id, f"invalid chat request: {exc}")
        return
    rest = {k: v for k, v in body.items() if k not in ("messages", "clientTools", "trigger")}
    tools = body.get("clientTools")
    submit = body.get("trigger") != "regenerate-message"
    origin = origin_message_ids(incoming)
    decision = agent._chat_policy.decide(
        parse_policy(agent.message_concurrency),
        overlapping=agent._chat_queue.busy,
        submit=submit,
        now=agent._core.now(),
    )
    if decision.drop:
        connection._send_quiet(frames.messages_frame(agent._chat_runner.rollback_snapshot()))
        connection._send_quiet(
            frames.response_frame(request_id, done=True, outcome="skipped", message_ids=origin)
        )
        return
    generation = agent._chat_queue.generation
    start = len(agent.messages)
    try:
        # All or nothing (a list that is a subset of the transcript — a regenerate — trims
        # what it left out): a message the storage refuses (too big for a row under
        # production limits) leaves the transcript as it was.
        merged = agent.ctx.storage.transactionSync(
            lambda: agent._chat_persist(incoming, delete_stale=True)
        )
    except Exception as exc:
        agent._chat_policy.withdraw(decision)
        agent._chat_store.load()  # the cache may hold rows the rollback undid
        chat_error(agent, connection, request_id, f"the chat request could not be saved: {exc}")
        return
    agent.ctx.storage.kv.delete(CHAT_LAST_TERMINAL_KEY)  # a new turn supersedes it
    if decision.merge:
        agent._chat_merge_start.setdefault(generation, start)
    # As the SDK, the others get the submitted list twice (as sent, then reconciled); they
    # get it once it is saved, so nobody is shown a message that is not in the transcript.
    agent._chat_broadcast(frames.messages_frame(incoming), exclude=[connection.id])
    agent._chat_broadcast(frames.messages_frame(merged), exclude=[connection.id])
    if decision.merge:
        merge_queued(agent, generation)
    spec = TurnSpec(
        request_id,
        origin_ids=origin,
        body=rest or None,
        client_tools=tools if isinstance(tools, list) and tools else None,
        sender=connection,
        decision=decision,
    )
    wait_until(agent.ctx, agent._chat_enqueue(spec))


def set_messages(agent: Any, connection: Connection, frame: ChatFrame) -> None:
    """``cf_agent_chat_messages``: a client's transcript, upserted and shown to the others."""
    try:
        incoming = [validate_message(m) for m in auto_transform_messages(frame.messages)]
    except InvalidMessageError as exc:
        _log.warning("agent %s: cf_agent_chat_messages refused: %s", agent.name, exc)
        return
    agent.persist_messages(incoming, exclude_broadcast_ids=[connection.id])


def merge_queued(agent: Any, generation: int) -> None:
    """``merge``: collapse the user messages queued since the first overlap into one."""
    start = agent._chat_merge_start.get(generation)
    merged = None if start is None else merge_queued_user_messages(agent.messages, start)
    if merged is not None:
        agent._chat_persist_and_broadcast(merged, (), delete_stale=True)


async def enqueue_turn(agent: Any, spec: TurnSpec) -> dict[str, Any]:
    """Queue a turn; run it (in its fiber) when its time comes. Returns its result."""
    generation = agent._chat_queue.generation
    decision = spec.decision

    def check() -> None:
        if generation != agent._chat_queue.generation:
            raise TurnSkipped(f"turn {spec.request_id} was enqueued before a clear")
        if decision is not None and agent._chat_policy.superseded(decision):
            raise TurnSkipped(f"turn {spec.request_id} was superseded")

    async def run() -> dict[str, Any]:
        # At the head of the queue, in the SDK's order: superseded? debounce, check again;
        # merge what was queued meanwhile, check again.
        check()
        if decision is not None and decision.debounce_until is not None:
            await wait_for_time(agent._core.now, decision.debounce_until)
            check()
        if decision is not None and decision.merge:
            merge_queued(agent, generation)
            check()
        finished: dict[str, Any] = await agent._chat_fiber(spec)
        return finished

    try:
        result = await agent._chat_queue.run(spec.request_id, run, generation=generation)
    except TurnSkipped:
        if spec.sender is not None:
            spec.sender._send_quiet(
                frames.response_frame(
                    spec.request_id, done=True, outcome="skipped", message_ids=spec.origin_ids
                )
            )
        return {"requestId": spec.request_id, "status": "skipped"}
    finally:
        if not agent._chat_queue.busy:
            agent._chat_merge_start.pop(generation, None)
    try:
        await agent.on_chat_response(result)
    except Exception as exc:
        await agent._core.report(exc, spec.sender)
    answer: dict[str, Any] = result
    return answer
