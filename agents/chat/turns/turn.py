"""One chat turn: call ``on_chat_message``, stream its reply, persist the message, end the request.

Per chunk (research §4.3): the chunk is applied to the assistant message
(:class:`~agents.chat.transcript.messages.AssistantMessage` also says what to send in its place),
stored in
the resumable stream (which gives its ``seq``) and broadcast to every connection not waiting to
resume. At the end the stream is closed, which ends the wait of the connections told
``resuming`` that have not acknowledged (as the SDK's ``_afterStreamFinished`` and
``_markStreamError`` do); then the message is persisted and the stream's rows deleted with no
``await`` in between (one implicit transaction), the transcript goes to the other connections,
and only then the terminal frames (an in-band error's too) go to everyone — so a client that
sees ``error`` or ``done`` never gets an older snapshot after, and one that never acknowledged
still ends with the transcript (research §1.4).

Ends of a turn: ``completed``; ``aborted`` (cancelled: the partial is kept, the open text part
still ``streaming``); ``error`` from an in-band ``error`` chunk (an error frame, then ``done``
with ``outcome: "error"``); and, unlike the SDK (which sends nothing), a failing
``on_chat_message`` or reply stream ends the request with an error frame naming the failure.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import logging
import secrets
from dataclasses import dataclass, field
from typing import Any

from ...core.connections import Connection
from ...core.protocol import dumps
from ..protocol import frames
from ..protocol.frames import ChatFrame
from ..streams.resumable import ActiveStream
from ..transcript.chunks import (
    TOOL_APPROVAL_REQUEST,
    TOOL_OUTPUT_AVAILABLE,
    TOOL_OUTPUT_DENIED,
    TOOL_OUTPUT_ERROR,
)
from ..transcript.messages import AssistantMessage, UIMessage
from ..transcript.parts import SETTLED_TOOL_STATES, find_tool_part
from .queue import Decision
from .reply import AbortScope, StallWatchdog, reply_chunks
from .transient import TransientFailure, http_refusal, transient_failure

__all__ = ["ChatMessageOptions", "TurnRunner", "TurnSpec"]

_log = logging.getLogger("agents.chat")

#: Chunks stored at once rather than with the next ten (a tool result must survive a crash).
_FLUSH_AT_ONCE = frozenset({TOOL_OUTPUT_AVAILABLE, TOOL_OUTPUT_ERROR, TOOL_OUTPUT_DENIED})
#: The states a tool result answers (``_applyToolResult``) and those an approval answers
#: (``_applyToolApproval``): a second, conflicting approval is ignored.
_WAITING_STATES = frozenset({"input-available", "approval-requested", "approval-responded"})
_APPROVABLE_STATES = frozenset({"input-available", "approval-requested"})


@dataclass(frozen=True)
class ChatMessageOptions:
    """The second argument of ``on_chat_message`` (the SDK's ``OnChatMessageOptions``).

    ``abort_signal`` is set when the client cancels the turn (or a clear aborts it): stop the
    model call and return; what was streamed so far is kept.
    """

    request_id: str
    abort_signal: asyncio.Event
    client_tools: list[Any] | None = None
    body: dict[str, Any] | None = None
    continuation: bool = False


#: The error of a stalled reply nothing recovers (recovery declined or off).
_STALLED = "The model's reply stalled: no chunk for {ms} ms."

#: What a turn attempt returns when it hit a context overflow and the history was compacted.
_COMPACTED: Any = object()


def new_request_id() -> str:
    """A ``nanoid()``-like id (21 URL-safe characters), as the SDK's server-side ids."""
    return secrets.token_urlsafe(16)[:21]


@dataclass
class TurnSpec:
    """What one turn answers: its request, who sent it, and the context it runs with."""

    request_id: str
    continuation: bool = False
    origin_ids: list[str] = field(default_factory=list)
    body: dict[str, Any] | None = None
    client_tools: list[Any] | None = None
    #: The connection whose request this is (None for programmatic and continuation turns,
    #: whose transcript snapshot goes to everyone).
    sender: Connection | None = None
    decision: Decision | None = None
    #: A recovery's continuation or retry: the request that started the chain, so every turn of
    #: one interrupted reply shares one incident and one budget.
    recovery_root: str | None = None


class TurnRunner:
    """Runs turns for one ``AIChatAgent`` (``agent``: its private chat components)."""

    __slots__ = ("_agent", "_streaming")

    def __init__(self, agent: Any) -> None:
        self._agent = agent
        #: The message the running turn streams into, until it is persisted.
        self._streaming: AssistantMessage | None = None

    @property
    def streaming_message(self) -> UIMessage | None:
        """The assistant message a turn is streaming into and has not persisted yet (the SDK's
        ``_streamingMessage``): tool results and approvals may already answer its calls."""
        return self._streaming.message if self._streaming is not None else None

    def snapshot(self, spec: TurnSpec) -> dict[str, Any]:
        """The SDK's chat-turn snapshot envelope (the ``__cfAIChatFiberSnapshot`` half)."""
        messages = self._agent.messages
        latest = messages[-1] if messages else None
        latest_user = next((m for m in reversed(messages) if m.get("role") == "user"), None)
        envelope: dict[str, Any] = {
            "kind": "ai-chat-turn",
            "version": 1,
            "requestId": spec.request_id,
            "recoveryRootRequestId": spec.recovery_root or spec.request_id,
            "continuation": spec.continuation,
            "latestMessageId": latest.get("id") if latest else None,
            "latestMessageRole": latest.get("role") if latest else None,
            "latestUserMessageId": latest_user.get("id") if latest_user else None,
            "startedAt": int(self._agent._core.now()),
            "originMessageIds": list(spec.origin_ids),
        }
        if spec.body is not None:
            envelope["lastBody"] = spec.body
        if spec.client_tools is not None:
            envelope["lastClientTools"] = spec.client_tools
        return envelope

    # -- a turn -----------------------------------------------------------------------------------
    async def run(self, spec: TurnSpec, abort: asyncio.Event) -> dict[str, Any]:
        agent = self._agent
        context = agent._chat_context
        if not spec.continuation:
            context.last_body = spec.body
            context.last_client_tools = spec.client_tools
        options = ChatMessageOptions(
            spec.request_id, abort, spec.client_tools, spec.body, spec.continuation
        )
        agent._chat_auto.turn_started(spec.request_id, continuation=spec.continuation)
        compactions = 0
        while True:
            result: dict[str, Any] = {
                "requestId": spec.request_id,
                "continuation": spec.continuation,
                "status": "completed",
            }
            agent._chat_repair_transcript(continuation=spec.continuation)
            outcome = await self._run_once(spec, abort, options, result, compactions)
            if outcome is not _COMPACTED:
                finished: dict[str, Any] = outcome
                agent._chat_auto.turn_ended()
                return finished
            compactions += 1  # the history was compacted: the turn runs again, from scratch

    async def _run_once(
        self,
        spec: TurnSpec,
        abort: asyncio.Event,
        options: ChatMessageOptions,
        result: dict[str, Any],
        compactions: int,
    ) -> Any:
        agent = self._agent
        try:
            reply = agent.on_chat_message(_no_op, options)
            if inspect.isawaitable(reply):
                reply = await reply
        except Exception as exc:
            if await agent._chat_compact_after_overflow(spec, exc, compactions):
                return _COMPACTED
            return await self._failed(spec, result, exc)
        if reply is None:
            self._end(spec, "No response was generated by the agent.", outcome="completed")
            return result
        return await self._stream(spec, reply, abort, result, compactions)

    async def _stream(
        self,
        spec: TurnSpec,
        reply: Any,
        abort: asyncio.Event,
        result: dict[str, Any],
        compactions: int = 0,
    ) -> Any:
        agent = self._agent
        streams = agent._chat_streams
        builder = AssistantMessage.for_turn(
            agent.messages, continuation=spec.continuation, now_ms=agent._core.now()
        )
        streams.start(
            spec.request_id,
            message_id=builder.id,
            continuation=spec.continuation,
            origin_message_ids=spec.origin_ids,
        )
        agent._chat_resume.started(spec.request_id)
        self._streaming = builder
        watchdog = StallWatchdog(agent._core.now, agent.chat_stream_stall_timeout_ms, abort)
        transient: TransientFailure | None = None
        try:
            async with AbortScope(abort), watchdog:
                async for chunk in reply_chunks(reply, spec.request_id, abort):
                    watchdog.fed()
                    for out in builder.consume(chunk):
                        body = dumps(out)
                        seq = streams.store(body, flush_now=out.get("type") in _FLUSH_AT_ONCE)
                        agent._chat_broadcast(
                            frames.response_frame(
                                spec.request_id, body, seq=seq, continuation=spec.continuation
                            )
                        )
                        if out.get("type") == TOOL_APPROVAL_REQUEST:
                            self._keep_early(builder)
                    if builder.error_text is not None:
                        break
        except Exception as exc:
            if not abort.is_set():
                failure = transient_failure(exc)
                if (
                    failure is not None
                    and agent._chat_recovery is not None
                    and (not failure.refused or spec.recovery_root is not None)
                ):
                    transient = failure  # a dropped read, or a recovery turn refused for now
                elif http_refusal(exc) and builder.error_text is None:
                    builder.error_text = str(exc)  # as streamText: an in-band error
                else:
                    streams.mark_error(str(exc))
                    if await agent._chat_compact_after_overflow(spec, exc, compactions):
                        return _COMPACTED  # the cut-off partial is discarded, never persisted
                    agent._chat_resume.finished()
                    self._keep(spec, builder)
                    return await self._failed(spec, result, exc)
            # A model that fails because it was cancelled (a read of a cancelled body): the
            # turn was aborted, not failed.
            _log.info("agent %s: turn %s ended by its cancellation: %r", agent.name,
                      spec.request_id, exc)  # fmt: skip
        finally:  # no await from here to the persist below: nothing can see the gap
            self._streaming = None
        result["message"] = builder.message
        if builder.error_text is not None:  # an in-band error chunk ended the reply
            streams.mark_error(builder.error_text)
            if await agent._chat_compact_after_overflow(spec, builder.error_text, compactions):
                return _COMPACTED
            await agent._chat_failed(spec, builder.error_text)
            agent._chat_resume.finished()
            self._keep(spec, builder)
            agent._chat_broadcast(
                frames.response_frame(
                    spec.request_id, builder.error_text, error=True, message_ids=spec.origin_ids
                )
            )
            self._end(spec, outcome="error")
            result.update(status="error", error=builder.error_text)
            return result
        if watchdog.stalled or transient is not None:  # recovered within budget
            if transient is None:  # the upstream went quiet
                agent._emit(
                    "chat:stream:stalled",
                    {"requestId": spec.request_id, "timeoutMs": agent.chat_stream_stall_timeout_ms},
                )
            streams.finish("recovering")
            agent._chat_resume.finished()
            kept = False

            def keep(persist: bool = True) -> None:
                nonlocal kept
                if not kept:
                    (self._keep if persist else self._keep_settled)(spec, builder)
                kept = True

            # Recovery first (as the SDK routes a stall before it ends the turn): its
            # "recovering" frame, or its give-up, precede this turn's last frame.
            routed = await agent._chat_stalled(spec, builder, keep, transient)
            keep()
            streams.cutover()
            if routed == "scheduled":
                self._end(spec, outcome="recovering")
            elif routed != "exhausted":  # nothing will continue it: the stall is the error
                agent._chat_broadcast(
                    frames.response_frame(
                        spec.request_id,
                        _STALLED.format(ms=agent.chat_stream_stall_timeout_ms),
                        done=True,
                        error=True,
                        continuation=spec.continuation,
                        message_ids=spec.origin_ids,
                    )
                )
            result["status"] = "recovering"
            return result
        aborted = abort.is_set()
        streams.finish("aborted" if aborted else None)
        agent._chat_resume.finished()
        self._keep(spec, builder)
        streams.cutover()
        self._end(spec, outcome="aborted" if aborted else None)
        if aborted:
            result["status"] = "aborted"
        return result

    def _keep_settled(self, spec: TurnSpec, builder: AssistantMessage) -> None:
        """``persist: False`` for a stalled reply: keep only its settled work (see
        :meth:`finalize_orphan`)."""
        kept = settled_prefix(builder.parts)
        if kept:
            builder.message["parts"] = kept
            self._keep(spec, builder)

    def _keep(self, spec: TurnSpec, builder: AssistantMessage) -> None:
        """Persist the turn's assistant message; the transcript goes to the other connections
        (to everyone for a turn no connection asked for)."""
        agent = self._agent
        self._streaming = None  # from here on, the stored message is the one to update
        messages: list[UIMessage] = [m for m in agent.messages if m.get("id") != builder.id]
        content = [
            p for p in builder.parts if not (isinstance(p, dict) and p.get("type") == "step-start")
        ]
        if not content and not spec.continuation:
            return  # nothing was said (a refused request): only the user's message stays
        exclude = [spec.sender.id] if spec.sender is not None else []
        agent.persist_messages([*messages, builder.message], exclude_broadcast_ids=exclude)

    def _keep_early(self, builder: AssistantMessage) -> None:
        """The model asked for an approval: persist the message now, unbroadcast (as the SDK),
        so a reload mid-stream shows the approval and the answer finds its tool part."""
        agent = self._agent
        messages: list[UIMessage] = [m for m in agent.messages if m.get("id") != builder.id]
        agent._chat_persist([*messages, copy.deepcopy(builder.message)])

    def _end(self, spec: TurnSpec, body: str = "", *, outcome: Any = None) -> None:
        """The request's terminal frame, to everyone not waiting to resume."""
        agent = self._agent
        agent._chat_resume.finished()
        agent._chat_broadcast(
            frames.response_frame(
                spec.request_id,
                body,
                done=True,
                outcome=outcome,
                continuation=spec.continuation,
                message_ids=spec.origin_ids,
            )
        )

    async def _failed(
        self, spec: TurnSpec, result: dict[str, Any], exc: BaseException
    ) -> dict[str, Any]:
        agent = self._agent
        await agent._core.report(exc, spec.sender)
        await agent._chat_failed(spec, exc)
        agent._chat_resume.finished()
        agent._chat_broadcast(
            frames.response_frame(
                spec.request_id,
                f"The chat turn failed: {exc}",
                done=True,
                error=True,
                continuation=spec.continuation,
                message_ids=spec.origin_ids,
            )
        )
        result.update(status="error", error=str(exc))
        return result

    # -- interrupted turns, tools -----------------------------------------------------------------
    def finalize_orphan(self, active: ActiveStream, *, persist: bool = True) -> None:
        """A stream whose producer died: keep its partial reply, close the stream.

        ``persist=False`` (``on_chat_recovery`` said so) drops only the unsettled tail: settled
        work — tool calls with their results, and what led to them — is never thrown away
        (the SDK's rule, cloudflare/agents#1631), so a tool that ran before the kill is not run
        again by the retry or the continuation."""
        builder = self.partial(active)
        parts = builder.parts if persist else settled_prefix(builder.parts)
        if parts and builder.id:
            agent = self._agent
            messages = [m for m in agent.messages if m.get("id") != builder.id]
            agent.persist_messages([*messages, {**builder.message, "parts": list(parts)}])
        self._agent._chat_streams.complete(active.stream_id, "aborted")

    def partial(self, active: ActiveStream) -> AssistantMessage:
        """The assistant message a dead producer's stored chunks add up to."""
        agent = self._agent
        streams = agent._chat_streams
        bodies = streams.stored_bodies(active.stream_id)
        last = next((m for m in reversed(agent.messages) if m.get("role") == "assistant"), None)
        if active.continuation and last is not None:
            builder = AssistantMessage.continuing(last)
        else:
            builder = AssistantMessage(
                {"id": active.message_id or "", "role": "assistant", "parts": []}
            )
        for body in bodies:
            try:
                chunk = json.loads(body)
            except ValueError:
                continue
            if isinstance(chunk, dict):
                builder.apply(chunk)
        return builder

    def rollback_snapshot(self) -> list[UIMessage]:
        """What a dropped submit's sender is sent back: the stored transcript."""
        messages: list[UIMessage] = self._agent.messages
        return messages

    def tool_update(self, connection: Connection, frame: ChatFrame) -> None:
        """``cf_agent_tool_result`` / ``cf_agent_tool_approval`` (research §5.6, §5.7).

        The call is looked up first in the message a turn is still streaming (a client may
        answer a call before the turn that made it ends: the part is updated in place and
        persisted with the message), then in the stored transcript. Either way every connection
        gets ``cf_agent_message_updated``. A part already past the frame's states is left alone
        (the first answer wins); an unknown call is ignored (logged), as in the SDK. An answer
        with ``autoContinue`` schedules a continuation, coalesced (:mod:`.autocontinue`).
        """
        agent = self._agent
        data = frame.data
        call_id = data.get("toolCallId")
        answer = "result" if frame.type == frames.TOOL_RESULT else "approval"

        def refuse(why: str) -> None:
            # Approvals only: a client tool's result is re-sent by the SDK's client after a
            # reconnect, and the SDK answers those with nothing; a refused approval is told.
            if answer == "approval":
                connection._send_quiet(frames.tool_error_frame(call_id, answer, why))

        if not isinstance(call_id, str) or not call_id:
            refuse(f"a tool {answer} needs a toolCallId string, got {call_id!r}")
            return
        if frame.type == frames.TOOL_APPROVAL and not isinstance(data.get("approved"), bool):
            refuse(f"the approval of tool call {call_id!r} needs approved: true or false")
            return
        if frame.type == frames.TOOL_RESULT:
            tools = data.get("clientTools")
            if isinstance(tools, list) and tools:
                agent._chat_context.last_client_tools = tools
        states = _WAITING_STATES if frame.type == frames.TOOL_RESULT else _APPROVABLE_STATES
        streaming = self._streaming
        part = find_tool_part(streaming.parts, call_id) if streaming is not None else None
        if streaming is not None and part is not None:
            if part.get("state") not in states:
                refuse(_not_waiting(call_id, answer, part))  # the first answer wins
                return
            _answer(part, frame)
            message = streaming.message
        else:
            stored = next(
                (m for m in reversed(agent.messages)
                 if find_tool_part(m.get("parts", []), call_id) is not None),
                None,
            )  # fmt: skip
            if stored is None:
                _log.warning("agent %s: tool %s for unknown call %r ignored",
                             agent.name, answer, call_id)  # fmt: skip
                refuse(f"no tool call {call_id!r} in this chat: the {answer} was ignored")
                return
            message = copy.deepcopy(stored)
            part = find_tool_part(message["parts"], call_id)
            if part is None or part.get("state") not in states:
                refuse(_not_waiting(call_id, answer, part))  # the first answer wins
                return
            _answer(part, frame)
            agent._chat_store.upsert(message)
        agent._chat_broadcast(frames.message_updated_frame(message))
        agent._chat_auto.answered(
            message["id"],
            auto_continue=bool(data.get("autoContinue")),
            durable=frame.type == frames.TOOL_APPROVAL and _server_tool(part),
            connection_id=connection.id,
        )


def _answer(part: dict[str, Any], frame: ChatFrame) -> None:
    """Apply a tool result or approval to its (waiting) tool part, in place."""
    data = frame.data
    if frame.type == frames.TOOL_RESULT:
        if data.get("state") == "output-error":
            part["state"] = "output-error"
            part["errorText"] = data.get("errorText") or "Tool execution denied by user"
        else:
            part["state"] = "output-available"
            part["output"] = data.get("output")
            part["preliminary"] = False
        return
    approved = bool(data.get("approved"))
    part["state"] = "approval-responded" if approved else "output-denied"
    previous = part.get("approval")
    approval: dict[str, Any] = previous if isinstance(previous, dict) else {}
    part["approval"] = {**approval, "id": approval.get("id", data["toolCallId"]),
                        "approved": approved}  # fmt: skip


def _not_waiting(call_id: str, answer: str, part: dict[str, Any] | None) -> str:
    state = part.get("state") if part is not None else None
    return (f"tool call {call_id!r} is not waiting for {'an' if answer == 'approval' else 'a'} "
            f"{answer} (its state is {state!r}): the {answer} was ignored")  # fmt: skip


def _server_tool(part: dict[str, Any]) -> bool:
    """Whether the model loop runs this call (it named the call's ledger operation)."""
    meta = part.get("callProviderMetadata")
    inner = meta.get("agents") if isinstance(meta, dict) else None
    return isinstance(inner, dict) and bool(inner.get("opId"))


def settled_prefix(parts: list[Any]) -> list[Any]:
    """The parts up to the last settled tool part (its result recorded), or ``[]``: what a
    dropped partial still keeps."""
    last = max(
        (i for i, p in enumerate(parts)
         if isinstance(p, dict) and p.get("toolCallId") and p.get("state") in SETTLED_TOOL_STATES),
        default=-1,
    )  # fmt: skip
    return [copy.deepcopy(p) for p in parts[: last + 1]]


def _no_op(*_args: Any, **_kwargs: Any) -> None:
    """The ``on_finish`` callback ``on_chat_message`` receives (the SDK's is a no-op too)."""
