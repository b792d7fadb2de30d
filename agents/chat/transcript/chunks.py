"""The AI SDK's UI-message stream: chunk types, the SSE framing, and an incremental decoder.

``on_chat_message`` answers with a ``Response`` whose body is a *UI-message stream*: the AI SDK's
(``ai`` 6.0.326) JSON chunks, each framed as one server-sent event (research §4.1, §4.2)::

    data: {"type":"start"}\\n\\n
    data: {"type":"start-step"}\\n\\n
    data: {"type":"text-start","id":"t0"}\\n\\n
    data: {"type":"text-delta","id":"t0","delta":"Hello"}\\n\\n
    ...
    data: [DONE]\\n\\n

The chat agent reads that body back chunk by chunk, so this module holds both halves: the
encoder a producer uses (:func:`encode_sse`, :data:`SSE_DONE`, :data:`UI_MESSAGE_STREAM_HEADERS`)
and the :class:`SseDecoder` the agent feeds with whatever byte slices the body's reader returns.

The decoder deliberately differs from the SDK's ``_streamSSEReply`` in one way: the SDK decodes
each read on its own (``decoder.decode(value)`` without ``{stream: true}``) and splits it on
``"\\n"``, so a ``data:`` line — or a multi-byte character — cut in two by the transport is
silently lost. Here a partial line waits for the rest of it, and UTF-8 is decoded incrementally.
For a body that arrives one event per read (what ``toUIMessageStreamResponse`` produces and what
every test of the SDK sees) the chunks are the same.
"""

from __future__ import annotations

import codecs
import json
from typing import Any, Final

from ...core.protocol import dumps

__all__ = [
    "ABORT",
    "DATA_PREFIX",
    "ERROR",
    "FILE",
    "FINISH",
    "FINISH_STEP",
    "MESSAGE_METADATA",
    "REASONING_DELTA",
    "REASONING_END",
    "REASONING_START",
    "SOURCE_DOCUMENT",
    "SOURCE_URL",
    "SSE_DONE",
    "START",
    "START_STEP",
    "STEP_START",
    "TEXT_DELTA",
    "TEXT_END",
    "TEXT_START",
    "TOOL_APPROVAL_REQUEST",
    "TOOL_INPUT_AVAILABLE",
    "TOOL_INPUT_DELTA",
    "TOOL_INPUT_ERROR",
    "TOOL_INPUT_START",
    "TOOL_OUTPUT_AVAILABLE",
    "TOOL_OUTPUT_DENIED",
    "TOOL_OUTPUT_ERROR",
    "UI_MESSAGE_STREAM_HEADERS",
    "Chunk",
    "SseDecoder",
    "encode_sse",
    "is_event_stream",
    "sse_text",
]

#: One UI-message stream chunk: a JSON object with a string ``type`` (research §4.1). Chunks are
#: plain dicts because the schema is open (``z.looseObject``: extra keys are allowed and kept)
#: and key order is part of what clients see (``JSON.stringify`` keeps insertion order).
Chunk = dict[str, Any]

# -- chunk types (research §4.1, ``uiMessageChunkSchema`` of ai 6.0.326) --------------------------
START: Final = "start"
START_STEP: Final = "start-step"
#: The part a ``start-step`` chunk leaves in a message (``applyChunkToParts`` accepts both names).
STEP_START: Final = "step-start"
TEXT_START: Final = "text-start"
TEXT_DELTA: Final = "text-delta"
TEXT_END: Final = "text-end"
REASONING_START: Final = "reasoning-start"
REASONING_DELTA: Final = "reasoning-delta"
REASONING_END: Final = "reasoning-end"
TOOL_INPUT_START: Final = "tool-input-start"
TOOL_INPUT_DELTA: Final = "tool-input-delta"
TOOL_INPUT_AVAILABLE: Final = "tool-input-available"
TOOL_INPUT_ERROR: Final = "tool-input-error"
TOOL_APPROVAL_REQUEST: Final = "tool-approval-request"
TOOL_OUTPUT_AVAILABLE: Final = "tool-output-available"
TOOL_OUTPUT_ERROR: Final = "tool-output-error"
TOOL_OUTPUT_DENIED: Final = "tool-output-denied"
SOURCE_URL: Final = "source-url"
SOURCE_DOCUMENT: Final = "source-document"
FILE: Final = "file"
#: Prefix of developer-defined ``data-<name>`` chunks (``{type, data, id?, transient?}``).
DATA_PREFIX: Final = "data-"
FINISH_STEP: Final = "finish-step"
FINISH: Final = "finish"
ERROR: Final = "error"
ABORT: Final = "abort"
MESSAGE_METADATA: Final = "message-metadata"

#: ``UI_MESSAGE_STREAM_HEADERS`` of ``ai`` (research §4.2), in the SDK's order.
UI_MESSAGE_STREAM_HEADERS: Final[dict[str, str]] = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "connection": "keep-alive",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}

#: The event ``JsonToSseTransformStream`` writes when the stream ends (research §4.2).
SSE_DONE: Final = b"data: [DONE]\n\n"

_DONE_PAYLOAD = "[DONE]"


def sse_text(chunk: Chunk) -> str:
    """``data: <JSON.stringify(chunk)>\\n\\n``, what ``JsonToSseTransformStream`` writes."""
    return f"data: {dumps(chunk)}\n\n"


def encode_sse(chunk: Chunk) -> bytes:
    """One chunk as one SSE event, UTF-8 encoded (research §4.2)."""
    return sse_text(chunk).encode()


def is_event_stream(content_type: str | None) -> bool:
    """Whether a reply is a UI-message stream rather than plain text (research §4.3).

    The SDK's exact test: the ``content-type`` header *contains* ``text/event-stream``
    (case-sensitively, as ``String.prototype.includes``); anything else — including no header —
    is a plain-text reply.
    """
    return content_type is not None and "text/event-stream" in content_type


class SseDecoder:
    """Turn the byte slices of an SSE body into chunks, whatever the slices' boundaries.

    ``feed(data)`` takes the next slice (``bytes`` or already-decoded ``str``) and returns the
    chunks of the lines it completed; ``finish()`` takes a last line that had no line ending.
    Per line, as the SDK reads it (research §4.3):

    * ``data: <json>`` (the space after the colon is optional, as in the SSE spec) yields the
      JSON value when it is an object with a string ``type``;
    * ``data: [DONE]``, empty lines, comments (``: keep-alive``) and other fields (``event:``,
      ``id:``, ``retry:``) yield nothing;
    * a ``data:`` line that is not valid JSON, not an object, or has no string ``type`` yields
      nothing and counts in :attr:`skipped` — the SDK drops such a line too (``JSON.parse``
      fails, or ``applyChunkToParts`` throws on the missing type, inside a ``try``).

    Each ``data:`` line is a chunk of its own (the SDK's line-based reading) rather than being
    joined with its neighbours into one event as a browser's ``EventSource`` would: the AI SDK
    writes one line per event, and a producer that writes several ``data:`` lines per event
    gets what it would get from the SDK.

    Lines end with ``\\n``, ``\\r\\n`` or ``\\r``. Bytes are decoded as UTF-8 incrementally (a
    character split between two slices is kept until its last byte arrives); a leading BOM is
    dropped and invalid bytes become U+FFFD, as with ``TextDecoder``.
    """

    __slots__ = ("_buffer", "_decoder", "_started", "skipped")

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._started = False
        #: How many ``data:`` lines were dropped as malformed (not JSON, not a chunk object).
        self.skipped = 0

    def feed(self, data: bytes | bytearray | memoryview | str) -> list[Chunk]:
        """The chunks completed by ``data`` (possibly none)."""
        if isinstance(data, str):
            # A str slice is already text; bytes still pending in the decoder (a cut character)
            # cannot be completed by it, so they are flushed (as U+FFFD) before it.
            text = self._decoder.decode(b"", final=True) + data
            self._decoder.reset()
        else:
            text = self._decoder.decode(bytes(data))
        return self._take(text, final=False)

    def finish(self) -> list[Chunk]:
        """The chunks of a last line that had no line ending (the body ended)."""
        return self._take(self._decoder.decode(b"", final=True), final=True)

    @property
    def pending(self) -> str:
        """Text received but not yet part of a complete line."""
        return self._buffer

    def _take(self, text: str, *, final: bool) -> list[Chunk]:
        if text and not self._started:
            self._started = True
            text = text.removeprefix("\ufeff")  # a BOM opens the stream, not its first line
        self._buffer += text
        return self._drain(final=final)

    def _drain(self, *, final: bool) -> list[Chunk]:
        chunks: list[Chunk] = []
        buffer = self._buffer
        start = 0
        length = len(buffer)
        while start < length:
            newline = buffer.find("\n", start)
            carriage = buffer.find("\r", start, newline if newline >= 0 else length)
            if carriage >= 0:
                end = carriage
                if carriage + 1 < length:
                    after = carriage + 2 if buffer[carriage + 1] == "\n" else carriage + 1
                elif final:
                    after = carriage + 1
                else:
                    break  # a "\r" at the end: wait to see whether "\n" follows
            elif newline >= 0:
                end, after = newline, newline + 1
            elif final:
                end = after = length
            else:
                break
            chunk = self._line(buffer[start:end])
            if chunk is not None:
                chunks.append(chunk)
            start = after
        self._buffer = buffer[start:]
        return chunks

    def _line(self, line: str) -> Chunk | None:
        if not line.startswith("data:"):
            return None  # empty line, comment, event:/id:/retry:, or noise
        payload = line[6:] if line.startswith("data: ") else line[5:]
        if payload == _DONE_PAYLOAD:
            return None
        try:
            value = json.loads(payload, parse_constant=_reject_constant)
        except ValueError:
            self.skipped += 1
            return None
        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            self.skipped += 1
            return None
        return value


def _reject_constant(name: str) -> Any:
    """``NaN``/``Infinity`` are not JSON (``JSON.parse`` refuses them; Python's would not)."""
    raise ValueError(f"{name} is not valid JSON")
