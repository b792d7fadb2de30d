"""What clients send: UI messages checked for the minimum shape and migrated from AI SDK v4.

Every message that arrives — in a chat request, a ``cf_agent_chat_messages`` frame or a durable
submission — passes :func:`auto_transform_messages` (the SDK's v4 → v5 migration, research §1.3)
and :func:`validate_message` (``isValidMessageStructure``, §3.9) before anything is stored, so a
malformed message is refused with :class:`~agents.errors.InvalidMessageError` naming what is
wrong instead of being half-stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ...core.protocol import dumps
from ...errors import InvalidMessageError
from .messages import UIMessage
from .parts import (
    copy_key,
    js_text,
    js_truthy,
    normalize_input,
    set_tool_input,
)

__all__ = [
    "ROLES",
    "auto_transform_message",
    "auto_transform_messages",
    "is_valid_message",
    "validate_message",
]

#: The roles a stored message may have (``isValidMessageStructure``).
ROLES: Final = ("user", "assistant", "system")

#: v4 ``toolInvocations[].state`` → v5 tool-part state (``ai-chat-v5-migration.ts``).
_V4_TOOL_STATES: Final = {
    "partial-call": "input-streaming",
    "call": "input-available",
    "result": "output-available",
    "error": "output-error",
}


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
