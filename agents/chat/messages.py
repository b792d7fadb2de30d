"""UI messages: checking and migrating what clients send, and building the assistant's reply.

A UI message is the AI SDK's ``{id, role, parts, [metadata]}`` (:data:`UIMessage`). Clients send
whole transcripts of them, the agent stores them, and the assistant's reply is built from the
chunks of the UI-message stream exactly as ``@cloudflare/ai-chat`` 0.12.2 builds it
(``applyChunkToParts``, see :mod:`agents.chat.parts`, plus the cases of
``AIChatAgent._streamSSEReply``), so the stored message — and therefore what ``/get-messages``
and transcript snapshots show a client — is the one Cloudflare's server would have stored.

* :class:`AssistantMessage` — the reply being streamed: :meth:`~AssistantMessage.consume` applies
  one chunk and returns what the agent stores and broadcasts for it (research §3.7, §4.3);
* :func:`plain_text_chunks` — the chunks the SDK synthesises for a plain-text reply (§4.3);
* :func:`auto_transform_messages` — the SDK's v4 → v5 migration of incoming messages (§1.3);
* :func:`validate_message` / :func:`is_valid_message` — the minimum shape (§3.9);
* :func:`origin_message_ids`, :func:`new_assistant_id`, :func:`normalize_tool_input`.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ..core.protocol import dumps
from ..errors import InvalidMessageError
from .chunks import (
    ERROR,
    FINISH,
    MESSAGE_METADATA,
    REASONING_START,
    START,
    TEXT_DELTA,
    TEXT_END,
    TEXT_START,
    Chunk,
)
from .parts import (
    PartsBuilder,
    copy_key,
    find_tool_part,
    is_replay_chunk,
    js_text,
    js_truthy,
    last_part,
    late_input_forward_chunks,
    normalize_input,
    normalize_tool_input,
    set_tool_input,
)

__all__ = [
    "ROLES",
    "AssistantMessage",
    "UIMessage",
    "auto_transform_message",
    "auto_transform_messages",
    "find_tool_part",
    "is_replay_chunk",
    "is_valid_message",
    "new_assistant_id",
    "normalize_tool_input",
    "origin_message_ids",
    "partial_parts",
    "plain_text_chunks",
    "validate_message",
]

#: ``{id, role, parts, [metadata]}``: a dict, so unknown keys and key order survive a round trip.
UIMessage = dict[str, Any]

#: The roles a stored message may have (``isValidMessageStructure``).
ROLES: Final = ("user", "assistant", "system")

#: v4 ``toolInvocations[].state`` → v5 tool-part state (``ai-chat-v5-migration.ts``).
_V4_TOOL_STATES: Final = {
    "partial-call": "input-streaming",
    "call": "input-available",
    "result": "output-available",
    "error": "output-error",
}
_BASE36: Final = "0123456789abcdefghijklmnopqrstuvwxyz"
_rng = random.Random()


def _merge_metadata(message: UIMessage, metadata: Any) -> None:
    """``message.metadata = message.metadata ? {...old, ...new} : new`` (a shallow merge)."""
    if metadata is None:
        return
    current = message.get("metadata")
    if js_truthy(current) and isinstance(current, dict) and isinstance(metadata, dict):
        message["metadata"] = {**current, **metadata}
    else:
        message["metadata"] = metadata


# -- the assistant's reply -----------------------------------------------------------------------
class AssistantMessage:
    """The assistant message of one turn, built from the chunks of its UI-message stream.

    Make one with :meth:`new` (a fresh ``assistant_<ms>_<random>`` id), :meth:`continuing` (a
    continuation turn appends to a deep copy of the last assistant message and keeps its id), or
    :meth:`for_turn`, which chooses between them as ``_createStreamingAssistantMessage`` does.
    Then hand every chunk of the reply to :meth:`consume` and persist :attr:`message`.

    :meth:`consume` is the per-chunk body of the SDK's ``_streamSSEReply`` minus the I/O
    (research §3.7, §4.3). It applies the chunk to the message — parts by ``applyChunkToParts``;
    ``start`` adopts its ``messageId`` (not on a continuation) and merges ``messageMetadata``;
    ``finish`` and ``message-metadata`` merge ``messageMetadata`` — and returns the chunks to store
    and broadcast in its place:

    * ``[]`` for a chunk that must not reach clients: a replayed tool chunk
      (:func:`is_replay_chunk`), the first ``text-start`` of a continuation whose last text part
      is still streaming (the interrupted text block is continued in place), an ``error`` chunk
      (the turn ends: :attr:`error_text` holds the text the agent sends), a chunk without a string
      ``type``;
    * two chunks for a late ``tool-input-available`` while approval is pending;
    * otherwise the chunk, rewritten as the SDK rewrites it: a continuation's ``start`` loses its
      ``messageId``; any other ``start`` without one is stamped with :attr:`id`; a ``finish``
      with a ``finishReason`` carries it as ``messageMetadata: {finishReason}`` instead (which
      :attr:`finish_reason` remembers; the stored message keeps the chunk's own metadata only).

    The first ``reasoning-start`` of a continuation whose last text/reasoning part is still
    streaming is forwarded but not applied. Unknown chunk types are forwarded and change nothing.

    What the agent does around it (the SDK's side effects) is not here: persisting the message
    early when a ``tool-approval-request`` arrives, updating an *earlier* message when a tool
    output names a call this message does not have (:meth:`has_tool_call`), storing chunks.
    """

    __slots__ = (
        "_builder",
        "_reasoning_resumed",
        "_text_resumed",
        "continuation",
        "error_text",
        "finish_reason",
        "message",
    )

    def __init__(self, message: UIMessage, *, continuation: bool = False) -> None:
        """Build into ``message`` itself (``{id, role: "assistant", parts: [...]}``)."""
        if not isinstance(message.get("parts"), list):
            message["parts"] = []
        #: The message being built (persist this).
        self.message = message
        #: Whether the turn is a continuation (``start`` keeps the message id, resume rules).
        self.continuation = continuation
        #: The ``finishReason`` of the last ``finish`` chunk that had one.
        self.finish_reason: Any = None
        #: Set by an ``error`` chunk: its ``errorText`` (the body of the agent's error frame).
        self.error_text: str | None = None
        self._builder = PartsBuilder()
        self._text_resumed = False
        self._reasoning_resumed = False

    @classmethod
    def new(
        cls, now_ms: float, rng: random.Random | None = None, *, continuation: bool = False
    ) -> AssistantMessage:
        """An empty message with a fresh :func:`new_assistant_id`."""
        message: UIMessage = {"id": new_assistant_id(now_ms, rng), "role": "assistant", "parts": []}
        return cls(message, continuation=continuation)

    @classmethod
    def continuing(cls, last: Mapping[str, Any]) -> AssistantMessage:
        """A continuation of ``last``: a deep copy (``structuredClone``) that keeps its id."""
        return cls(copy.deepcopy(dict(last)), continuation=True)

    @classmethod
    def for_turn(
        cls,
        messages: Sequence[Any],
        *,
        continuation: bool,
        now_ms: float,
        rng: random.Random | None = None,
    ) -> AssistantMessage:
        """The message a turn streams into (``_createStreamingAssistantMessage``).

        A continuation continues the last assistant message of ``messages``; with none (or for
        a normal turn) the message is new. Either way :attr:`continuation` is the turn's flag.
        """
        if continuation:
            for message in reversed(messages):
                if isinstance(message, dict) and message.get("role") == "assistant":
                    return cls.continuing(message)
        return cls.new(now_ms, rng, continuation=continuation)

    @property
    def id(self) -> str:
        return str(self.message.get("id"))

    @property
    def parts(self) -> list[Any]:
        parts: list[Any] = self.message["parts"]
        return parts

    @property
    def metadata(self) -> Any:
        return self.message.get("metadata")

    def has_tool_call(self, tool_call_id: str) -> bool:
        """Whether one of this message's parts is the tool call ``tool_call_id``."""
        return find_tool_part(self.parts, tool_call_id) is not None

    def apply(self, chunk: Mapping[str, Any]) -> None:
        """Apply ``chunk`` (everything :meth:`consume` does, without its answer)."""
        self.consume(chunk)

    def apply_parts(self, chunk: Mapping[str, Any]) -> bool:
        """Only ``applyChunkToParts``: no continuation or replay rules, no metadata. For
        rebuilding parts from stored chunks; False for a type it does not handle."""
        return self._builder.apply(self.parts, chunk)

    def consume(self, chunk: Mapping[str, Any]) -> list[Chunk]:
        """Apply one chunk; return the chunks to store and broadcast for it (see the class)."""
        kind = chunk.get("type")
        if not isinstance(kind, str):
            return []
        parts = self.parts
        skip_apply = False
        if self.continuation:
            if not self._text_resumed and kind == TEXT_START:
                last = last_part(parts, frozenset({"text"}))
                if last is not None and last.get("state") == "streaming":
                    self._text_resumed = True
                    return []
            if not self._reasoning_resumed and kind == REASONING_START:
                last = last_part(parts, frozenset({"text", "reasoning"}))
                if last is not None and last.get("state") == "streaming":
                    self._reasoning_resumed = True
                skip_apply = self._reasoning_resumed
        if is_replay_chunk(parts, chunk):
            self._builder.apply_late_input(parts, chunk)
            return late_input_forward_chunks(parts, chunk)
        handled = True if skip_apply else self._builder.apply(parts, chunk)
        if not handled:
            if kind == START:
                if chunk.get("messageId") is not None and not self.continuation:
                    self.message["id"] = chunk["messageId"]
                _merge_metadata(self.message, chunk.get("messageMetadata"))
            elif kind in (FINISH, MESSAGE_METADATA):
                _merge_metadata(self.message, chunk.get("messageMetadata"))
            elif kind == ERROR:
                text = chunk.get("errorText")
                if text is None:
                    text = dumps({"type": kind})
                self.error_text = text if isinstance(text, str) else dumps(text)
                return []
        return [self._rewrite(kind, chunk)]

    def _rewrite(self, kind: str, chunk: Mapping[str, Any]) -> Chunk:
        out = dict(chunk)
        if kind == START:
            if self.continuation:
                out.pop("messageId", None)
            elif out.get("messageId") is None:
                out["messageId"] = self.message.get("id")
        elif kind == FINISH and "finishReason" in out:
            reason = out.pop("finishReason")
            self.finish_reason = reason
            out["type"] = FINISH
            out["messageMetadata"] = {"finishReason": reason}
        return out


def plain_text_chunks(request_id: str, texts: Iterable[str]) -> list[Chunk]:
    """The chunks the SDK synthesises for a plain-text reply (``_sendPlaintextReply``, §4.3).

    ``text-start``, one ``text-delta`` per non-empty piece, ``text-end``, all with the request id
    as their ``id``; no ``start``, ``start-step`` or ``finish`` — so the stored message is a
    single text part with no ``step-start``. Fed to a continuation's :class:`AssistantMessage`,
    the ``text-start`` is swallowed when the last text part is still streaming and the text is
    appended to it, as the SDK does.
    """
    chunks: list[Chunk] = [{"type": TEXT_START, "id": request_id}]
    chunks += [{"type": TEXT_DELTA, "id": request_id, "delta": t} for t in texts if t]
    chunks.append({"type": TEXT_END, "id": request_id})
    return chunks


def partial_parts(bodies: Iterable[str]) -> list[Any]:
    """The parts of an interrupted reply rebuilt from its stored chunk bodies
    (``getPartialStreamText``): each body through ``applyChunkToParts``, malformed ones skipped."""
    builder = AssistantMessage({"id": "", "role": "assistant", "parts": []})
    for body in bodies:
        try:
            chunk = json.loads(body)
        except ValueError:
            continue
        if isinstance(chunk, dict):
            builder.apply_parts(chunk)
    return builder.parts


def new_assistant_id(now_ms: float, rng: random.Random | None = None) -> str:
    """``assistant_<ms>_<9 base-36 chars>``, the SDK's assistant message id (research §1.5:
    ``` `assistant_${Date.now()}_${Math.random().toString(36).slice(2, 11)}` ```)."""
    source = rng if rng is not None else _rng
    suffix = "".join(source.choice(_BASE36) for _ in range(9))
    return f"assistant_{int(now_ms)}_{suffix}"


def origin_message_ids(messages: Any) -> list[str]:
    """The ids of the trailing run of user messages (``originMessageIds``, research §1.2).

    These are the ``messageIds`` of a request's terminal frames: ``["u9", "q1"]`` for a request
    whose messages end with those two user messages. Empty when the last message is not a user
    message (the SDK's ``undefined``); ids that are not non-empty strings are left out.
    """
    if not isinstance(messages, list):
        return []
    ids: list[str] = []
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != "user":
            break
        if isinstance(message.get("id"), str) and message["id"]:
            ids.append(message["id"])
    ids.reverse()
    return ids


# -- what clients send ---------------------------------------------------------------------------
def is_valid_message(value: Any) -> bool:
    """``isValidMessageStructure``: an object with a non-empty string ``id``, a role of
    :data:`ROLES` and a ``parts`` list (possibly empty)."""
    try:
        validate_message(value)
    except InvalidMessageError:
        return False
    return True


def validate_message(value: Any) -> UIMessage:
    """``value`` itself when it is a UI message; else :class:`InvalidMessageError` naming what
    is wrong. For untrusted input: a message that fails this would break model conversion or a
    client's rendering later, far from its cause."""
    if not isinstance(value, dict):
        raise InvalidMessageError(
            f"a chat message must be an object, got {_describe(value)}",
            field="message",
            value=value,
        )
    message_id = value.get("id")
    if not isinstance(message_id, str) or not message_id:
        raise InvalidMessageError(
            f"a chat message needs a non-empty string id, got {_describe(message_id)}",
            field="id",
            value=message_id,
        )
    role = value.get("role")
    if role not in ROLES:
        raise InvalidMessageError(
            f"chat message {message_id!r}: role must be one of {', '.join(ROLES)}, "
            f"got {_describe(role)}",
            field="role",
            value=role,
        )
    parts = value.get("parts")
    if not isinstance(parts, list):
        raise InvalidMessageError(
            f"chat message {message_id!r}: parts must be a list, got {_describe(parts)}",
            field="parts",
            value=parts,
        )
    return value


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else f"a string of {len(value)} characters"
    if isinstance(value, bool | int | float):
        return dumps(value)
    return "a list" if isinstance(value, list) else f"a {type(value).__name__}"


def auto_transform_messages(messages: Any) -> list[UIMessage]:
    """Every message of ``messages`` through :func:`auto_transform_message` (index = position).

    Raises :class:`InvalidMessageError` when ``messages`` is not a list or holds a ``null`` (the
    SDK throws a ``TypeError`` there; a body without ``messages`` ends the same way, §1.3).
    """
    if not isinstance(messages, list):
        raise InvalidMessageError(
            f"messages must be a list, got {_describe(messages)}", field="messages", value=messages
        )
    return [auto_transform_message(message, index) for index, message in enumerate(messages)]


def auto_transform_message(message: Any, index: int = 0) -> UIMessage:
    """An AI SDK v4-era message as a v5 UI message (``autoTransformMessage``, research §1.3).

    A message that already has a ``parts`` list is returned as is — the same object — unless a
    tool part's ``input`` is not an object, which is repaired with :func:`normalize_tool_input`
    in a copy. Otherwise the parts are built from, in order: ``reasoning`` (a reasoning part),
    ``toolInvocations`` (tool parts ``tool-<toolName>``, v4 states mapped: ``partial-call`` →
    ``input-streaming``, ``call`` → ``input-available``, ``result`` → ``output-available``,
    ``error`` → ``output-error``, ``args`` → ``input``, ``result`` → ``output`` or ``null``), a
    ``content`` list (its ``{text}`` items), else ``content`` itself as one text part (JSON text
    when not a string), else the whole message as JSON text. The id falls back to
    ``msg-<index>``, the role to ``user``, and role ``data`` becomes ``system``.
    """
    if message is None:
        raise InvalidMessageError(
            f"message {index} is null, not a chat message", field="message", value=message
        )
    if isinstance(message, dict) and isinstance(message.get("parts"), list):
        return _normalize_tool_part_inputs(message)
    fields: Mapping[str, Any] = message if isinstance(message, dict) else {}
    parts: list[dict[str, Any]] = []
    if js_truthy(fields.get("reasoning")):
        parts.append({"type": "reasoning", "text": fields["reasoning"]})
    invocations = fields.get("toolInvocations")
    if isinstance(invocations, list):
        for invocation in invocations:
            if isinstance(invocation, dict) and "toolName" in invocation:
                parts.append(_v4_tool_part(invocation))
    content = fields.get("content")
    if isinstance(content, list):
        for item in content:
            if isinstance(item, dict) and "text" in item:
                kind = item.get("type")
                text = item.get("text")
                parts.append(
                    {
                        "type": kind if js_truthy(kind) else "text",
                        "text": text if js_truthy(text) else "",
                    }
                )
    if not parts and "content" in fields:
        text = content if isinstance(content, str) else dumps(content)
        parts.append({"type": "text", "text": text})
    if not parts:
        parts.append(
            {"type": "text", "text": message if isinstance(message, str) else dumps(message)}
        )
    message_id = fields.get("id")
    role = fields.get("role")
    return {
        "id": message_id if js_truthy(message_id) else f"msg-{index}",
        "role": "system" if role == "data" else (role if js_truthy(role) else "user"),
        "parts": parts,
    }


def _v4_tool_part(invocation: Mapping[str, Any]) -> dict[str, Any]:
    state = invocation.get("state")
    part: dict[str, Any] = {"type": f"tool-{js_text(invocation['toolName'])}"}
    copy_key(part, invocation, "toolCallId")
    mapped = _V4_TOOL_STATES.get(state) if isinstance(state, str) else None
    part["state"] = mapped or "input-available"
    part["input"] = normalize_input(invocation.get("args"), "args" in invocation)[0]
    part["output"] = invocation["result"] if "result" in invocation else None
    return part


def _is_malformed_tool_part(part: Any) -> bool:
    if not isinstance(part, dict):
        return False
    kind = part.get("type")
    if not isinstance(kind, str) or not (kind.startswith("tool-") or kind == "dynamic-tool"):
        return False
    return normalize_input(part.get("input"), "input" in part)[1]


def _normalize_tool_part_inputs(message: UIMessage) -> UIMessage:
    """``normalizeToolPartInputs``: the message itself when every tool input is an object."""
    parts = message["parts"]
    if not any(_is_malformed_tool_part(part) for part in parts):
        return message
    fixed: list[Any] = []
    for part in parts:
        if _is_malformed_tool_part(part):
            part = dict(part)
            set_tool_input(part, normalize_input(part.get("input"), "input" in part)[0])
        fixed.append(part)
    return {**message, "parts": fixed}
