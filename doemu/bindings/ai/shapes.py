"""Workers AI's inputs and outputs, and the OpenAI wire format they are served from locally.

A text model takes ``{"messages": [...]}`` or ``{"prompt": "..."}`` with ``tools`` and the
sampling options, and answers ``{"response": "...", "tool_calls": [{"name", "arguments"}],
"usage": {...}}``; streamed, it sends ``data: {"response": "<delta>"}`` events, a last one with
the ``usage``, then ``data: [DONE]``. An embedding model (``@cf/baai/bge-*``) takes
``{"text": "..." | [...]}`` and answers ``{"shape": [n, d], "data": [[...]], "pooling"}``.
These functions translate both ways; what Workers AI accepts in two spellings (a tool as
``{name, description, parameters}`` or OpenAI's ``{type: "function", function: {...}}``, an
assistant tool call flat or OpenAI-shaped) is sent in OpenAI's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from .errors import InferenceUpstreamError

__all__ = [
    "SAMPLING_KEYS",
    "StreamTranslator",
    "Task",
    "chat_body",
    "embeddings_body",
    "embeddings_output",
    "sse_event",
    "task_of",
    "text_output",
]

Task = Literal["text", "embeddings"]

#: Workers AI text-generation options with the same name and meaning in chat completions.
SAMPLING_KEYS = ("max_tokens", "temperature", "top_p", "seed", "frequency_penalty",
                 "presence_penalty")  # fmt: skip


def _bad_input(model: str, detail: str) -> InferenceUpstreamError:
    # 5006 is Workers AI's code for inputs that fail the model's schema.
    return InferenceUpstreamError(f"5006: {model}: {detail}")


def task_of(model: str, inputs: Any) -> Task:
    """What ``inputs`` ask of ``model``: text generation or embeddings (a clear 5006 else)."""
    if not isinstance(inputs, Mapping):
        raise _bad_input(
            model,
            f"inputs must be an object like {{'messages': [...]}}, {{'prompt': '...'}} or "
            f"{{'text': [...]}}, got {type(inputs).__name__}",
        )
    if "messages" in inputs or "prompt" in inputs:
        return "text"
    if "text" in inputs:
        return "embeddings"
    keys = ", ".join(map(repr, inputs)) or "none"
    raise _bad_input(
        model,
        "required properties are 'messages' or 'prompt' (text generation) or 'text' "
        f"(embeddings); got {keys}",
    )


def _tool(model: str, tool: Any) -> dict[str, Any]:
    if isinstance(tool, Mapping) and isinstance(tool.get("function"), Mapping):
        fn = tool["function"]
    elif isinstance(tool, Mapping):
        fn = tool
    else:
        raise _bad_input(model, f"each tool must be an object, got {type(tool).__name__}")
    if not isinstance(fn.get("name"), str) or not fn["name"]:
        raise _bad_input(model, "each tool needs a 'name'")
    spec: dict[str, Any] = {"name": fn["name"]}
    if fn.get("description") is not None:
        spec["description"] = str(fn["description"])
    spec["parameters"] = dict(fn.get("parameters") or {"type": "object", "properties": {}})
    return {"type": "function", "function": spec}


def _call(call: Any, fallback_id: str) -> dict[str, Any]:
    """An assistant's tool call in OpenAI's shape (Workers AI's flat one converted)."""
    fn = call.get("function") if isinstance(call.get("function"), Mapping) else call
    arguments = fn.get("arguments", {})
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    call_id = call.get("id") or fallback_id
    return {"id": str(call_id), "type": "function",
            "function": {"name": str(fn.get("name") or ""), "arguments": arguments}}  # fmt: skip


def _messages(model: str, messages: Any) -> list[dict[str, Any]]:
    if not isinstance(messages, list) or not messages:
        raise _bad_input(model, "'messages' must be a non-empty list of {role, content} objects")
    out: list[dict[str, Any]] = []
    pending: list[str] = []  # the last assistant's call ids, for tool messages that name none
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise _bad_input(model, f"messages[{index}] must be an object with a 'role'")
        item = dict(message)
        if item["role"] == "assistant" and item.get("tool_calls"):
            calls = [_call(c, f"call_{index}_{i}") for i, c in enumerate(item["tool_calls"])
                     if isinstance(c, Mapping)]  # fmt: skip
            item["tool_calls"] = calls
            pending = [c["id"] for c in calls]
        elif item["role"] == "tool":
            if not item.get("tool_call_id") and pending:
                item["tool_call_id"] = pending[0]
            if item.get("tool_call_id") in pending:
                pending.remove(item["tool_call_id"])
            item.pop("name", None)
            if not isinstance(item.get("content"), str):
                item["content"] = json.dumps(item.get("content"), ensure_ascii=False)
        out.append(item)
    return out


def chat_body(model: str, endpoint_model: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The chat-completions request for a Workers AI text-generation ``inputs``."""
    if "messages" in inputs:
        messages = _messages(model, inputs["messages"])
    else:
        prompt = inputs["prompt"]
        if not isinstance(prompt, str) or not prompt:
            raise _bad_input(model, "'prompt' must be a non-empty string")
        messages = [{"role": "user", "content": prompt}]
    body: dict[str, Any] = {"model": endpoint_model, "messages": messages}
    for key in SAMPLING_KEYS:
        if inputs.get(key) is not None:
            body[key] = inputs[key]
    tools = inputs.get("tools")
    if tools:
        if not isinstance(tools, list):
            raise _bad_input(model, "'tools' must be a list")
        body["tools"] = [_tool(model, tool) for tool in tools]
    fmt = inputs.get("response_format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        # Workers AI's json_schema is the schema itself; OpenAI's wraps it with a name.
        schema = {"name": "response", "schema": fmt.get("json_schema") or {}}
        body["response_format"] = {"type": "json_schema", "json_schema": schema}
    elif isinstance(fmt, Mapping) and fmt.get("type") == "json_object":
        body["response_format"] = {"type": "json_object"}
    return body


def _usage(usage: Any) -> dict[str, int]:
    usage = usage if isinstance(usage, Mapping) else {}
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": int(usage.get("total_tokens") or prompt + completion)}  # fmt: skip


def _arguments(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw or "{}")
    except ValueError:
        return raw  # as the model wrote it: the caller sees what it got


def text_output(answer: Any) -> dict[str, Any]:
    """A chat completion as Workers AI answers a text-generation request."""
    choices = answer.get("choices") if isinstance(answer, Mapping) else None
    message = (choices[0].get("message") if choices else None) or {}
    out: dict[str, Any] = {"response": message.get("content") or ""}
    calls = [c for c in message.get("tool_calls") or () if isinstance(c, Mapping)]
    if calls:
        out["tool_calls"] = [
            {"name": (c.get("function") or {}).get("name"),
             "arguments": _arguments((c.get("function") or {}).get("arguments"))}
            for c in calls
        ]  # fmt: skip
    out["usage"] = _usage(answer.get("usage") if isinstance(answer, Mapping) else None)
    return out


def sse_event(data: Any) -> bytes:
    """One ``data:`` event of a Workers AI stream."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {text}\n\n".encode()


class StreamTranslator:
    """Chat-completion chunks in, Workers AI stream events out.

    Text deltas become ``{"response": delta}``; tool-call deltas pass as they come (OpenAI's
    ``{index, id, type, function: {name, arguments}}`` pieces, which Workers AI streams for the
    models that call tools); the usage chunk becomes ``{"response": "", "usage": {...}}``.
    """

    def __init__(self) -> None:
        self.usage: dict[str, int] | None = None

    def feed(self, chunk: Any) -> list[dict[str, Any]]:
        if not isinstance(chunk, Mapping):
            return []
        events: list[dict[str, Any]] = []
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") if isinstance(choice, Mapping) else None
            if not isinstance(delta, Mapping):
                continue
            if delta.get("content"):
                events.append({"response": str(delta["content"])})
            if delta.get("tool_calls"):
                events.append({"response": "", "tool_calls": list(delta["tool_calls"])})
        if chunk.get("usage"):
            self.usage = _usage(chunk["usage"])
        return events

    def closing(self) -> list[dict[str, Any]]:
        """The last event before ``[DONE]``: the usage (zeros when the endpoint sent none)."""
        return [{"response": "", "usage": self.usage or _usage(None)}]


def embeddings_body(model: str, endpoint_model: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The embeddings request for ``{"text": "..." | [...]}``."""
    text = inputs["text"]
    texts = [text] if isinstance(text, str) else text
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise _bad_input(model, "'text' must be a string or a non-empty list of strings")
    return {"model": endpoint_model, "input": texts, "encoding_format": "float"}


def embeddings_output(model: str, answer: Any, pooling: Any) -> dict[str, Any]:
    """An embeddings answer as Workers AI gives it: ``shape``, ``data`` and ``pooling``."""
    rows = answer.get("data") if isinstance(answer, Mapping) else None
    if not isinstance(rows, list):
        raise InferenceUpstreamError(f"{model}: the endpoint's embeddings answer has no data")
    ordered = sorted((r for r in rows if isinstance(r, Mapping)), key=lambda r: r.get("index", 0))
    vectors = [list(r.get("embedding") or []) for r in ordered]
    width = len(vectors[0]) if vectors else 0
    return {"shape": [len(vectors), width], "data": vectors,
            "pooling": pooling if pooling in ("mean", "cls") else "mean"}  # fmt: skip
