"""The chat protocol's WebSocket frames, as Cloudflare's published client speaks them.

Every frame is what ``@cloudflare/ai-chat`` 0.12.2 (on ``agents`` 0.32.0) puts on the wire, field
for field, so ``useAgentChat`` and ``WebSocketChatTransport`` work against a Python
``AIChatAgent`` unchanged. Server → client:

* ``cf_agent_use_chat_response`` ``{body, done, id, type, [seq], [outcome], [continuation],
  [messageIds]}`` (replayed ones add ``replay``/``replayComplete``) — one stream chunk
  (``body`` is the chunk's JSON text and ``seq`` its index in the request's stream), or a
  terminal or control frame.
  ``outcome`` is ``aborted``, ``error``, ``skipped``, ``recovering`` or ``completed`` (only for
  the "no response" case); absent means completed. ``messageIds`` (terminal frames only) names
  the trailing user messages of the request.
* ``cf_agent_chat_messages`` ``{messages, type}`` — a transcript snapshot.
* ``cf_agent_chat_clear`` ``{type}``; ``cf_agent_message_updated`` ``{type, message}``.
* The resume handshake: ``cf_agent_stream_resuming`` ``{type, id, [probeId]}``,
  ``cf_agent_stream_resume_none`` ``{type, [reason], [probeId]}`` (``reason`` ``idle``),
  ``cf_agent_stream_pending`` ``{type, [id], [probeId]}``.
* ``cf_agent_chat_recovering`` ``{type, recovering, [id]}``.

Client → server frames are parsed by :func:`parse_chat_frame` into :class:`ChatFrame`; anything
else (binary, not JSON, no known ``type``) is not a chat frame and goes to the agent's own
``on_message``, as in the SDK.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ...core.protocol import dumps

__all__ = [
    "CHAT_CLEAR",
    "CHAT_MESSAGES",
    "CHAT_RECOVERING",
    "CHAT_REQUEST_CANCEL",
    "MESSAGE_UPDATED",
    "STREAM_PENDING",
    "STREAM_RESUME_ACK",
    "STREAM_RESUME_NONE",
    "STREAM_RESUME_REQUEST",
    "STREAM_RESUMING",
    "TOOL_APPROVAL",
    "TOOL_ERROR",
    "TOOL_RESULT",
    "USE_CHAT_REQUEST",
    "USE_CHAT_RESPONSE",
    "ChatFrame",
    "Outcome",
    "clear_frame",
    "message_updated_frame",
    "messages_frame",
    "parse_chat_frame",
    "recovering_frame",
    "response_frame",
    "resume_none_frame",
    "resuming_frame",
    "stream_pending_frame",
    "tool_error_frame",
]

USE_CHAT_REQUEST: Final = "cf_agent_use_chat_request"
USE_CHAT_RESPONSE: Final = "cf_agent_use_chat_response"
CHAT_MESSAGES: Final = "cf_agent_chat_messages"
CHAT_CLEAR: Final = "cf_agent_chat_clear"
CHAT_REQUEST_CANCEL: Final = "cf_agent_chat_request_cancel"
STREAM_RESUMING: Final = "cf_agent_stream_resuming"
STREAM_RESUME_ACK: Final = "cf_agent_stream_resume_ack"
STREAM_RESUME_REQUEST: Final = "cf_agent_stream_resume_request"
STREAM_RESUME_NONE: Final = "cf_agent_stream_resume_none"
STREAM_PENDING: Final = "cf_agent_stream_pending"
TOOL_RESULT: Final = "cf_agent_tool_result"
TOOL_APPROVAL: Final = "cf_agent_tool_approval"
MESSAGE_UPDATED: Final = "cf_agent_message_updated"
#: This library's addition: the sender of an approval that changed nothing learns why (the SDK
#: only logs it). The published client ignores frame types it does not know.
TOOL_ERROR: Final = "cf_agent_tool_error"
CHAT_RECOVERING: Final = "cf_agent_chat_recovering"

Outcome = Literal["completed", "error", "aborted", "skipped", "recovering"]

_INCOMING = frozenset(
    {
        USE_CHAT_REQUEST,
        CHAT_MESSAGES,
        CHAT_CLEAR,
        CHAT_REQUEST_CANCEL,
        STREAM_RESUME_REQUEST,
        STREAM_RESUME_ACK,
        TOOL_RESULT,
        TOOL_APPROVAL,
    }
)


def response_frame(
    request_id: str,
    body: str = "",
    *,
    done: bool = False,
    error: bool = False,
    continuation: bool = False,
    seq: int | None = None,
    outcome: Outcome | None = None,
    message_ids: list[str] | None = None,
) -> str:
    """A live ``cf_agent_use_chat_response`` frame, keys in the published package's order.

    Optional keys appear only when set. An in-band error (``error`` and not ``done``) leads with
    ``error``; a thrown one (``error`` and ``done``) has it after ``done``; ``seq`` and
    ``outcome`` come before ``continuation``, ``messageIds`` last (research §1.2). Replayed
    frames have their own builders (:mod:`agents.chat.streams.resumable`).
    """
    frame: dict[str, Any] = {}
    if error and not done:
        frame["error"] = True
    frame["body"] = body
    frame["done"] = done
    if error and done:
        frame["error"] = True
    frame["id"] = request_id
    frame["type"] = USE_CHAT_RESPONSE
    if seq is not None:
        frame["seq"] = seq
    if outcome is not None:
        frame["outcome"] = outcome
    if continuation:
        frame["continuation"] = True
    if message_ids:
        frame["messageIds"] = list(message_ids)
    return dumps(frame)


def messages_frame(messages: list[dict[str, Any]]) -> str:
    return dumps({"messages": messages, "type": CHAT_MESSAGES})


def clear_frame() -> str:
    return dumps({"type": CHAT_CLEAR})


def tool_error_frame(tool_call_id: Any, answer: str, error: str) -> str:
    """To a tool answer's sender only: ``answer`` (``"result"`` / ``"approval"``) for call
    ``tool_call_id`` was refused, and ``error`` says why (it names the call)."""
    return dumps({"type": TOOL_ERROR, "toolCallId": tool_call_id, "answer": answer,
                  "error": error})  # fmt: skip


def message_updated_frame(message: dict[str, Any]) -> str:
    return dumps({"type": MESSAGE_UPDATED, "message": message})


def resuming_frame(request_id: str, probe_id: str | None = None) -> str:
    frame: dict[str, Any] = {"type": STREAM_RESUMING, "id": request_id}
    if probe_id is not None:
        frame["probeId"] = probe_id
    return dumps(frame)


def resume_none_frame(reason: str | None = "idle", probe_id: str | None = None) -> str:
    frame: dict[str, Any] = {"type": STREAM_RESUME_NONE}
    if reason is not None:
        frame["reason"] = reason
    if probe_id is not None:
        frame["probeId"] = probe_id
    return dumps(frame)


def stream_pending_frame(request_id: str | None = None, probe_id: str | None = None) -> str:
    frame: dict[str, Any] = {"type": STREAM_PENDING}
    if request_id is not None:
        frame["id"] = request_id
    if probe_id is not None:
        frame["probeId"] = probe_id
    return dumps(frame)


def recovering_frame(recovering: bool, request_id: str | None = None) -> str:
    frame: dict[str, Any] = {"type": CHAT_RECOVERING, "recovering": recovering}
    if request_id is not None:
        frame["id"] = request_id
    return dumps(frame)


@dataclass(frozen=True, slots=True)
class ChatFrame:
    """One client → server chat frame: its ``type`` and the fields the server reads.

    ``data`` is the whole decoded frame; the properties read it the way the SDK's
    ``parseProtocolMessage`` does (a missing or mistyped field reads as its default).
    """

    type: str
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str | None:
        value = self.data.get("id")
        return value if isinstance(value, str) else None

    @property
    def probe_id(self) -> str | None:
        value = self.data.get("probeId")
        return value if isinstance(value, str) else None

    @property
    def init(self) -> dict[str, Any]:
        value = self.data.get("init")
        return value if isinstance(value, dict) else {}

    @property
    def messages(self) -> list[Any]:
        value = self.data.get("messages")
        return value if isinstance(value, list) else []


def parse_chat_frame(raw: Any) -> ChatFrame | None:
    """``raw`` as a chat frame, or None when it is not one (binary, not JSON, unknown type)."""
    if not isinstance(raw, str):
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    kind = data.get("type")
    if not isinstance(kind, str) or kind not in _INCOMING:
        return None
    return ChatFrame(kind, data)
