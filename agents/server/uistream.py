"""The session's stream as the AI SDK's UI-message stream (``ai``'s ``useChat`` reads it).

The v7 chat routes answer with this format (``x-vercel-ai-ui-message-stream: v1``): SSE
``data: <chunk>`` lines of UI-message chunks, ending with ``data: [DONE]``. It is a *view* of
the session's stored stream (:class:`~.streams.SessionStream`), translated event by event, so a
client that reloads mid-run re-attaches (``GET /chat/{id}/stream``) and gets the same message
from its start, then the live rest — nothing is kept per client in the object.

==================================== =========================================================
session chunk (this session's)        UI-message chunk(s)
==================================== =========================================================
``message_start {messageId}``         ``start {messageId}`` (once per response)
``text_delta``                        ``start-step`` (first in a step), ``text-start``,
                                      ``text-delta`` (``text-end`` when something else follows)
``tool_call_start``                   ``tool-input-available {toolCallId, toolName, input}``
``tool_result``                       ``tool-output-available`` / ``tool-output-error`` /
                                      ``tool-output-denied`` (a call a person denied)
``tool_approval_request``             ``tool-approval-request {approvalId, toolCallId}``
``step_completed``                    ``finish-step``
``run_suspended``                     ``finish``
``run_completed`` / ``run_interrupted`` ``finish``
``run_failed``                        ``error {errorText}``
the terminal or pause event           ``data: [DONE]``, and the response closes
==================================== =========================================================

A sub-agent's chunks (another ``agentId``) and the run's bookkeeping chunks are not part of the
message and are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from .streams import SseFormat

__all__ = ["UI_STREAM_HEADERS", "UIMessageFormat"]

#: What marks a response as a UI-message stream for the AI SDK's transport.
UI_STREAM_HEADERS: Mapping[str, str] = {"x-vercel-ai-ui-message-stream": "v1"}


def _data(chunk: Mapping[str, Any]) -> str:
    return f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n"


class UIMessageFormat(SseFormat):
    """One response's translation (see the module docstring); stateful, one per response.

    ``agent_id`` is the session whose chunks make the message; ``message_id`` starts the
    response with ``start`` at once (a continuation of an assistant message the client holds)."""

    shared: ClassVar[bool] = False
    headers: ClassVar[Mapping[str, str]] = UI_STREAM_HEADERS

    def __init__(
        self,
        agent_id: str,
        *,
        message_id: str | None = None,
    ) -> None:
        self._agent_id = agent_id
        self._message_id = message_id
        self._started = False
        self._in_step = False
        self._text: str | None = None
        self._texts = 0
        self._finished = False

    def head(self) -> str:
        if self._message_id is None:
            return ""
        self._started = True
        return _data({"type": "start", "messageId": self._message_id})

    def _start(self, message_id: str | None = None) -> str:
        if self._started:
            return ""
        self._started = True
        return _data({"type": "start", **({"messageId": message_id} if message_id else {})})

    def _step(self) -> str:
        if self._in_step:
            return ""
        self._in_step = True
        return self._start() + _data({"type": "start-step"})

    def _close_text(self) -> str:
        if self._text is None:
            return ""
        text, self._text = self._text, None
        return _data({"type": "text-end", "id": text})

    def chunk(self, sequence: int, chunk_text: str) -> str:
        chunk = json.loads(chunk_text)
        if chunk.get("agentId") not in (None, self._agent_id):
            return ""  # a sub-agent's own chunk: not part of this message
        kind = chunk.get("type")
        if kind == "message_start":
            return self._start(chunk.get("messageId"))
        if kind == "text_delta":
            out = self._step()
            if self._text is None:
                self._text = f"t{sequence}-{self._texts}"
                self._texts += 1
                out += _data({"type": "text-start", "id": self._text})
            return out + _data({"type": "text-delta", "id": self._text, "delta": chunk["delta"]})
        if kind == "tool_call_start":
            return self._close_text() + self._step() + _data({
                "type": "tool-input-available", "toolCallId": chunk["toolCallId"],
                "toolName": chunk["toolName"], "input": chunk.get("input")})  # fmt: skip
        if kind == "tool_result":
            out = self._close_text() + self._step()
            if chunk.get("denied"):
                denied = {"type": "tool-output-denied", "toolCallId": chunk["toolCallId"]}
                return out + _data(denied)
            if chunk.get("error") is not None:
                return out + _data({"type": "tool-output-error", "toolCallId": chunk["toolCallId"],
                                    "errorText": str(chunk["error"])})  # fmt: skip
            return out + _data({"type": "tool-output-available", "toolCallId": chunk["toolCallId"],
                                "output": chunk.get("result")})  # fmt: skip
        if kind == "step_completed":
            out = self._close_text()
            if self._in_step:
                self._in_step = False
                out += _data({"type": "finish-step"})
            return out
        if kind == "tool_approval_request":
            return self._close_text() + _data({"type": "tool-approval-request",
                                               "approvalId": chunk.get("approvalId"),
                                               "toolCallId": chunk["toolCallId"]})  # fmt: skip
        if kind == "run_suspended":
            return self._close_text() + self._finish("tool-calls")
        if kind in ("run_completed", "run_interrupted"):
            return self._close_text() + self._finish("stop" if kind == "run_completed" else "other")
        if kind == "run_failed":
            return (
                self._close_text()
                + self._start()
                + _data({"type": "error", "errorText": str(chunk.get("error"))})
            )
        return ""

    def _finish(self, reason: str) -> str:
        if self._finished:
            return ""
        self._finished = True
        out = self._start()
        if self._in_step:
            self._in_step = False
            out += _data({"type": "finish-step"})
        return out + _data({"type": "finish", "finishReason": reason})

    def end(self, event_text: str) -> str:
        return self._close_text() + "data: [DONE]\n\n"
