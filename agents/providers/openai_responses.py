"""OpenAI's Responses API: background generations that survive the caller, retrieved by id.

With ``background: true`` (and ``store``) the response keeps generating on OpenAI's side when
the connection drops, and ``GET /v1/responses/{id}?stream=true&starting_after=N`` streams its
events after sequence number ``N`` — so an agent killed mid-reply re-attaches after the last
event it persisted, with no second generation and no second bill (strategy ``"retrieve"``).
The create request carries the operation id as its ``Idempotency-Key``: a create repeated
after a kill that came before the response id was stored is collapsed by the upstream.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

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
from .files import responses_part
from .keys import HttpAdapter
from .transcript import File, Item, Text, ToolCall, result_text

__all__ = ["OpenAIResponses", "responses_input"]


def responses_input(
    items: Sequence[Item], *, provider: str = "openai-responses"
) -> list[dict[str, Any]]:
    """The Responses API's input items for the conversation ``items``. A message with files
    takes content parts (``input_text``, then each file as
    :func:`~agents.providers.files.responses_part` maps it; one it cannot take is refused)."""
    out: list[dict[str, Any]] = []
    previous: Item | None = None
    for item in items:
        if isinstance(item, Text | File):
            part: str | dict[str, Any] = (
                item.text if isinstance(item, Text) else responses_part(provider, item)
            )
            if isinstance(previous, Text | File) and previous.role == item.role:
                _join(out[-1], part)
            else:
                out.append({"role": item.role,
                            "content": part if isinstance(part, str) else [part]})  # fmt: skip
        elif isinstance(item, ToolCall):
            out.append(
                {
                    "type": "function_call",
                    "call_id": item.call_id,
                    "name": item.name,
                    "arguments": json.dumps(dict(item.args), ensure_ascii=False),
                }
            )
        else:
            out.append(
                {
                    "type": "function_call_output",
                    "call_id": item.call_id,
                    "output": result_text(item.output),
                }
            )
        previous = item
    return out


def _join(message: dict[str, Any], part: str | dict[str, Any]) -> None:
    """Add text or a file part to a message's content (text stays a string while it can)."""
    content = message["content"]
    if isinstance(part, str) and isinstance(content, str):
        message["content"] = content + part
        return
    kind = "output_text" if message["role"] == "assistant" else "input_text"
    parts = list(content) if not isinstance(content, str) else (
        [{"type": kind, "text": content}] if content else [])  # fmt: skip
    message["content"] = [*parts, {"type": kind, "text": part} if isinstance(part, str) else part]


def _tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    # ``strict`` is a required field of the API's function tool; strict schemas would demand
    # ``additionalProperties: false`` and every property required, which a Tool need not say.
    return [
        {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": dict(t.parameters),
            "strict": False,
        }
        for t in tools
    ]


class OpenAIResponses(HttpAdapter):
    """An adapter for ``POST /v1/responses`` (background, streamed, stored)."""

    name = "openai-responses"
    strategy: Strategy = "retrieve"
    honours_idempotency = True
    default_base_url = "https://api.openai.com/v1"
    key_var = "OPENAI_API_KEY"
    base_url_var = "OPENAI_BASE_URL"

    def __init__(
        self,
        *,
        background: bool = True,
        max_output_tokens: int | None = None,
        options: Mapping[str, Any] | None = None,
        **common: Any,
    ) -> None:
        super().__init__(**common)
        self.background = background
        #: Only a background response outlives the connection: without it, ask again.
        self.strategy = "retrieve" if background else "retry"
        self.max_output_tokens = max_output_tokens
        self.options = dict(options or {})

    def _headers(self, call: ModelCall) -> dict[str, str]:
        headers = {"authorization": f"Bearer {self._key}", "content-type": "application/json"}
        if call.idempotency_key and not call.resume:
            headers["idempotency-key"] = call.idempotency_key
        return headers

    def _events(self, call: ModelCall) -> AsyncGenerator[Any, None]:
        fetch = self.fetch
        if call.resume:
            response_id = quote(str(call.resume["responseId"]), safe="")
            after = int(call.resume.get("after", -1))
            url = f"{self.base_url}/responses/{response_id}?stream=true"
            if after >= 0:
                url += f"&starting_after={after}"
            return post_sse(fetch, self.name, url, self._headers(call), method="GET")
        body: dict[str, Any] = {
            "model": self.model,
            "input": responses_input(call.items, provider=self.name),
            "stream": True,
            "store": True,
            "background": self.background,
            **self.options,
        }
        if call.system:
            body["instructions"] = call.system
        if call.tools:
            body["tools"] = _tools(call.tools)
        if call.output is not None:  # Structured Outputs: the answer is JSON in this shape
            text = dict(body.get("text") or {})
            text["format"] = {
                "type": "json_schema",
                "name": call.output.name,
                "schema": dict(call.output.schema),
                "strict": call.output.strict,
            }
            body["text"] = text
        if self.max_output_tokens is not None:
            body["max_output_tokens"] = self.max_output_tokens
        return post_sse(fetch, self.name, f"{self.base_url}/responses", self._headers(call), body)

    async def stream(self, call: ModelCall) -> AsyncIterator[ProviderEvent]:
        calls = 0
        source = self._events(call)
        try:
            async for event in source:
                try:
                    data = json.loads(event.data)
                except ValueError:
                    continue
                kind = data.get("type") if isinstance(data, dict) else None
                seq = data.get("sequence_number")
                if kind == "response.created":
                    yield Started({"responseId": data["response"]["id"]})
                elif kind == "response.output_text.delta":
                    yield TextDelta(str(data.get("item_id")), str(data.get("delta", "")), seq)
                elif kind == "response.output_item.done":
                    item = data.get("item") or {}
                    if item.get("type") == "function_call":
                        calls += 1
                        args = tool_arguments(
                            self.name, str(item.get("name")), item.get("arguments") or ""
                        )
                        yield ToolCallDone(str(item["call_id"]), str(item["name"]), args, seq)
                elif kind in ("response.completed", "response.incomplete"):
                    response = data.get("response") or {}
                    usage = response.get("usage") or {}
                    tool_calls = calls or any(
                        o.get("type") == "function_call" for o in response.get("output") or ()
                    )
                    reason = "tool-calls" if tool_calls else "stop"
                    if kind == "response.incomplete":
                        reason = "length"
                    yield Finished(
                        reason,
                        Usage(int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)))
                        if usage
                        else None,
                    )
                    return
                elif kind in ("response.failed", "error", "response.cancelled"):
                    error = (data.get("response") or {}).get("error") or data.get("error") or data
                    message = error.get("message") if isinstance(error, dict) else str(error)
                    raise ProviderStreamError(self.name, str(message or kind))
            raise ProviderStreamError(self.name, "the stream ended before response.completed")
        finally:
            await source.aclose()
