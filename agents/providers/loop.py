"""The model loop: a provider's steps as the chat layer's UI-message chunks, recoverable.

``on_chat_message`` returns :func:`model_reply`; the loop calls the model, streams its text and
tool calls, runs server tools through the operation ledger, feeds their results back and calls
the model again, until it answers without tools, a client tool needs the browser, or
``max_steps`` is reached. What makes it more than a loop:

* **Nothing is paid twice.** Every model request is an operation (``llm:<provider>``) written
  before it is sent, with its id as the idempotency key where the provider honours one. The
  turn's :mod:`checkpoint <agents.providers.checkpoint>` and the provider's handle are stored as
  soon as they exist. When the chat layer recovers the turn, the loop resumes the cut step by
  the provider's strategy: it re-attaches to a stored response after the newest event known to
  have reached storage — a tool call, or a text cursor stored every few deltas — dropping the
  persisted text it reads again (OpenAI Responses), continues the persisted partial as a
  prefill (Anthropic), or asks again with the partial as the last assistant message (chat
  completions).
* **Side effects run once.** Server tools run under ledger ids derived from their position in
  the turn; tool calls persisted without a result are settled from the ledger first.
* **A person approves first** where a tool says so (``Tool.needs_approval``): its call is not
  run; the reply emits ``tool-approval-request`` and ends (``finishReason: "tool-calls"``).
  The continuation after the answer runs an approved call under the same ledger id (emitting
  its output) and tells the model of a denied one (``tool-output-denied``), then goes on.
* **Usage is counted** per request into the agent's usage table (per turn = per assistant
  message, per operation, per agent): from the moment the provider accepts it, so a request
  cut before its report still counts (:mod:`agents.providers.meter`).
* **Structured output** (``output_schema``): every request asks for JSON in the schema's shape
  (the provider's structured-output mode) and the final answer is checked
  (:mod:`agents.providers.output`). An accepted one is the message's ``data-structured-output``
  part; a refused one gets a ``data-structured-output-error`` part whose correction the model
  reads on the next step, within ``max_steps``; a reply that spends its budget without an
  accepted answer ends with an ``error`` chunk naming the last violation. Both parts are stored
  with the message, so a recovered turn knows what was judged and what the model was told.
* **The proactive context guard**: before a step, when the previous step's input tokens crossed
  ``max_input_tokens × headroom`` (the agent's ``context_overflow.proactive``), the transcript
  is compacted with ``compact_messages`` (at most ``max_compactions`` times per reply).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from ..chat.recovery.overflow import compact_transcript, resolve_context_overflow
from ..chat.transcript.messages import new_assistant_id
from .base import Finished, ModelCall, Provider, Started, TextDelta, ToolCallDone
from .checkpoint import Plan, TurnCheckpoint, load_checkpoint, plan_turn
from .meter import RequestMeter
from .output import CORRECTION_PART, OUTPUT_PART, OutputSchema, OutputSchemaError, correction
from .output import output_schema as as_output_schema
from .tools import Tool, run_tool, tool_op
from .transcript import Item, Text, ToolCall, ToolResult, items_from_messages, merge_texts

__all__ = ["model_reply"]

Chunk = dict[str, Any]


def _agents_meta(part: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    meta = part.get(key)
    inner = meta.get("agents") if isinstance(meta, Mapping) else None
    return inner if isinstance(inner, Mapping) else {}


def _resume_point(
    partial: Mapping[str, Any] | None, held: bool, trail: Sequence[Sequence[int]] | None
) -> tuple[int, int]:
    """Where the cut step's stored response resumes, and how much text to drop there.

    After the newest event known to have reached storage: a tool call's (its sequence number
    is in the part's metadata), or a text cursor the loop stored — ``(seq, chars)`` — that the
    persisted text of the step covers; the text persisted past that point is skipped. A step
    whose start never reached storage has nothing persisted: from the beginning."""
    if not held:
        return -1, 0
    parts = [p for p in (partial or {}).get("parts") or () if isinstance(p, Mapping)]
    starts = [i for i, p in enumerate(parts) if p.get("type") == "step-start"]
    best, chars = (-1, 0), 0
    for part in parts[starts[-1] if starts else 0 :]:
        if part.get("type") == "text":
            chars += len(str(part.get("text") or ""))
        else:
            seq = _agents_meta(part, "callProviderMetadata").get("seq")
            if isinstance(seq, int) and seq > best[0]:
                best = (seq, chars)
    for seq, at in trail or ():
        if at <= chars and seq > best[0]:
            best = (int(seq), int(at))
    return best[0], chars - best[1]


class _Reply:
    """One reply's state: the chunks it emits and the items the next step reads."""

    def __init__(self, agent: Any, provider: Provider, tools: Sequence[Tool], plan: Plan) -> None:
        self.agent = agent
        self.provider = provider
        self.tools = {t.name: t for t in tools}
        self.specs = [t.spec for t in tools]
        self.checkpoint = plan.checkpoint
        self.produced: list[Item] = []
        self._text_ids = 0  # a step's text blocks: txt-0, txt-1… (the AI SDK's providers')
        self._open: tuple[str, str] | None = None  # (provider block, UI text id)
        #: Characters of text to drop: already in the partial being continued.
        self.skip = 0
        #: The text this reply produced in the current step.
        self.step_text = ""
        #: A tool call that has no result yet (it goes on elsewhere): the reply ends.
        self.pending = False
        #: A tool call waits for a person's approval: the reply ends.
        self.awaiting = False

    @property
    def message_id(self) -> str:
        return self.checkpoint.message_id

    def save(self) -> None:
        self.checkpoint.save(self.agent.ctx.storage.kv)

    def start_step(self) -> Chunk:
        self._text_ids = 0
        return {"type": "start-step"}

    def close_text(self) -> list[Chunk]:
        if self._open is None:
            return []
        _, ui = self._open
        self._open = None
        return [{"type": "text-end", "id": ui}]

    def text(self, event: TextDelta) -> list[Chunk]:
        if self.skip:  # text the partial already holds (a re-attached stored response)
            kept = event.delta[self.skip :]
            self.skip = max(0, self.skip - len(event.delta))
            if not kept:
                return []
            event = TextDelta(event.block, kept, event.seq)
        self.step_text += event.delta
        out: list[Chunk] = []
        if self._open is None or self._open[0] != event.block:
            out += self.close_text()
            ui = f"txt-{self._text_ids}"
            self._text_ids += 1
            self._open = (event.block, ui)
            out.append({"type": "text-start", "id": ui})
        out.append({"type": "text-delta", "id": self._open[1], "delta": event.delta})
        if self.produced and isinstance(self.produced[-1], Text):
            self.produced[-1] = Text("assistant", self.produced[-1].text + event.delta)
        else:
            self.produced.append(Text("assistant", event.delta))
        return out

    def tool_call(self, event: ToolCallDone, step: int, position: str) -> list[Chunk]:
        """The chunks of a tool call, naming its ledger operation for a later recovery."""
        meta: dict[str, Any] = {"step": step, "position": position}
        if event.seq is not None:
            meta["seq"] = event.seq
        tool = self.tools.get(event.name)
        if tool is not None and tool.execute is not None:
            meta["opId"] = tool_op(self.agent, tool, event.args, meta["position"]).id
        self.produced.append(ToolCall(event.call_id, event.name, event.args))
        return [
            *self.close_text(),
            {"type": "tool-input-start", "toolCallId": event.call_id, "toolName": event.name},
            {"type": "tool-input-available", "toolCallId": event.call_id,
             "toolName": event.name, "input": event.args,
             "providerMetadata": {"agents": meta}},
        ]  # fmt: skip

    def gate(self, call_id: str, name: str, args: Mapping[str, Any]) -> Chunk | None:
        """The ``tool-approval-request`` for a call of a tool that needs approval (None: it
        may run now). A ``needs_approval`` function that fails asks for approval (fail
        closed: a check that cannot decide must not let a side effect through)."""
        tool = self.tools.get(name)
        if tool is None or tool.execute is None or tool.needs_approval is False:
            return None
        try:
            gated = tool.requires_approval(args)
        except Exception:
            gated = True
        if not gated:
            return None
        self.awaiting = True
        return {"type": "tool-approval-request", "approvalId": call_id, "toolCallId": call_id}

    async def settle(
        self, call_id: str, name: str, args: Mapping[str, Any], position: str, *, stored: bool
    ) -> Chunk | None:
        """Run (or replay, or refuse) a server tool call; its output chunk. A call ``stored``
        in the partial without its result joins the next request's items here."""
        if stored:
            self.produced.append(ToolCall(call_id, name, args))
        tool = self.tools.get(name)
        if tool is None or tool.execute is None:
            outcome_ok, value = False, f"no server tool named {name!r}"
        else:
            outcome = await run_tool(self.agent, tool, call_id, args, position)
            if outcome.status == "pending":  # no result yet: the reply ends, the call waits
                self.pending = True
                if stored:
                    self.produced.pop()
                return None
            outcome_ok, value = outcome.ok, outcome.value
        self.produced.append(ToolResult(call_id, name, value, not outcome_ok))
        if outcome_ok:
            return {"type": "tool-output-available", "toolCallId": call_id, "output": value}
        return {"type": "tool-output-error", "toolCallId": call_id, "errorText": str(value)}


def _one_start_per_step(partial: Mapping[str, Any] | None, step: int) -> Mapping[str, Any] | None:
    """The partial as the helpers below read it: one ``step-start`` per step of the loop. Every
    model call opens with one (as ``streamText``'s do), so a resumed step holds one more for
    each continuation. A ``step-start`` belongs to the step of the next tool call recorded after
    it (its ``step`` metadata), or to ``step``, the cut one; only a step's first is kept."""
    if not partial:
        return partial
    parts = list(partial.get("parts") or ())
    owners, following = [], step
    for part in reversed(parts):
        found = _agents_meta(part, "callProviderMetadata").get("step")
        following = found if isinstance(found, int) else following
        owners.append(following)
    seen: set[int] = set()
    kept = []
    for part, owner in zip(parts, reversed(owners), strict=True):
        if part.get("type") == "step-start":
            if owner in seen:
                continue
            seen.add(owner)
        kept.append(part)
    return {**partial, "parts": kept}


def _unsettled(
    partial: Mapping[str, Any] | None, state: str = "input-available"
) -> list[tuple[str, str, Mapping[str, Any], str]]:
    """Server tool calls of the partial in ``state`` (ledger-managed): persisted without a
    result, or (``approval-responded``) approved and not run yet."""
    found = []
    for part in (partial or {}).get("parts") or ():
        meta = _agents_meta(part, "callProviderMetadata")
        if meta.get("opId") and part.get("state") == state:
            name = str(part.get("type", ""))[5:] or str(part.get("toolName") or "")
            args = part.get("input") if isinstance(part.get("input"), Mapping) else {}
            found.append((str(part["toolCallId"]), name, args, str(meta.get("position"))))
    return found


def _denied_in_last_step(partial: Mapping[str, Any] | None) -> list[str]:
    """Server tool calls of the partial's last step a person denied: the continuation tells the
    client so (``tool-output-denied``, as ``streamText`` does); older steps' were told already."""
    parts = [p for p in (partial or {}).get("parts") or () if isinstance(p, Mapping)]
    starts = [i for i, p in enumerate(parts) if p.get("type") == "step-start"]
    return [
        str(p["toolCallId"])
        for p in parts[starts[-1] if starts else 0 :]
        if p.get("state") == "output-denied" and _agents_meta(p, "callProviderMetadata").get("opId")
    ]


def _held(partial: Mapping[str, Any] | None, step: int) -> tuple[bool, str, set[str]]:
    """Whether the partial holds step ``step``, the text it holds of it, and every call id."""
    parts = [p for p in (partial or {}).get("parts") or () if isinstance(p, Mapping)]
    steps = sum(1 for p in parts if p.get("type") == "step-start")
    ids = {str(p["toolCallId"]) for p in parts if p.get("toolCallId")}
    if steps < step + 1:  # the step's start never reached storage
        return False, "", ids
    last = max(i for i, p in enumerate(parts) if p.get("type") == "step-start")
    text = "".join(str(p.get("text") or "") for p in parts[last:] if p.get("type") == "text")
    return True, text, ids


def _step_calls(partial: Mapping[str, Any] | None) -> int:
    """How many tool calls the partial's last step holds (positions go on after them)."""
    parts = [p for p in (partial or {}).get("parts") or () if isinstance(p, Mapping)]
    starts = [i for i, p in enumerate(parts) if p.get("type") == "step-start"]
    return sum(1 for p in parts[starts[-1] if starts else 0 :] if p.get("toolCallId"))


async def _restore(reply: _Reply, plan: Plan) -> AsyncIterator[Chunk]:
    """What storage missed of an interrupted turn: its unsettled tool calls, settled from the
    ledger, and the rest of a step whose request had ended (from the checkpoint), re-emitted.
    Calls a person answered are settled here too: an approved one runs (once, by the ledger),
    a denied one is reported; a call still needing approval asks (again) instead of running."""
    for call_id in _denied_in_last_step(plan.partial):
        yield {"type": "tool-output-denied", "toolCallId": call_id}
    if _unsettled(plan.partial, "approval-requested"):
        reply.awaiting = True  # an answer is still missing: the model waits for all of them
    for call_id, name, args, position in _unsettled(plan.partial, "approval-responded"):
        if (chunk := await reply.settle(call_id, name, args, position, stored=True)) is not None:
            yield chunk
    for call_id, name, args, position in _unsettled(plan.partial):
        if (request := reply.gate(call_id, name, args)) is not None:
            yield request
        elif (chunk := await reply.settle(call_id, name, args, position, stored=True)) is not None:
            yield chunk
    cp = reply.checkpoint
    output = cp.output
    if plan.resume_step or not cp.done or output is None:
        return
    held, text, ids = _held(plan.partial, cp.step)
    if not held:
        yield reply.start_step()
    rest = str(output["text"])[len(text) :] if str(output["text"]).startswith(text) else ""
    if rest:
        for chunk in reply.text(TextDelta("restored", rest)):
            yield chunk
        for chunk in reply.close_text():
            yield chunk
    for call_id, name, args, position in output["calls"]:
        if call_id in ids:
            continue
        event = ToolCallDone(call_id, name, args)
        for chunk in reply.tool_call(event, cp.step, position):  # the call joins the items here
            yield chunk
        tool = reply.tools.get(name)
        if (request := reply.gate(call_id, name, args)) is not None:
            yield request
        elif tool is None or tool.execute is not None:
            if (
                chunk := await reply.settle(call_id, name, args, position, stored=False)
            ) is not None:
                yield chunk
    yield {"type": "finish-step"}


def _answered(partial: Mapping[str, Any] | None, calls: Sequence[Sequence[Any]]) -> bool:
    """Whether every call of ``calls`` has a result in the partial (a client answered)."""
    settled = {
        str(p.get("toolCallId"))
        for p in (partial or {}).get("parts") or ()
        if isinstance(p, Mapping) and str(p.get("state", "")).startswith("output-")
    }
    return all(str(c[0]) in settled for c in calls)


def _client_calls(reply: _Reply, calls: Sequence[Sequence[Any]]) -> bool:
    return any((t := reply.tools.get(str(c[1]))) is not None and t.execute is None for c in calls)


def _corrections(partial: Mapping[str, Any] | None) -> set[str]:
    """The ids of the corrections the partial holds already (the model reads them from it)."""
    return {
        str(p.get("id"))
        for p in (partial or {}).get("parts") or ()
        if isinstance(p, Mapping) and p.get("type") == CORRECTION_PART
    }


def _finish_failed(reply: _Reply, verdict: str | None) -> None:
    """A failed judgement ends the turn at its error chunk — the reader closes the reply
    there — so the checkpoint says "finished" before that chunk is yielded."""
    if verdict == "failed":
        reply.checkpoint.finished = True
        reply.save()


def _judge(
    reply: _Reply, schema: OutputSchema, text: str, step: int, max_steps: int, stored: set[str]
) -> tuple[str, list[Chunk]]:
    """Step ``step``'s final answer against ``schema``: ``("ok", [output part])``,
    ``("retry", [correction part])`` — the correction joins the next request's items, unless
    the stored partial holds it already — or, with no step left, ``("failed", [its part, an
    error chunk])``."""
    try:
        value = schema.validate(text)
    except OutputSchemaError as exc:
        part_id = f"correction-{step}"
        data: dict[str, Any] = {"step": step, "error": str(exc)}
        if step + 1 >= max_steps:
            error = (f"{exc} — no answer matched the output schema within max_steps="
                     f"{max_steps}")  # fmt: skip
            return "failed", [{"type": CORRECTION_PART, "id": part_id, "data": data},
                              {"type": "error", "errorText": error}]  # fmt: skip
        data["correction"] = correction(exc)
        if part_id not in stored:
            reply.produced.append(Text("user", data["correction"]))
        return "retry", [{"type": CORRECTION_PART, "id": part_id, "data": data}]
    return "ok", [{"type": OUTPUT_PART, "id": "output", "data": value}]


async def model_reply(
    agent: Any,
    options: Any,
    provider: Provider,
    *,
    tools: Sequence[Tool] = (),
    system: str | None = None,
    max_steps: int = 10,
    should_stop: Callable[[], bool] | None = None,
    output_schema: Any = None,
) -> AsyncIterator[Chunk]:
    """The reply to ``agent``'s conversation as UI-message chunks (see the module docstring);
    ``options`` is the ``ChatMessageOptions`` ``on_chat_message`` received. ``should_stop``
    is asked before every step after the first: True ends the reply there (a soft interrupt,
    ``finishReason: "other"``), its finished steps kept. ``output_schema`` (a JSON Schema, a
    pydantic model class or an :class:`~agents.providers.output.OutputSchema`): the final
    answer must be JSON it accepts (see the module docstring)."""
    schema = as_output_schema(output_schema) if output_schema is not None else None
    messages = agent.messages
    saved = load_checkpoint(agent.ctx.storage.kv)
    new_id = new_assistant_id(agent._core.now())  # the package's assistant_<ms>_<random>
    plan = plan_turn(saved, provider.name, messages, continuation=bool(options.continuation),
                     new_id=new_id)  # fmt: skip
    plan = Plan(plan.checkpoint, _one_start_per_step(plan.partial, plan.checkpoint.step),
                plan.resume_step)  # fmt: skip
    reply = _Reply(agent, provider, tools, plan)
    cp: TurnCheckpoint = reply.checkpoint
    stored = _corrections(plan.partial)
    verdict: str | None = None  # the output schema's, once the final answer was judged
    cut_message = cp.message_id  # the cut request's operation keeps its id (and key)
    if plan.partial is None and cp is saved:
        cp.message_id = new_id  # a retry answers in a new message, as the package's does
    overflow = resolve_context_overflow(getattr(agent, "context_overflow", None))
    yield {"type": "start", "messageId": cp.message_id}
    async for chunk in _restore(reply, plan):
        yield chunk
    resume: dict[str, Any] | None = None
    reason, ended = "stop", False
    if reply.pending:  # still waiting for a call that goes on elsewhere
        reason, ended = "tool-calls", True
    if plan.resume_step:
        handle = cp.handle or {}
        if provider.strategy == "retrieve" and handle.get("responseId"):
            held = _held(plan.partial, cp.step)[0]
            after, reply.skip = _resume_point(plan.partial, held, cp.cursor)
            resume = {"responseId": handle["responseId"], "after": after}
        elif not provider.honours_idempotency:
            cp.request += 1  # a new request for the cut step: a new operation
        # else: the same request again, under the same idempotency key (collapsed upstream)
    elif cp.done:
        done_calls = (cp.output or {}).get("calls") or []
        reason = str((cp.output or {}).get("reason") or "stop")
        ended = reason != "tool-calls" or not done_calls
        if not ended and _client_calls(reply, done_calls):
            ended = not _answered(plan.partial, done_calls)  # the browser has yet to answer
        elif ended and schema is not None:  # the final answer stored, maybe not yet judged
            text = str((cp.output or {}).get("text") or "")
            verdict, chunks = _judge(reply, schema, text, cp.step, max_steps, stored)
            _finish_failed(reply, verdict)
            for chunk in chunks:
                yield chunk
            ended = verdict != "retry"
        if not ended and reply.awaiting:  # a call of the restored step awaits its approval
            ended = True
        if not ended:
            cp.next_step()
    if reply.awaiting and not ended:  # a call of the partial still awaits its approval
        reason, ended = "tool-calls", True
    compactions, last_input = 0, None
    first = True
    cursors = provider.strategy == "retrieve"  # only a stored response is re-attached to
    while not ended and cp.step < max_steps:
        if not first and should_stop is not None and should_stop():
            reason = "other"
            break
        if (overflow is not None and overflow.max_input_tokens is not None
                and last_input is not None and compactions < overflow.max_compactions
                and last_input >= overflow.max_input_tokens * overflow.headroom):  # fmt: skip
            if await compact_transcript(agent, options.request_id, "proactive"):
                compactions += 1
                messages = agent.messages
        cp.done = False
        reply.save()
        held, held_text, _ = (
            _held(plan.partial, cp.step) if first and plan.resume_step else (False, "", set())
        )
        op_message = cut_message if first and plan.resume_step else cp.message_id
        request = {"model": provider.model, "message": op_message, "step": cp.step,
                   "request": cp.request}  # fmt: skip
        op = agent.operation(f"llm:{provider.name}", request, turn=op_message,
                             idempotent=provider.honours_idempotency)  # fmt: skip
        calls: list[ToolCallDone] = []
        finished: Finished | None = None
        reply.step_text = held_text  # the step's output is its whole text, stored part included
        base = _step_calls(plan.partial) if held else 0  # calls of the step stored already
        async with op:
            call = ModelCall(merge_texts([*items_from_messages(messages), *reply.produced]),
                             system, reply.specs, idempotency_key=op.id, resume=resume,
                             output=schema)  # fmt: skip
            meter = RequestMeter(agent, provider, cp.message_id, op.id)
            with meter:
                stepped = False
                async for event in provider.stream(call):
                    if not stepped:  # as streamText: a step starts once the model answers,
                        stepped = True  # and every call starts one (a resumed step's too)
                        yield reply.start_step()
                    if isinstance(event, Started):
                        if event.handle and dict(event.handle) != cp.handle:
                            cp.handle, cp.cursor = dict(event.handle), None  # its own cursors
                            reply.save()
                        meter.started(event.input_tokens)
                    elif isinstance(event, TextDelta):
                        chunks = reply.text(event)
                        if chunks and meter.delta() and event.seq is not None and cursors:
                            cp.mark(event.seq, len(reply.step_text))
                            reply.save()
                        for chunk in chunks:
                            yield chunk
                    elif isinstance(event, ToolCallDone):
                        meter.delta()
                        position = f"{cp.message_id}/{cp.step}/{base + len(calls)}"
                        for chunk in reply.tool_call(event, cp.step, position):
                            yield chunk
                        calls.append(event)
                    else:
                        finished = event
                last_input = meter.finished(finished.usage if finished else None)
            op.complete({"reason": finished.reason if finished else None, "handle": cp.handle})
        for chunk in reply.close_text():
            yield chunk
        assert finished is not None  # a stream without its end raises ProviderStreamError
        reason = finished.reason
        step_text = reply.step_text
        positions = [f"{cp.message_id}/{cp.step}/{base + i}" for i in range(len(calls))]
        cp.done, cp.output = (
            True,
            {
                "text": step_text,
                "calls": [
                    [c.call_id, c.name, c.args, p] for c, p in zip(calls, positions, strict=True)
                ],
                "reason": reason,
            },
        )
        reply.save()
        first, resume = False, None
        for event, position in zip(calls, positions, strict=True):
            tool = reply.tools.get(event.name)
            if (ask := reply.gate(event.call_id, event.name, event.args)) is not None:
                yield ask  # not run: the person answers, a continuation runs it
            elif tool is None or tool.execute is not None:
                settled = await reply.settle(event.call_id, event.name, event.args, position,
                                             stored=False)  # fmt: skip
                if settled is not None:
                    yield settled
        # As streamText: a step's approval requests and tool outputs belong to it (its finish
        # waits for the tools), so finish-step follows them.
        yield {"type": "finish-step"}
        final = reason != "tool-calls" or not calls
        if final and schema is not None:
            verdict, chunks = _judge(reply, schema, step_text, cp.step, max_steps, stored)
            _finish_failed(reply, verdict)
            for chunk in chunks:
                yield chunk
            if verdict == "retry":
                cp.next_step()
                continue
            break
        if final or _client_calls(reply, cp.output["calls"]):
            break
        if reply.pending or reply.awaiting:  # the reply ends: a continuation settles the calls
            break
        cp.next_step()
    else:  # the step budget is spent (no break): still calling tools at the last step
        if schema is not None and verdict is None and not ended:
            verdict = "failed"
            _finish_failed(reply, verdict)
            yield {"type": "error", "errorText": (
                f"output {schema.name!r}: no answer within max_steps={max_steps} — the model "
                "was still calling tools at its last step")}  # fmt: skip
    cp.finished = True
    reply.save()
    if verdict == "failed":
        return  # the error chunk ends the reply (its reader stops there): no finish
    yield {"type": "finish", "finishReason": reason}
