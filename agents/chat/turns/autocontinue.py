"""Auto-continuation: one continuation turn for a burst of client tool answers.

A ``cf_agent_tool_result`` or ``cf_agent_tool_approval`` with ``autoContinue: true`` asks the
agent to continue the conversation once the answer is in. A model that fans out parallel tool
calls gets their answers back within milliseconds of each other, and each one asks; answered
one by one that is one continuation per answer, the first of them run against a half-answered
batch whose other calls the pre-turn repair then turns into errors (SDK #1649, #1650). So, as
the SDK's ``AutoContinuationController``:

* an answer with ``autoContinue`` *schedules* a continuation and (re)arms a
  :data:`COALESCE_MS` timer; every answer that lands before it fires re-arms it, so a burst of
  sibling answers is one continuation. An answer without ``autoContinue`` never creates one but
  re-arms a scheduled one: it may be the answer that completes the batch.
* when the timer fires, the continuation is queued only if no turn is streaming (the batch can
  still grow; the stream's end re-arms the timer) and the last assistant message is not
  mid-batch — a settled answer beside a call still waiting (the answer that completes it
  re-arms). Held that way it waits for an event, never for a timeout: a sibling that never
  comes means no continuation, and the next user turn repairs the transcript.
* once the continuation's turn has started it has read the transcript, so an answer with
  ``autoContinue`` that arrives now defers into *one* follow-up continuation, scheduled when
  the running one completes (a failed, aborted or stalled one is not followed: the user, or
  the stall's own recovery, decides what happens next). An answer that arrives after it was
  queued but before it started needs nothing: the turn will read it.

Unlike the SDK, a scheduled continuation remembers the assistant message whose calls were
answered and is dropped if, when its time comes, the transcript no longer ends with that message
(a user turn came in between): it would otherwise continue the newer reply.

The timer runs on the agent's clock (:func:`~agents.chat.turns.queue.wait_for_time`), so a manual
clock in a test drives it. The state lives in memory, as in the SDK: an eviction forgets a
scheduled continuation, and the client's next turn repairs the transcript. A ``clear`` (a new
queue generation) drops what was scheduled before it.

One exception, this library's: an approval of a *server* tool (a ``Tool`` with
``needs_approval`` that the model loop runs once approved) is a decision already taken — nothing
on the client will repeat it. So its continuation is also remembered durably (KV
:data:`APPROVED_CONTINUATION_KEY`) until a continuation turn starts; an activation that finds it
(after an eviction or a kill between the answer and the turn) schedules the continuation again
(:meth:`AutoContinuation.restore`). From the turn's start on, its fiber and chat recovery own it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ...core.portable import wait_until
from ..transcript.parts import SETTLED_TOOL_STATES
from ..transcript.repair import tool_name
from .queue import wait_for_time
from .turn import TurnSpec, new_request_id

__all__ = [
    "APPROVED_CONTINUATION_KEY",
    "COALESCE_MS",
    "AutoContinuation",
    "has_incomplete_tool_batch",
]

#: The SDK's ``AutoContinuationController.COALESCE_MS``: how long after an answer the agent
#: waits for its siblings before it continues (each later answer restarts the wait).
COALESCE_MS: Final = 50.0

#: States of a call still waiting for the client, and of one the client has answered.
_AWAITING: Final = frozenset({"input-available", "approval-requested"})
_ANSWERED: Final = SETTLED_TOOL_STATES | {"approval-responded"}
#: KV key: ``{"messageId"}`` — a server tool's approval asked for a continuation not started yet.
APPROVED_CONTINUATION_KEY: Final = "cf_ai_chat_approved_continuation"


def has_incomplete_tool_batch(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the last assistant message is mid-batch: an answered tool call beside one still
    waiting for the client (the SDK's ``hasIncompleteToolBatch``). Only the last message counts:
    an old unanswered call elsewhere must not block a continuation forever."""
    leaf = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
    if leaf is None:
        return False
    parts = [p for p in leaf.get("parts") or () if isinstance(p, Mapping)]
    waiting = any(p.get("state") in _AWAITING for p in parts)
    return waiting and any(tool_name(p) and p.get("state") in _ANSWERED for p in parts)


@dataclass(slots=True)
class _Pending:
    """The scheduled continuation: its turn's request id, the assistant message it continues,
    and the queue generation it belongs to (a clear since then drops it)."""

    request_id: str
    target: str
    generation: int
    #: Handed to the turn queue; later answers are read by the turn when it runs.
    queued: bool = False
    #: Its turn is running (the SDK's ``pastCoalesce``): later answers defer to a follow-up.
    started: bool = False
    #: The connections whose answers asked for it (the SDK's awaiting connections).
    askers: set[str] = field(default_factory=set)


class AutoContinuation:
    """The coalescing barrier of one ``AIChatAgent`` (see the module docstring). The tool-update
    path calls :meth:`answered`; the turn runner calls :meth:`turn_started` and
    :meth:`turn_ended` for every turn."""

    __slots__ = ("_agent", "_deferred", "_pending", "_running", "_timer")

    def __init__(self, agent: Any) -> None:
        self._agent = agent
        self._pending: _Pending | None = None
        #: The follow-up an answer asked for while the continuation ran, if any.
        self._deferred: _Pending | None = None
        self._timer: asyncio.Future[None] | None = None
        #: The queued continuation, until its turn has ended.
        self._running: asyncio.Future[None] | None = None

    # -- events -----------------------------------------------------------------------------------
    def answered(
        self,
        message_id: str,
        *,
        auto_continue: bool,
        durable: bool = False,
        connection_id: str | None = None,
    ) -> None:
        """A client's tool result or approval changed a call of assistant message
        ``message_id`` (``auto_continue``: the frame's ``autoContinue``; ``durable``: it
        approved or denied a server tool, so the continuation survives an eviction;
        ``connection_id``: the sender, who then sees the continuation live — :meth:`asked_by`)."""
        if durable and auto_continue:
            self._agent.ctx.storage.kv.put(APPROVED_CONTINUATION_KEY, {"messageId": message_id})
        pending = self._pending
        if pending is not None and pending.started:
            if auto_continue:
                earlier = self._deferred.askers if self._deferred is not None else set()
                self._deferred = _Pending(new_request_id(), message_id, self._generation,
                                          askers=earlier)  # fmt: skip
                self._ask(self._deferred, connection_id)
            return
        if pending is None:
            if not auto_continue:
                return  # never starts a continuation of its own
            pending = self._pending = _Pending(new_request_id(), message_id, self._generation)
        if auto_continue:
            self._ask(pending, connection_id)
        if pending.queued:
            return  # its turn has not read the transcript yet: it will see this answer
        pending.target = message_id
        self._arm()

    @staticmethod
    def _ask(pending: _Pending, connection_id: str | None) -> None:
        if connection_id is not None:
            pending.askers.add(connection_id)

    def asked_by(self, connection_id: str) -> bool:
        """Whether ``connection_id`` asked for the continuation that is scheduled, queued or
        running (or for its follow-up): that tab gets every chunk of it live, so its resume
        probe is told ``idle`` (see :class:`~agents.chat.requests.resume.ResumeHandshake`)."""
        return any(
            p is not None and connection_id in p.askers for p in (self._pending, self._deferred)
        )

    def restore(self) -> None:
        """On activation: a server tool's approval whose continuation never started (the
        process stopped first) schedules it again — if the transcript still ends with the
        approved message and no reply is under way."""
        kv = self._agent.ctx.storage.kv
        saved = kv.get(APPROVED_CONTINUATION_KEY)
        if not isinstance(saved, Mapping):
            return
        messages = self._agent.messages
        target = saved.get("messageId")
        if not messages or messages[-1].get("id") != target or not isinstance(target, str):
            kv.delete(APPROVED_CONTINUATION_KEY)  # a newer turn came: nothing to continue
            return
        if self._agent._chat_streams.active is not None:
            return  # a reply is being recovered: it will read the answer
        self.answered(target, auto_continue=True)

    def turn_started(self, request_id: str, *, continuation: bool = False) -> None:
        """A turn began running: if it is the continuation, it is past coalescing now (and a
        remembered approval's continuation is under way: its fiber owns it from here)."""
        if continuation:
            self._agent.ctx.storage.kv.delete(APPROVED_CONTINUATION_KEY)
        pending = self._pending
        if pending is not None and pending.request_id == request_id:
            pending.started = True

    def turn_ended(self) -> None:
        """A turn ended, its message persisted: the streaming gate is open again, so a
        continuation it held is checked (after the usual coalescing wait)."""
        pending = self._pending
        if pending is not None and not pending.queued:
            self._arm()

    # -- idleness ---------------------------------------------------------------------------------
    @property
    def armed(self) -> bool:
        """Whether a continuation is about to be queued (its timer runs) or is queued and not
        yet started: the agent is not idle although no turn may be running yet."""
        pending = self._pending
        return self._timer is not None or (
            pending is not None and pending.queued and not pending.started
        )

    async def idle(self) -> None:
        """Until the armed continuation was queued (or held) and every queued turn has ended.
        Never cancels the timer or the turn it waits for."""
        for task in (self._timer, self._running):
            if task is not None:
                await asyncio.wait({task})
        await self._agent._chat_queue.idle()

    # -- the barrier ------------------------------------------------------------------------------
    @property
    def _generation(self) -> int:
        generation: int = self._agent._chat_queue.generation
        return generation

    def _arm(self) -> None:
        """(Re)start the coalescing wait; when it runs out, :meth:`_fire_when_stable`."""
        if self._timer is not None:
            self._timer.cancel()
        agent = self._agent
        self._timer = wait_until(agent.ctx, self._wait(agent._core.now() + COALESCE_MS))

    async def _wait(self, until_ms: float) -> None:
        await wait_for_time(self._agent._core.now, until_ms)
        self._timer = None
        self._fire_when_stable()

    def _fire_when_stable(self) -> None:
        agent = self._agent
        pending = self._pending
        if pending is None or pending.queued:
            return
        if agent._chat_runner.streaming_message is not None:
            return  # the batch may still grow; turn_ended re-arms
        messages = agent.messages
        last = messages[-1] if messages else None
        if pending.generation != self._generation or last is None or last["id"] != pending.target:
            self._pending = self._deferred = None  # a clear, or a newer turn: nothing to continue
            return
        if has_incomplete_tool_batch(messages):
            return  # the answer that completes the batch re-arms
        pending.queued = True
        context = agent._chat_context
        spec = TurnSpec(
            pending.request_id,
            continuation=True,
            body=context.last_body,
            client_tools=context.last_client_tools,
        )
        self._running = wait_until(agent.ctx, self._continue(spec))

    async def _continue(self, spec: TurnSpec) -> None:
        """Run the continuation's turn; then, if an answer was deferred meanwhile and the turn
        completed, schedule the follow-up."""
        result: Mapping[str, Any] | None = None
        try:
            result = await self._agent._chat_enqueue(spec)
        finally:
            self._running = None
            pending = self._pending
            if pending is not None and pending.request_id == spec.request_id:
                deferred, self._pending, self._deferred = self._deferred, None, None
                if deferred is not None and result is not None:
                    if result.get("status") == "completed":  # not after a failure or a cancel
                        self._pending = deferred
                        self._arm()
