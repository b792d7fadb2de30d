"""The fakes' token accounting: deterministic, so tests can predict every bill exactly.

Real tokenizers are model-specific and not available offline; what tests need is a count that a
person can work out by hand and that moves when the request moves. The fakes are the authority:
tests compare what an adapter reports against these numbers.

**Input tokens** = the number of whitespace-separated words (``len(text.split())``) in all the
text of a request:

* the system prompt: Responses ``instructions``, Anthropic ``system`` (a string or its text
  blocks); in chat completions the system/developer messages are messages like the others;
* every message's text content: a string, or the ``text`` of each part of a content array;
* every tool call's arguments: Responses ``function_call.arguments`` and chat
  ``tool_calls[].function.arguments`` (already JSON strings), Anthropic ``tool_use.input``
  (serialized with ``json.dumps``);
* every tool result: Responses ``function_call_output.output``, chat ``role: "tool"`` content,
  Anthropic ``tool_result.content``; a value that is not a string is serialized with
  ``json.dumps``.

Tool definitions, images and any other field are not counted.

**Output tokens** = one per delta streamed: each text delta and each tool-call arguments delta
(a :class:`~.script.ToolUse` streams its arguments as one delta) counts 1.

A generation is billed its input tokens when it starts, and one output token per delta it
*generates*. A scripted ``fail`` bills nothing; retrieving a stored response never bills.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["chat_input_tokens", "messages_input_tokens", "responses_input_tokens", "words"]


def words(text: str) -> int:
    """The token count of ``text``: its whitespace-separated words."""
    return len(text.split())


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _content_words(content: Any) -> int:
    """A message's content: a string, or an array of text / tool_use / tool_result parts."""
    if isinstance(content, str):
        return words(content)
    if not isinstance(content, list):
        return 0
    total = 0
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "tool_use":
            total += words(_as_text(part.get("input", {})))
        elif kind == "tool_result":
            total += _content_words(part.get("content", ""))
        elif isinstance(part.get("text"), str):
            total += words(part["text"])
    return total


def responses_input_tokens(body: dict[str, Any]) -> int:
    """OpenAI Responses: ``instructions`` plus every input item's text, arguments and output."""
    total = words(body["instructions"]) if isinstance(body.get("instructions"), str) else 0
    items = body.get("input")
    if isinstance(items, str):
        return total + words(items)
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "function_call":
            total += words(_as_text(item.get("arguments", "")))
        elif kind == "function_call_output":
            total += words(_as_text(item.get("output", "")))
        elif "content" in item:
            total += _content_words(item["content"])
    return total


def chat_input_tokens(body: dict[str, Any]) -> int:
    """OpenAI chat completions: every message's content and tool calls' arguments."""
    total = 0
    for message in body.get("messages", []):
        if not isinstance(message, dict):
            continue
        total += _content_words(message.get("content"))
        for call in message.get("tool_calls") or []:
            function = call.get("function", {}) if isinstance(call, dict) else {}
            total += words(_as_text(function.get("arguments", "")))
    return total


def messages_input_tokens(body: dict[str, Any]) -> int:
    """Anthropic Messages: ``system`` plus every message's blocks."""
    total = _content_words(body.get("system"))
    for message in body.get("messages", []):
        if isinstance(message, dict):
            total += _content_words(message.get("content"))
    return total
