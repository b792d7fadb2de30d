"""Anthropic's Messages API: a cut reply is continued from its partial, given as a prefill.

When the last message is the assistant's, the model continues that text from its last
character (strategy ``"prefill"``): one more request re-reads the partial, but nothing already
said is said again. The API refuses a prefill ending in whitespace, so the trailing whitespace
is held back from the request, and the continuation's leading whitespace is dropped in its
place — the joined message reads as one, without a doubled space or blank line at the seam.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from .base import (
    Finished,
    ModelCall,
    ProviderEvent,
    Started,
    Strategy,
    TextDelta,
    ToolCallDone,
    ToolSpec,
    Usage,
    post_sse,
    tool_arguments,
)
from .errors import ProviderStreamError
from .files import anthropic_block
from .keys import HttpAdapter
from .output import anthropic_schema
from .transcript import File, Item, Text, ToolCall, result_text

__all__ = ["AnthropicMessages", "anthropic_messages"]

_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool-calls",
            "max_tokens": "length", "refusal": "content-filter"}  # fmt: skip


def anthropic_messages(
    items: Sequence[Item], *, provider: str = "anthropic"
) -> tuple[list[dict[str, Any]], str]:
    """The Messages API's ``messages`` for ``items`` (consecutive roles merged; a file as
    :func:`~agents.providers.files.anthropic_block` maps it, one it cannot take refused), and
    the whitespace held back from a trailing assistant prefill."""
    messages: list[dict[str, Any]] = []

    def add(role: str, block: dict[str, Any]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].append(block)
        else:
            messages.append({"role": role, "content": [block]})

    for item in items:
        if isinstance(item, Text):
            add("assistant" if item.role == "assistant" else "user",
                {"type": "text", "text": item.text})  # fmt: skip
        elif isinstance(item, File):
            add("user", anthropic_block(provider, item))
        elif isinstance(item, ToolCall):
            add("assistant",
                {"type": "tool_use", "id": item.call_id, "name": item.name,
                 "input": dict(item.args)})  # fmt: skip
        else:
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": item.call_id,
                     "content": result_text(item.output)}  # fmt: skip
            if item.is_error:
                block["is_error"] = True
            add("user", block)
    held = ""
    if messages and messages[-1]["role"] == "assistant":
        last = messages[-1]["content"][-1]
        if last.get("type") == "text":
            text = last["text"]
            held = text[len(text.rstrip()) :]
            last["text"] = text.rstrip()
            if not last["text"]:
                messages[-1]["content"].pop()
                if not messages[-1]["content"]:
                    messages.pop()
    return messages, held


def _after_seam(held: str, text: str) -> str:
    """``text`` without the whitespace it opens with that the partial already ends with (a
    space the model repeats after a prefill), keeping any it adds (a paragraph break)."""
    same = 0
    while same < min(len(held), len(text)) and held[same] == text[same]:
        same += 1
    return text[same:]


def _tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
            for t in tools]  # fmt: skip


class AnthropicMessages(HttpAdapter):
    """An adapter for ``POST /v1/messages`` (streamed)."""

    name = "anthropic"
    strategy: Strategy = "prefill"
    honours_idempotency = False
    default_base_url = "https://api.anthropic.com"
    key_var = "ANTHROPIC_API_KEY"
    base_url_var = "ANTHROPIC_BASE_URL"

    def __init__(
        self, *, max_tokens: int = 4096, version: str = "2023-06-01", **common: Any
    ) -> None:
        super().__init__(**common)
        self.max_tokens = max_tokens
        self.version = version

    async def stream(self, call: ModelCall) -> AsyncIterator[ProviderEvent]:
        messages, held = anthropic_messages(call.items, provider=self.name)
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens,
                                "messages": messages, "stream": True}  # fmt: skip
        if call.system:
            body["system"] = call.system
        if call.tools:
            body["tools"] = _tools(call.tools)
        prefill = bool(messages) and messages[-1]["role"] == "assistant"
        if call.output is not None and not prefill:
            # JSON outputs: the answer is JSON in this shape. Not with a prefill (a recovered
            # partial being continued), which the mode refuses: the answer is still checked.
            body["output_config"] = {
                "format": {"type": "json_schema", "schema": anthropic_schema(call.output.schema)}
            }
        headers = {"x-api-key": self._key, "anthropic-version": self.version,
                   "content-type": "application/json"}  # fmt: skip
        source = post_sse(self.fetch, self.name, f"{self.base_url}/v1/messages", headers, body)
        blocks: dict[int, dict[str, Any]] = {}
        input_tokens = output_tokens = 0
        reason = "stop"
        try:
            async for event in source:
                try:
                    data = json.loads(event.data)
                except ValueError:
                    continue
                kind = data.get("type") if isinstance(data, dict) else None
                if kind == "message_start":
                    message = data.get("message") or {}
                    input_tokens = int((message.get("usage") or {}).get("input_tokens", 0))
                    yield Started({"messageId": message.get("id")}, input_tokens)
                elif kind == "content_block_start":
                    blocks[int(data["index"])] = dict(data.get("content_block") or {}, json="")
                elif kind == "content_block_delta":
                    index, delta = int(data["index"]), data.get("delta") or {}
                    if delta.get("type") == "text_delta":
                        text = str(delta.get("text", ""))
                        if held:  # the seam of a prefill: the held-back whitespace stands
                            text, held = _after_seam(held, text), ""  # for what it repeats
                        if text:
                            yield TextDelta(f"b{index}", text)
                    elif delta.get("type") == "input_json_delta":
                        blocks[index]["json"] += str(delta.get("partial_json", ""))
                elif kind == "content_block_stop":
                    block = blocks.pop(int(data["index"]), {})
                    if block.get("type") == "tool_use":
                        args = tool_arguments(self.name, str(block["name"]), block["json"])
                        yield ToolCallDone(str(block["id"]), str(block["name"]), args)
                elif kind == "message_delta":
                    stop = (data.get("delta") or {}).get("stop_reason")
                    reason = _REASONS.get(str(stop), "other") if stop else reason
                    output_tokens = int((data.get("usage") or {}).get("output_tokens", 0))
                elif kind == "message_stop":
                    yield Finished(reason, Usage(input_tokens, output_tokens))
                    return
                elif kind == "error":
                    error = data.get("error") or {}
                    raise ProviderStreamError(self.name, str(error.get("message") or error))
            raise ProviderStreamError(self.name, "the stream ended before message_stop")
        finally:
            await source.aclose()
