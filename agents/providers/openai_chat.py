"""Any OpenAI-compatible chat-completions endpoint: local servers, gateways, other vendors.

Such an endpoint neither stores responses nor promises to continue an assistant prefill, so a
cut reply is recovered by asking again (strategy ``"retry"``) with the AI SDK's continuation
prompt: the conversation with the partial answer as its last, assistant, message — what the
JavaScript ``AIChatAgent`` sends on a continuation, and how OpenAI-compatible servers (vLLM,
llama.cpp, LM Studio, Ollama…) are asked to continue a message. The new text is appended to the
partial, so the user still reads one message. A model that answers a trailing assistant message
with a fresh answer instead (OpenAI's own models tend to) can be told what to do with
``prefill_instruction=CONTINUE_INSTRUCTION``: a user message after the partial, the universal
fallback of the project's design notes, opt-in because it changes the conversation the model
reads.
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
from .files import chat_part
from .keys import HttpAdapter
from .transcript import File, Item, Text, ToolCall, result_text

__all__ = ["CONTINUE_INSTRUCTION", "OpenAIChatCompletions", "chat_messages"]

_REASONS = {"stop": "stop", "tool_calls": "tool-calls", "function_call": "tool-calls",
            "length": "length", "content_filter": "content-filter"}  # fmt: skip
#: An instruction to continue a cut answer, for ``prefill_instruction`` (opt-in).
CONTINUE_INSTRUCTION = (
    "Your previous answer was cut off. Continue exactly where it stopped, without repeating "
    "any of it and without any preamble."
)


def chat_messages(
    items: Sequence[Item],
    system: str | None = None,
    instruction: str | None = None,
    *,
    provider: str = "openai-chat",
) -> list[dict[str, Any]]:
    """Chat-completions ``messages`` for ``items`` (see
    :func:`~agents.providers.transcript.items_from_messages`), ``system`` first; a trailing
    assistant partial is followed by ``instruction`` as a user message when one is given. A
    message with files takes content parts (text, then each file as
    :func:`~agents.providers.files.chat_part` maps it; one it cannot take is refused)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    previous: Item | None = None
    for item in items:
        if isinstance(item, Text | File):
            joined = isinstance(previous, Text | File) and previous.role == item.role
            if isinstance(item, Text):
                part: Any = item.text
            else:
                part = chat_part(provider, item)
            if joined:
                _join(messages[-1], part)
            else:
                messages.append({"role": item.role, "content": part if isinstance(part, str)
                                 else [part]})  # fmt: skip
        elif isinstance(item, ToolCall):
            arguments = json.dumps(dict(item.args), ensure_ascii=False)
            call = {"id": item.call_id, "type": "function",
                    "function": {"name": item.name, "arguments": arguments}}  # fmt: skip
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        else:
            messages.append({"role": "tool", "tool_call_id": item.call_id,
                             "content": result_text(item.output)})  # fmt: skip
        previous = item
    last = messages[-1] if messages else None
    if instruction and last is not None and last["role"] == "assistant" and last.get("content"):
        if not last.get("tool_calls"):
            messages.append({"role": "user", "content": instruction})
    return messages


def _join(message: dict[str, Any], part: str | dict[str, Any]) -> None:
    """Add text or a file part to a message's content (text stays a string while it can)."""
    content = message["content"]
    if isinstance(part, str) and isinstance(content, str):
        message["content"] = content + part
        return
    parts = [{"type": "text", "text": content}] if isinstance(content, str) and content else []
    parts = parts if isinstance(content, str) else list(content)
    message["content"] = [*parts, {"type": "text", "text": part} if isinstance(part, str) else part]


def _tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": dict(t.parameters)}}
            for t in tools]  # fmt: skip


class OpenAIChatCompletions(HttpAdapter):
    """An adapter for ``POST {base_url}/chat/completions`` (streamed, usage included).

    ``from_env(env, model=…, base_url_var="MY_GATEWAY_URL")`` reads the key and base URL from
    ``env``; ``OpenAIChatCompletions(api_key=…, model=…, base_url=…)`` takes them as given.
    ``prefill_instruction`` (default ``None``): a user message sent after a partial answer
    being continued (see the module docstring; :data:`CONTINUE_INSTRUCTION` is one)."""

    name = "openai-chat"
    strategy: Strategy = "retry"
    honours_idempotency = False
    default_base_url = "https://api.openai.com/v1"
    key_var = "OPENAI_API_KEY"
    base_url_var = "OPENAI_BASE_URL"

    def __init__(self, *, prefill_instruction: str | None = None, **common: Any) -> None:
        super().__init__(**common)
        self.prefill_instruction = prefill_instruction

    async def stream(self, call: ModelCall) -> AsyncIterator[ProviderEvent]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": chat_messages(
                call.items, call.system, self.prefill_instruction, provider=self.name
            ),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if call.tools:
            body["tools"] = _tools(call.tools)
        if call.output is not None:  # Structured Outputs: the answer is JSON in this shape
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": call.output.name, "schema": dict(call.output.schema),
                                "strict": call.output.strict},
            }  # fmt: skip
        headers = {"authorization": f"Bearer {self._key}", "content-type": "application/json"}
        source = post_sse(self.fetch, self.name, f"{self.base_url}/chat/completions", headers, body)
        calls: dict[int, dict[str, str]] = {}
        reason, usage, started = "stop", None, False
        try:
            async for event in source:
                if event.data.strip() == "[DONE]":
                    for index in sorted(calls):
                        c = calls[index]
                        yield ToolCallDone(
                            c["id"], c["name"], tool_arguments(self.name, c["name"], c["arguments"])
                        )
                    yield Finished(reason, usage)
                    return
                try:
                    data = json.loads(event.data)
                except ValueError:
                    continue
                if not isinstance(data, dict):
                    continue
                if not started:  # the first chunk: the request was accepted (and is billed)
                    started = True
                    yield Started({})  # nothing to re-attach to: no handle
                if data.get("error"):
                    error = data["error"]
                    message = error.get("message") if isinstance(error, dict) else error
                    raise ProviderStreamError(self.name, str(message))
                if data.get("usage"):
                    u = data["usage"]
                    usage = Usage(
                        int(u.get("prompt_tokens", 0)), int(u.get("completion_tokens", 0))
                    )
                for choice in data.get("choices") or ():
                    delta = choice.get("delta") or {}
                    if delta.get("content"):
                        yield TextDelta("c0", str(delta["content"]))
                    for tc in delta.get("tool_calls") or ():
                        empty = {"id": "", "name": "", "arguments": ""}
                        slot = calls.setdefault(int(tc.get("index", 0)), empty)
                        function = tc.get("function") or {}
                        slot["id"] = tc.get("id") or slot["id"]
                        slot["name"] = function.get("name") or slot["name"]
                        slot["arguments"] += function.get("arguments") or ""
                    if choice.get("finish_reason"):
                        reason = _REASONS.get(str(choice["finish_reason"]), "other")
            raise ProviderStreamError(self.name, "the stream ended before [DONE]")
        finally:
            await source.aclose()
