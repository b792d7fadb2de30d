"""The conversation as the providers need it, from the chat layer's UI messages.

A UI message mixes text, reasoning, tool calls with their results, files and data parts; each
provider wants its own shape. In between sits a flat list of :data:`Item`, in order: user and
assistant text, files the user attached, tool calls, tool results. Each adapter groups them into
its wire format (the Responses API's input items, chat completions' messages, Anthropic's content
blocks; files through :mod:`agents.providers.files`, which refuses what a provider cannot take).
What no provider can read as input (data parts, sources, reasoning, files in an assistant
message) is left out — but for the correction of a structured answer the schema refused, which
the model reads as a user message after that answer (:mod:`agents.providers.output`). A tool
call whose result never arrived is left out too, since every provider refuses a call without
its result.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CORRECTION_PART",
    "OUTPUT_PART",
    "File",
    "Item",
    "Text",
    "ToolCall",
    "ToolResult",
    "items_from_messages",
    "merge_texts",
    "result_text",
    "trailing_assistant_text",
]


#: The assistant message's part holding a structured answer the output schema accepted
#: (``data``: the value; see :mod:`agents.providers.output`).
OUTPUT_PART = "data-structured-output"
#: The part of a structured answer the schema refused: ``data`` is ``{step, error,
#: correction?}``; the model reads the ``correction`` as a user message after that answer
#: (stored with the message, so a recovered turn reads it again).
CORRECTION_PART = "data-structured-output-error"


@dataclass(frozen=True, slots=True)
class Text:
    role: str  # "user" | "assistant" | "system"
    text: str


@dataclass(frozen=True, slots=True)
class File:
    """A file a user attached: its media type and URL (``data:`` or ``http(s)``)."""

    role: str
    media_type: str
    url: str
    filename: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCall:
    call_id: str
    name: str
    args: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolResult:
    call_id: str
    name: str
    output: Any
    is_error: bool = False


Item = Text | File | ToolCall | ToolResult


#: What the model reads for a call a person denied (with their reason, when they gave one).
DENIED_TEXT = "The user denied this tool call."


def result_text(output: Any) -> str:
    """A tool output as the text the providers take (strings as they are, the rest JSON)."""
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


def _tool_name(part: Mapping[str, Any]) -> str | None:
    kind = str(part.get("type", ""))
    if kind == "dynamic-tool":
        return str(part.get("toolName") or "") or None
    return kind[5:] if kind.startswith("tool-") else None


def _tool_items(part: Mapping[str, Any], name: str) -> list[Item]:
    call_id = str(part.get("toolCallId") or "")
    state = part.get("state")
    args = part.get("input")
    call = ToolCall(call_id, name, args if isinstance(args, Mapping) else {})
    if state == "output-available":
        return [call, ToolResult(call_id, name, part.get("output"))]
    if state == "output-error":
        return [call, ToolResult(call_id, name, part.get("errorText") or "error", True)]
    if state == "output-denied":  # the reason a person gave, as the AI SDK's execution-denied
        approval = part.get("approval")
        reason = approval.get("reason") if isinstance(approval, Mapping) else None
        denial = f"The user denied this tool call: {reason}" if reason else DENIED_TEXT
        return [call, ToolResult(call_id, name, denial, True)]
    return []  # no result (yet): a provider refuses a call without one


def items_from_messages(messages: Iterable[Mapping[str, Any]]) -> list[Item]:
    """The provider-neutral conversation of ``messages`` (UI messages, oldest first)."""
    items: list[Item] = []

    def add_text(role: str, text: str) -> None:
        if items and isinstance(items[-1], Text) and items[-1].role == role:
            items[-1] = Text(role, items[-1].text + text)
        else:
            items.append(Text(role, text))

    for message in messages:
        role = str(message.get("role", "user"))
        for part in message.get("parts") or ():
            if not isinstance(part, Mapping):
                continue
            if part.get("type") == "text":
                text = str(part.get("text") or "")
                if text:
                    add_text(role, text)
                continue
            if part.get("type") == CORRECTION_PART and role == "assistant":
                data = part.get("data")
                said = data.get("correction") if isinstance(data, Mapping) else None
                if said:
                    add_text("user", str(said))
                continue
            if part.get("type") == "file":
                if role != "assistant":  # a model's own files are not input any API takes
                    filename = part.get("filename")
                    items.append(File(role, str(part.get("mediaType") or ""),
                                      str(part.get("url") or ""),
                                      str(filename) if filename else None))  # fmt: skip
                continue
            name = _tool_name(part)
            if name is not None and role == "assistant":
                items += _tool_items(part, name)
    return items


def trailing_assistant_text(items: Sequence[Item]) -> str:
    """The assistant text the conversation ends with (a partial to continue), or ``""``."""
    if items and isinstance(items[-1], Text) and items[-1].role == "assistant":
        return items[-1].text
    return ""


def merge_texts(items: Sequence[Item]) -> list[Item]:
    """``items`` with adjacent texts of one role joined (a partial and its continuation)."""
    out: list[Item] = []
    for item in items:
        last = out[-1] if out else None
        if isinstance(item, Text) and isinstance(last, Text) and last.role == item.role:
            out[-1] = Text(item.role, last.text + item.text)
        else:
            out.append(item)
    return out
