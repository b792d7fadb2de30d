"""Message parts from stream chunks: the SDK's ``applyChunkToParts`` and its tool-call rules.

This is the mechanics under :class:`agents.chat.transcript.messages.AssistantMessage`, a port of
``agents/src/chat/message-builder.ts`` (``agents`` 0.32.0) and the table of research §3.7: how
each UI-message stream chunk changes the ``parts`` list of the message being built, which tool
chunks are *replays* that must not reach clients, and how tool inputs are made provider-safe.

JavaScript's ``undefined`` is modelled as an absent key (``JSON.stringify`` drops such keys) and
``null`` as ``None``: where the SDK tests ``x != null`` this module tests ``is not None``, where it
tests ``x !== undefined`` it tests for the key. Key order matters (a stored message's JSON text
is what clients and hashes see), so keys are set in the order the SDK's object literals give them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ...core.protocol import dumps
from .chunks import (
    DATA_PREFIX,
    FILE,
    REASONING_DELTA,
    REASONING_END,
    REASONING_START,
    SOURCE_DOCUMENT,
    SOURCE_URL,
    START_STEP,
    STEP_START,
    TEXT_DELTA,
    TEXT_END,
    TEXT_START,
    TOOL_APPROVAL_REQUEST,
    TOOL_INPUT_AVAILABLE,
    TOOL_INPUT_DELTA,
    TOOL_INPUT_ERROR,
    TOOL_INPUT_START,
    TOOL_OUTPUT_AVAILABLE,
    TOOL_OUTPUT_DENIED,
    TOOL_OUTPUT_ERROR,
    Chunk,
)

__all__ = [
    "SETTLED_TOOL_STATES",
    "PartsBuilder",
    "copy_key",
    "find_tool_part",
    "is_replay_chunk",
    "js_text",
    "js_truthy",
    "last_part",
    "late_input_forward_chunks",
    "normalize_input",
    "normalize_tool_input",
    "set_tool_input",
]

#: Tool-part states that carry a result: a later chunk for the call never changes them.
SETTLED_TOOL_STATES: Final = frozenset({"output-available", "output-error", "output-denied"})
_APPROVAL_STATES: Final = frozenset({"approval-requested", "approval-responded"})
#: States in which a tool part ignores a late denial or approval request.
_CLOSED_TO_REQUESTS: Final = SETTLED_TOOL_STATES | {"approval-responded"}
_SOURCE_URL_KEYS: Final = ("sourceId", "url", "title", "providerMetadata")
_SOURCE_DOCUMENT_KEYS: Final = ("sourceId", "mediaType", "title", "filename", "providerMetadata")


# -- small helpers -------------------------------------------------------------------------------
def js_truthy(value: Any) -> bool:
    """JavaScript truthiness (an empty list or dict is truthy there)."""
    if value is None or value is False:
        return False
    if isinstance(value, int | float):
        return value == value and value != 0  # NaN and 0 are falsy
    if isinstance(value, str):
        return value != ""
    return True


def js_text(value: Any) -> str:
    """``String(value)`` for what a template literal interpolates (``tool-${toolName}``)."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return dumps(value)


def _is_plain_object(value: Any) -> bool:
    return isinstance(value, dict)


def normalize_input(raw: Any, present: bool = True) -> tuple[dict[str, Any], bool]:
    if present and _is_plain_object(raw):
        return raw, False
    if present and isinstance(raw, str) and raw.strip().startswith("{"):
        try:
            parsed = json.loads(raw, parse_constant=_reject_constant)
        except ValueError:
            pass
        else:
            if _is_plain_object(parsed):
                return parsed, True
    return {}, True


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def normalize_tool_input(value: Any) -> dict[str, Any]:
    """A tool part's ``input`` as a provider-acceptable object (``normalizeToolInput``, §3.7).

    A dict is kept as is; a string that starts with ``{`` and parses to an object is parsed;
    everything else (``None``, lists, ``""``, other strings, numbers) becomes ``{}`` — providers
    such as Anthropic refuse a tool call whose input is not an object, and a stored transcript
    with one would fail every later turn.
    """
    return normalize_input(value)[0]


def set_tool_input(part: dict[str, Any], value: Any) -> None:
    """Set ``part["input"]`` where the SDK's ``input: undefined`` placeholder stands.

    The SDK creates tool parts with an ``input`` key right after ``state`` and fills it later; a
    JSON text of the part keeps that position. Here the placeholder is an absent key, so a first
    assignment re-inserts the key after ``state`` to give the same key order.
    """
    if "input" in part or "state" not in part:
        part["input"] = value
        return
    items = list(part.items())
    part.clear()
    for key, item in items:
        part[key] = item
        if key == "state":
            part["input"] = value


def copy_key(target: dict[str, Any], source: Mapping[str, Any], key: str) -> None:
    """``target[key] = source[key]`` where an absent (``undefined``) value removes the key."""
    if key in source:
        target[key] = source[key]
    else:
        target.pop(key, None)


def last_part(parts: Sequence[Any], types: frozenset[str]) -> dict[str, Any] | None:
    for part in reversed(parts):
        if isinstance(part, dict) and part.get("type") in types:
            return part
    return None


def find_tool_part(parts: Sequence[Any], tool_call_id: Any) -> dict[str, Any] | None:
    """The last part with this ``toolCallId`` (``findToolPartByCallId``); None for a falsy id."""
    if not js_truthy(tool_call_id):
        return None
    for part in reversed(parts):
        if isinstance(part, dict) and "toolCallId" in part and part["toolCallId"] == tool_call_id:
            return part
    return None


def is_replay_chunk(parts: Sequence[Any], chunk: Mapping[str, Any]) -> bool:
    """Whether ``chunk`` re-emits a tool call the message already moved past (``isReplayChunk``).

    Such chunks are neither applied, stored nor broadcast (§4.3): forwarded, they would move a
    client's tool part back (a settled part to ``input-streaming``, an approved one back to
    ``approval-requested``).
    """
    kind = chunk.get("type")
    if kind in (TOOL_OUTPUT_DENIED, TOOL_APPROVAL_REQUEST):
        existing = find_tool_part(parts, chunk.get("toolCallId"))
        if existing is None:
            return False
        return existing.get("state") in _CLOSED_TO_REQUESTS
    if kind not in (TOOL_INPUT_START, TOOL_INPUT_DELTA, TOOL_INPUT_AVAILABLE):
        return False
    existing = find_tool_part(parts, chunk.get("toolCallId"))
    if existing is None:
        return False
    return kind == TOOL_INPUT_START or existing.get("state") != "input-streaming"


def _merge_provider_metadata(part: dict[str, Any], metadata: Any) -> None:
    if metadata is None:
        return
    merged = (
        dict(part["providerMetadata"]) if isinstance(part.get("providerMetadata"), dict) else {}
    )
    if isinstance(metadata, dict):
        merged.update(metadata)
    part["providerMetadata"] = merged


def _tool_extras(part: dict[str, Any], chunk: Mapping[str, Any], *, title: bool = True) -> None:
    """The optional keys a tool chunk copies onto its part (only when not null)."""
    if chunk.get("providerExecuted") is not None:
        part["providerExecuted"] = chunk["providerExecuted"]
    if chunk.get("providerMetadata") is not None:
        part["callProviderMetadata"] = chunk["providerMetadata"]
    if title and chunk.get("title") is not None:
        part["title"] = chunk["title"]


class PartsBuilder:
    """``applyChunkToParts`` with its side state: the raw JSON text of a tool call's input
    deltas and which inputs are provisional, kept off the part (by part identity, as the SDK's
    ``WeakMap``/``WeakSet``) so a partial string never reaches storage or a client."""

    __slots__ = ("_provisional", "_raw")

    def __init__(self) -> None:
        self._raw: dict[int, tuple[dict[str, Any], str]] = {}
        self._provisional: dict[int, dict[str, Any]] = {}

    def _forget(self, part: dict[str, Any]) -> None:
        self._raw.pop(id(part), None)
        self._provisional.pop(id(part), None)

    def apply(self, parts: list[Any], chunk: Mapping[str, Any]) -> bool:
        """Apply one chunk to ``parts``; False when its type is not one this function handles
        (``start``, ``finish``, ``finish-step``, ``error``, ``message-metadata``, unknown)."""
        kind = chunk.get("type")
        if not isinstance(kind, str):
            return False
        if kind == TEXT_START:
            parts.append({"type": "text", "text": "", "state": "streaming"})
        elif kind == TEXT_DELTA:
            delta = _delta(chunk)
            last = last_part(parts, frozenset({"text"}))
            if last is not None:
                last["text"] = js_text(last.get("text", "")) + delta
            else:
                parts.append({"type": "text", "text": delta, "state": "streaming"})
        elif kind == TEXT_END:
            last = last_part(parts, frozenset({"text"}))
            if last is not None and "state" in last:
                last["state"] = "done"
        elif kind == REASONING_START:
            parts.append({"type": "reasoning", "text": "", "state": "streaming"})
        elif kind == REASONING_DELTA:
            delta = _delta(chunk)
            last = last_part(parts, frozenset({"reasoning"}))
            if last is not None:
                last["text"] = js_text(last.get("text", "")) + delta
                _merge_provider_metadata(last, chunk.get("providerMetadata"))
            else:
                part: dict[str, Any] = {"type": "reasoning", "text": delta, "state": "streaming"}
                if chunk.get("providerMetadata") is not None:
                    part["providerMetadata"] = chunk["providerMetadata"]
                parts.append(part)
        elif kind == REASONING_END:
            last = last_part(parts, frozenset({"reasoning"}))
            if last is not None and "state" in last:
                last["state"] = "done"
                _merge_provider_metadata(last, chunk.get("providerMetadata"))
        elif kind == FILE:
            parts.append(_pick({"type": FILE}, chunk, ("mediaType", "url")))
        elif kind == SOURCE_URL:
            parts.append(_pick({"type": SOURCE_URL}, chunk, _SOURCE_URL_KEYS))
        elif kind == SOURCE_DOCUMENT:
            parts.append(_pick({"type": SOURCE_DOCUMENT}, chunk, _SOURCE_DOCUMENT_KEYS))
        elif kind.startswith("tool-"):
            return self._apply_tool(parts, kind, chunk)
        elif kind in (STEP_START, START_STEP):
            parts.append({"type": STEP_START})
        elif kind.startswith(DATA_PREFIX):
            self._apply_data(parts, kind, chunk)
        else:
            return False
        return True

    def _apply_tool(self, parts: list[Any], kind: str, chunk: Mapping[str, Any]) -> bool:
        call_id = chunk.get("toolCallId")
        existing = find_tool_part(parts, call_id)
        state = existing.get("state") if existing is not None else None
        if kind == TOOL_INPUT_START:
            if existing is None:
                parts.append(self._new_tool_part(chunk, "input-streaming"))
        elif kind == TOOL_INPUT_DELTA:
            if existing is not None and state == "input-streaming":
                delta = chunk.get("inputTextDelta")
                if isinstance(delta, str):
                    raw = self._raw.get(id(existing), (existing, ""))[1]
                    self._raw[id(existing)] = (existing, raw + delta)
                if "input" in chunk:
                    set_tool_input(existing, chunk["input"])
                    self._provisional[id(existing)] = existing
        elif kind == TOOL_INPUT_AVAILABLE:
            if existing is None:
                part = self._new_tool_part(chunk, "input-available")
                set_tool_input(part, normalize_tool_input(chunk.get("input")))
                _tool_extras(part, chunk)
                parts.append(part)
            elif state == "input-streaming":
                existing["state"] = "input-available"
                set_tool_input(existing, normalize_tool_input(chunk.get("input")))
                _tool_extras(existing, chunk)
                self._forget(existing)
            else:
                self.apply_late_input(parts, chunk)
        elif kind == TOOL_INPUT_ERROR:
            if existing is None:
                part = self._new_tool_part(chunk, "output-error")
                set_tool_input(part, normalize_tool_input(chunk.get("input")))
                copy_key(part, chunk, "errorText")
                _tool_extras(part, chunk, title=False)
                parts.append(part)
            elif state not in SETTLED_TOOL_STATES:
                existing["state"] = "output-error"
                copy_key(existing, chunk, "errorText")
                set_tool_input(existing, normalize_tool_input(chunk.get("input")))
                _tool_extras(existing, chunk, title=False)
        elif kind == TOOL_APPROVAL_REQUEST:
            if existing is not None and state not in _CLOSED_TO_REQUESTS:
                pending = self._raw.pop(id(existing), None)
                if "input" not in existing and pending is not None:
                    set_tool_input(existing, normalize_tool_input(pending[1]))
                    self._provisional[id(existing)] = existing
                existing["state"] = "approval-requested"
                approval: dict[str, Any] = {}
                if "approvalId" in chunk:
                    approval["id"] = chunk["approvalId"]
                if "approvalDescriptor" in chunk:
                    approval["descriptor"] = chunk["approvalDescriptor"]
                existing["approval"] = approval
        elif kind == TOOL_OUTPUT_DENIED:
            if existing is not None and state not in _CLOSED_TO_REQUESTS:
                existing["state"] = "output-denied"
        elif kind == TOOL_OUTPUT_AVAILABLE:
            if existing is not None:
                existing["state"] = "output-available"
                copy_key(existing, chunk, "output")
                if "preliminary" in chunk:
                    existing["preliminary"] = chunk["preliminary"]
        elif kind == TOOL_OUTPUT_ERROR:
            if existing is not None:
                existing["state"] = "output-error"
                copy_key(existing, chunk, "errorText")
        else:
            return False
        return True

    @staticmethod
    def _new_tool_part(chunk: Mapping[str, Any], state: str) -> dict[str, Any]:
        name = js_text(chunk["toolName"]) if "toolName" in chunk else "undefined"
        part: dict[str, Any] = {"type": f"tool-{name}"}
        copy_key(part, chunk, "toolCallId")
        copy_key(part, chunk, "toolName")
        part["state"] = state
        if state == "input-streaming":
            _tool_extras(part, chunk)
        return part

    def apply_late_input(self, parts: list[Any], chunk: Mapping[str, Any]) -> bool:
        """Fill an approval part's input from a late ``tool-input-available`` without changing
        its state (``applyLateToolInput``); True when the input changed."""
        if chunk.get("type") != TOOL_INPUT_AVAILABLE:
            return False
        part = find_tool_part(parts, chunk.get("toolCallId"))
        if part is None or part.get("state") not in _APPROVAL_STATES:
            return False
        if "input" in part and id(part) not in self._provisional:
            return False
        set_tool_input(part, normalize_tool_input(chunk.get("input")))
        self._provisional.pop(id(part), None)
        _tool_extras(part, chunk)
        return True

    @staticmethod
    def _apply_data(parts: list[Any], kind: str, chunk: Mapping[str, Any]) -> None:
        if js_truthy(chunk.get("transient")):
            return
        if chunk.get("id") is not None:
            for part in reversed(parts):
                if isinstance(part, dict) and part.get("type") == kind and "id" in part:
                    if part["id"] == chunk["id"]:
                        copy_key(part, chunk, "data")
                        return
        new: dict[str, Any] = {"type": kind}
        if chunk.get("id") is not None:
            new["id"] = chunk["id"]
        copy_key(new, chunk, "data")
        parts.append(new)


def _delta(chunk: Mapping[str, Any]) -> str:
    value = chunk.get("delta")
    return "" if value is None else js_text(value)


def _pick(part: dict[str, Any], chunk: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    for key in keys:
        if key in chunk:
            part[key] = chunk[key]
    return part


def late_input_forward_chunks(parts: Sequence[Any], chunk: Mapping[str, Any]) -> list[Chunk]:
    """What the stream forwards for a late ``tool-input-available`` while approval is pending:
    the input chunk (with the part's input), then the approval request again, so a client moves
    its part to ``input-available`` and straight back (``lateToolInputForwardChunks``)."""
    if chunk.get("type") != TOOL_INPUT_AVAILABLE:
        return []
    part = find_tool_part(parts, chunk.get("toolCallId"))
    approval = part.get("approval") if part is not None else None
    if part is None or part.get("state") != "approval-requested" or not isinstance(approval, dict):
        return []
    if not js_truthy(approval.get("id")):
        return []
    forwarded = dict(chunk)
    copy_key(forwarded, part, "input")
    request: Chunk = {
        "type": TOOL_APPROVAL_REQUEST,
        "approvalId": approval["id"],
        "toolCallId": chunk.get("toolCallId"),
    }
    if "descriptor" in approval:
        request["approvalDescriptor"] = approval["descriptor"]
    return [forwarded, request]
