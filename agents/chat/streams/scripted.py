"""A deterministic model for examples and tests: a script in, the UI-message stream out.

:class:`ScriptedModel` streams what ``streamText(...).toUIMessageStream()`` would for a model
that produced the script's steps (research §4.1) — the same stand-in the research harness used
(``MockLanguageModelV3`` over ``simulateReadableStream``), so a Python ``AIChatAgent`` driven by
it can be compared frame for frame with Cloudflare's. A script is a list of steps:

* :class:`Text` / :class:`Reasoning` — a text or reasoning block of deltas (ids ``t0``, ``t1``…
  and ``r0``, ``r1``… in order of appearance);
* :class:`ToolCall` — a client tool (no output: the reply ends ``finishReason: "tool-calls"``),
  a server tool (with its output) or a tool awaiting approval;
* :class:`Chunks` — any chunks verbatim (data parts, sources…);
* :class:`NextStep` — ends a step and starts the next (``finish-step``, ``start-step``);
* :class:`Delay` — a pause, through the injectable ``sleep`` (tests pass one that needs no real
  time); :class:`Stall` — waits until the turn is aborted or cancelled (a hung provider);
* :class:`Fail` — an in-band ``error`` chunk (the model reported an error), which ends the
  stream; :class:`Raise` — the stream raises (the provider connection broke).

``error_at=k`` / ``raise_at=k`` do the same at the k-th chunk (from 0) of any script. Setting the
``abort`` event ends the stream with ``{"type":"abort"}``, as ``streamText`` does when its abort
signal fires. :meth:`ScriptedModel.by_last_user_text` picks the script from the conversation,
and :func:`demo_model` has the research harness's scripts (``"hi"`` → ``Hello, world``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from workers import Response

from ..transcript.chunks import (
    ABORT,
    ERROR,
    FINISH,
    FINISH_STEP,
    REASONING_DELTA,
    REASONING_END,
    REASONING_START,
    START,
    START_STEP,
    TEXT_DELTA,
    TEXT_END,
    TEXT_START,
    Chunk,
)
from .producers import NO_OUTPUT, tool_call, ui_message_response

__all__ = [
    "Chunks",
    "Delay",
    "Fail",
    "NextStep",
    "Raise",
    "Reasoning",
    "Script",
    "ScriptedModel",
    "Stall",
    "Step",
    "Text",
    "ToolCall",
    "demo_model",
    "last_user_text",
]


class Text:
    """A text block: ``text-start``, one ``text-delta`` per (non-empty) delta, ``text-end``;
    ``delay_ms`` pauses before every delta but the first (a model that streams slowly)."""

    __slots__ = ("delay_ms", "deltas")

    def __init__(self, *deltas: str, delay_ms: float = 0) -> None:
        self.deltas = deltas
        self.delay_ms = delay_ms

    def __repr__(self) -> str:
        return f"{type(self).__name__}{self.deltas!r}"


class Reasoning(Text):
    """A reasoning block: ``reasoning-start``, ``reasoning-delta``s, ``reasoning-end``."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call; see :func:`agents.chat.streams.producers.tool_call` for the chunks. Without
    ``call_id`` the calls of a stream are ``call_1``, ``call_2``…"""

    name: str
    input: Any
    call_id: str | None = None
    output: Any = NO_OUTPUT
    input_deltas: Sequence[str] | None = None
    stream_input: bool = True
    approval_id: str | None = None


@dataclass(frozen=True, slots=True)
class Chunks:
    """These chunks, as they are."""

    chunks: Sequence[Chunk]


@dataclass(frozen=True, slots=True)
class NextStep:
    """End this step and start another (a multi-step reply, e.g. after a server tool)."""


@dataclass(frozen=True, slots=True)
class Delay:
    """Pause ``ms`` milliseconds (through the model's ``sleep``) before the next step."""

    ms: float


@dataclass(frozen=True, slots=True)
class Stall:
    """Produce nothing more until the turn is aborted (then ``abort``) or cancelled."""


@dataclass(frozen=True, slots=True)
class Fail:
    """An in-band ``error`` chunk, then the stream ends (``finishReason: "error"``)."""

    error_text: str = "An error occurred."


@dataclass(frozen=True, slots=True)
class Raise:
    """The stream raises ``error`` here."""

    error: BaseException = field(default_factory=lambda: RuntimeError("scripted model failure"))


Step = Text | ToolCall | Chunks | NextStep | Delay | Stall | Fail | Raise
#: A model's reply, step by step.
Script = Sequence[Step]
Sleep = Callable[[float], Awaitable[Any]]


class _Aborted(Exception):
    """The turn's abort event fired: the stream ends with an ``abort`` chunk."""


class ScriptedModel:
    """Streams a script as a UI-message stream (see the module docstring).

    ``script`` is a :data:`Script` or a function of the conversation returning one.
    ``message_id`` puts a ``messageId`` on ``start`` (as ``generateMessageId`` would).
    """

    def __init__(
        self,
        script: Script | Callable[[Sequence[Any]], Script],
        *,
        sleep: Sleep = asyncio.sleep,
        error_at: int | None = None,
        error_text: str = "An error occurred.",
        raise_at: int | None = None,
        exception: BaseException | None = None,
        message_id: str | None = None,
    ) -> None:
        self._script = script
        self._sleep = sleep
        self.error_at = error_at
        self.error_text = error_text
        self.raise_at = raise_at
        self.exception = exception
        self.message_id = message_id

    @classmethod
    def by_last_user_text(
        cls,
        scripts: Mapping[str, Script],
        *,
        default: Script,
        continuation: Script | None = None,
        **options: Any,
    ) -> ScriptedModel:
        """A model that answers with ``scripts[<text of the last user message>]`` (else
        ``default``), or ``continuation`` when the conversation ends with an assistant message
        (a tool-result or recovery continuation)."""

        def pick(messages: Sequence[Any]) -> Script:
            last = messages[-1] if messages else None
            if continuation is not None and isinstance(last, dict):
                if last.get("role") == "assistant":
                    return continuation
            return scripts.get(last_user_text(messages), default)

        return cls(pick, **options)

    def script_for(self, messages: Sequence[Any]) -> Script:
        return self._script(messages) if callable(self._script) else self._script

    def response(self, messages: Sequence[Any], *, abort: asyncio.Event | None = None) -> Response:
        """:meth:`stream` as a streamed SSE ``Response`` (what ``on_chat_message`` returns)."""
        return ui_message_response(self.stream(messages, abort=abort))

    async def stream(
        self, messages: Sequence[Any], *, abort: asyncio.Event | None = None
    ) -> AsyncIterator[Chunk]:
        """The UI-message stream of the script chosen for ``messages``."""
        index = 0
        try:
            async with aclosing(self._chunks(self.script_for(messages), abort)) as chunks:
                async for chunk in chunks:
                    if abort is not None and abort.is_set():
                        raise _Aborted
                    if self.raise_at is not None and index == self.raise_at:
                        raise self.exception or RuntimeError("scripted model failure")
                    if self.error_at is not None and index == self.error_at:
                        for failed in _failure(self.error_text):
                            yield failed
                        return
                    yield chunk
                    index += 1
        except _Aborted:
            yield {"type": ABORT}

    async def _chunks(
        self, script: Script, abort: asyncio.Event | None
    ) -> AsyncGenerator[Chunk, None]:
        yield (
            {"type": START}
            if self.message_id is None
            else {
                "type": START,
                "messageId": self.message_id,
            }
        )
        yield {"type": START_STEP}
        counters = {"t": 0, "r": 0, "call": 0}
        called_tool = False
        for step in script:
            if isinstance(step, Text):
                start, delta, end = _block_kinds(step, counters)
                yield start
                for i, text in enumerate(t for t in step.deltas if t):
                    if i and step.delay_ms:
                        await self._pause(step.delay_ms / 1000, abort)
                    yield {**delta, "delta": text}
                yield end
            elif isinstance(step, ToolCall):
                counters["call"] += 1
                called_tool = True
                for chunk in tool_call(
                    step.name,
                    step.input,
                    tool_call_id=step.call_id or f"call_{counters['call']}",
                    output=step.output,
                    input_deltas=step.input_deltas,
                    stream_input=step.stream_input,
                    approval_id=step.approval_id,
                ):
                    yield chunk
            elif isinstance(step, Chunks):
                for chunk in step.chunks:
                    yield dict(chunk)
            elif isinstance(step, NextStep):
                yield {"type": FINISH_STEP}
                yield {"type": START_STEP}
                called_tool = False
            elif isinstance(step, Delay):
                await self._pause(step.ms / 1000, abort)
            elif isinstance(step, Stall):
                await _stall(abort)
            elif isinstance(step, Fail):
                for chunk in _failure(step.error_text):
                    yield chunk
                return
            else:
                raise step.error
        yield {"type": FINISH_STEP}
        yield {"type": FINISH, "finishReason": "tool-calls" if called_tool else "stop"}

    async def _pause(self, seconds: float, abort: asyncio.Event | None) -> None:
        """Sleep, unless (or until) the abort event fires."""
        if abort is None:
            await self._sleep(seconds)
            return
        if abort.is_set():
            raise _Aborted
        sleeper = asyncio.ensure_future(self._sleep(seconds))
        waiter = asyncio.ensure_future(abort.wait())
        try:
            await asyncio.wait({sleeper, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            waiter.cancel()
        if abort.is_set():
            raise _Aborted


async def _stall(abort: asyncio.Event | None) -> None:
    if abort is None:
        await asyncio.get_running_loop().create_future()  # until cancelled
    else:
        await abort.wait()
        raise _Aborted


def _block_kinds(step: Text, counters: dict[str, int]) -> tuple[Chunk, Chunk, Chunk]:
    """The start chunk, a delta template and the end chunk of the next text/reasoning block."""
    if isinstance(step, Reasoning):
        block_id, kinds = f"r{counters['r']}", (REASONING_START, REASONING_DELTA, REASONING_END)
        counters["r"] += 1
    else:
        block_id, kinds = f"t{counters['t']}", (TEXT_START, TEXT_DELTA, TEXT_END)
        counters["t"] += 1
    return (
        {"type": kinds[0], "id": block_id},
        {"type": kinds[1], "id": block_id},
        {"type": kinds[2], "id": block_id},
    )


def _failure(error_text: str) -> list[Chunk]:
    """An in-band model error: ``streamText`` emits the error, then closes the step."""
    return [
        {"type": ERROR, "errorText": error_text},
        {"type": FINISH_STEP},
        {"type": FINISH, "finishReason": "error"},
    ]


def last_user_text(messages: Sequence[Any]) -> str:
    """The text parts of the last user message, joined (``""`` when there is none)."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            parts = message.get("parts")
            if not isinstance(parts, list):
                return ""
            return "".join(
                p["text"]
                for p in parts
                if isinstance(p, dict)
                and p.get("type") == "text"
                and isinstance(p.get("text"), str)
            )
    return ""


def demo_model(*, sleep: Sleep = asyncio.sleep, delay_ms: float = 50) -> ScriptedModel:
    """The research harness's model (research Appendix A.1), for the example app:

    ``"hi"`` (and anything unknown) → ``Hello``, ``, ``, ``world``; ``"slow"`` → 25 deltas
    ``w0 ``…``w24 `` ``delay_ms`` apart; ``"tool"`` → a ``getWeather`` client-tool call
    ``{"city":"Paris"}``; ``"approve"`` → a ``dangerous`` call ``{"x":21}`` awaiting approval;
    ``"boom"`` → ``custom error: model exploded``; ``"throw"`` → the stream raises; a
    continuation → ``It is ``, ``sunny.``.
    """
    scripts: dict[str, Script] = {
        "hi": [Text("Hello", ", ", "world")],
        "slow": [Text(*(f"w{i} " for i in range(25)), delay_ms=delay_ms)],
        "tool": [ToolCall("getWeather", {"city": "Paris"}, input_deltas=['{"city":', '"Paris"}'])],
        "approve": [
            ToolCall(
                "dangerous",
                {"x": 21},
                call_id="call_a",
                stream_input=False,
                approval_id="approval_1",
            )
        ],
        "boom": [Fail("custom error: model exploded")],
        "throw": [Raise(RuntimeError("onChatMessage threw"))],
    }
    return ScriptedModel.by_last_user_text(
        scripts,
        default=scripts["hi"],
        continuation=[Text("It is ", "sunny.")],
        sleep=sleep,
    )
