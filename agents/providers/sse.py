"""Server-sent events as the providers send them: ``event:``/``data:`` fields into events.

The chat layer's :class:`~agents.chat.transcript.chunks.SseDecoder` reads the AI SDK's UI-message
stream,
one JSON chunk per ``data:`` line. Provider streams need the whole event model of the SSE
specification (HTML §9.2.6): Anthropic names each event with ``event:``; OpenAI's chat
completions end with ``data: [DONE]``; a ``data`` field may span several lines. This decoder
is small, pure and incremental, because it has to run inside a Worker (Pyodide) as well as
under doemu: no HTTP client library's SSE helper is available there.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

__all__ = ["SseEvent", "SseEventDecoder"]

_EOL = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event: its ``event`` name (``"message"`` when unnamed) and ``data``."""

    event: str
    data: str
    id: str | None = None


class SseEventDecoder:
    """Feed byte slices, get the events they complete (slice boundaries do not matter)."""

    __slots__ = ("_buffer", "_data", "_decoder", "_event", "_id", "_started")

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._started = False

    def feed(self, data: bytes) -> list[SseEvent]:
        """The events completed by ``data`` (possibly none)."""
        text = self._decoder.decode(data)
        if text and not self._started:
            self._started = True
            text = text.removeprefix("\ufeff")
        self._buffer += text
        return self._lines()

    def finish(self) -> list[SseEvent]:
        """The body ended: a last event with no blank line after it is *not* dispatched (the
        specification's rule — a cut stream must not yield a half-received event)."""
        self._buffer += self._decoder.decode(b"", final=True)
        events = self._lines(final=True)  # a last "\r" ends its line: no "\n" can follow
        self._buffer = ""
        self._data = []
        return events

    def _lines(self, *, final: bool = False) -> list[SseEvent]:
        events: list[SseEvent] = []
        buffer = self._buffer
        start = 0
        while (match := _EOL.search(buffer, start)) is not None:
            if match.group() == "\r" and match.end() == len(buffer) and not final:
                break  # a "\r" at the end may be the first half of "\r\n": wait for more
            event = self._line(buffer[start : match.start()])
            start = match.end()
            if event is not None:
                events.append(event)
        self._buffer = buffer[start:]
        return events

    def _line(self, line: str) -> SseEvent | None:
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = SseEvent(self._event or "message", "\n".join(self._data), self._id)
            self._data = []
            self._event = ""
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None
