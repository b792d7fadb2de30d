"""UI messages: building the assistant's reply from the chunks of its stream.

A UI message is the AI SDK's ``{id, role, parts, [metadata]}`` (:data:`UIMessage`). Clients send
whole transcripts of them, the agent stores them, and the assistant's reply is built from the
chunks of the UI-message stream exactly as ``@cloudflare/ai-chat`` 0.12.2 builds it
(``applyChunkToParts``, see :mod:`agents.chat.transcript.parts`, plus the cases of
``AIChatAgent._streamSSEReply``), so the stored message — and therefore what ``/get-messages``
and transcript snapshots show a client — is the one Cloudflare's server would have stored.

* :class:`AssistantMessage` — the reply being streamed: :meth:`~AssistantMessage.consume` applies
  one chunk and returns what the agent stores and broadcasts for it (research §3.7, §4.3);
* :func:`plain_text_chunks` — the chunks the SDK synthesises for a plain-text reply (§4.3);
* what clients send is checked and migrated in :mod:`agents.chat.transcript.incoming`;
* :func:`origin_message_ids`, :func:`new_assistant_id`, :func:`normalize_tool_input`.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ...core.protocol import dumps
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
    find_tool_part,
    is_replay_chunk,
    js_truthy,
    last_part,
    late_input_forward_chunks,
    normalize_tool_input,
)

__all__ = [
    "AssistantMessage",
    "UIMessage",
    "find_tool_part",
    "is_replay_chunk",
    "new_assistant_id",
    "normalize_tool_input",
    "origin_message_ids",
    "partial_parts",
    "plain_text_chunks",
]

#: ``{id, role, parts, [metadata]}``: a dict, so unknown keys and key order survive a round trip.
UIMessage = dict[str, Any]

_BASE36: Final = "0123456789abcdefghijklmnopqrstuvwxyz"
#: Made on first use, never at import: Cloudflare refuses entropy outside a request ("Cannot get
#: entropy outside of request context"), so a ``random.Random()`` at module level makes every
#: Worker that imports ``agents.chat`` fail to load there.
_rng: random.Random | None = None


def _default_rng() -> random.Random:
    global _rng
    if _rng is None:
        _rng = random.Random()
    return _rng


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
    source = rng if rng is not None else _default_rng()
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
