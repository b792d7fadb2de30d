"""Workers AI through the ``env.AI`` binding: the default model source of Cloudflare's agents.

The adapter calls ``env.AI.run(model, {"messages": …, "tools": …, "stream": True})`` and reads
the ``ReadableStream`` it resolves to: Workers AI's server-sent events, ``{"response": delta}``
for text, ``tool_calls`` pieces (OpenAI's ``{index, id, function: {name, arguments}}``, or a
whole ``{name, arguments}`` call), a ``usage`` event, then ``[DONE]``. Messages go in the
chat-completions shape Workers AI takes (:func:`~agents.providers.openai_chat.chat_messages`,
with ``content`` never ``null``: the binding refuses it).

Workers AI stores nothing and promises no prefill, so a reply cut mid-stream is recovered as
chat completions' is (strategy ``"retry"``): the chat layer's bounded recovery asks again with
the partial answer as the last assistant message (plus ``prefill_instruction`` when given). A
stream that breaks while being read is transient (recovery continues the reply); a call the
binding rejects becomes :class:`~agents.providers.errors.ProviderHTTPError` with the HTTP
status of its answer (``env.AI.lastRequestHttpStatusCode``: 429 and 5xx are retried) or, with
no status, :class:`~agents.providers.errors.ProviderStreamError` in the binding's words.

Under ``doemu dev`` ``env.AI`` is served by the OpenAI-compatible endpoint of
``[tool.doemu.ai]``; on Cloudflare by Workers AI itself. The adapter is the same code on both.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
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
    tool_arguments,
)
from .errors import ProviderConfigError, ProviderError, ProviderHTTPError, ProviderStreamError
from .openai_chat import chat_messages
from .sse import SseEventDecoder

__all__ = ["WorkersAI"]


def _tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tools in Workers AI's documented shape: ``{name, description, parameters}``."""
    return [{"name": t.name, "description": t.description, "parameters": dict(t.parameters)}
            for t in tools]  # fmt: skip


def _bytes(piece: Any) -> bytes:
    to_bytes = getattr(piece, "to_bytes", None)  # a JS Uint8Array in a Worker
    if to_bytes is not None:
        return bytes(to_bytes())
    return piece.encode() if isinstance(piece, str) else bytes(piece)


class _Calls:
    """Tool calls as the stream delivers them: OpenAI-style pieces merged by ``index``, or
    whole flat calls, in the order they started."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.slots: dict[Any, dict[str, Any]] = {}

    def add(self, piece: Any) -> None:
        if not isinstance(piece, Mapping):
            return
        fn = piece.get("function")
        if isinstance(fn, Mapping) or "index" in piece:  # a delta of OpenAI's shape
            fn = fn if isinstance(fn, Mapping) else {}
            slot = self.slots.setdefault(("i", piece.get("index", 0)),
                                         {"id": "", "name": "", "arguments": ""})  # fmt: skip
            slot["id"] = piece.get("id") or slot["id"]
            slot["name"] = fn.get("name") or slot["name"]
            slot["arguments"] += str(fn.get("arguments") or "")
            return
        arguments = piece.get("arguments", {})
        self.slots[("f", len(self.slots))] = {
            "id": str(piece.get("id") or ""),
            "name": str(piece.get("name") or ""),
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
        }

    def done(self) -> list[ToolCallDone]:
        return [
            ToolCallDone(s["id"] or f"call_{uuid.uuid4().hex[:16]}", s["name"],
                         tool_arguments(self.provider, s["name"], s["arguments"]))
            for s in self.slots.values()
        ]  # fmt: skip


class WorkersAI:
    """An adapter over the Workers AI binding (see the module docstring).

    ``WorkersAI.from_env(env, model="@cf/meta/llama-3.1-8b-instruct")`` uses ``env.AI`` (or
    ``binding="…"``); ``WorkersAI(env.AI, model=…)`` takes the binding itself.
    ``prefill_instruction``: a user message sent after a partial answer being continued (see
    :data:`~agents.providers.openai_chat.CONTINUE_INSTRUCTION`)."""

    name = "workers-ai"
    strategy: Strategy = "retry"
    honours_idempotency = False

    def __init__(self, binding: Any, *, model: str, prefill_instruction: str | None = None):
        self.binding = binding
        self.model = model
        self.prefill_instruction = prefill_instruction

    @classmethod
    def from_env(cls, env: Any, *, model: str, binding: str = "AI", **options: Any) -> WorkersAI:
        """The adapter over ``env.<binding>``, refused by name when the Worker has none."""
        ai = env.get(binding) if isinstance(env, dict) else getattr(env, binding, None)
        if ai is None:
            raise ProviderConfigError(
                f'env has no {binding} binding: add [ai] binding = "{binding}" to the wrangler file'
            )
        return cls(ai, model=model, **options)

    def __repr__(self) -> str:
        return f"WorkersAI(model={self.model!r})"

    def _refused(self, exc: Exception) -> ProviderError:
        """A rejected ``run`` in the binding's words, with its HTTP status when it had one."""
        message = str(getattr(exc, "message", None) or exc)
        status = getattr(exc, "status", None)
        if not isinstance(status, int):
            status = getattr(self.binding, "lastRequestHttpStatusCode", None)
        if isinstance(status, int) and status >= 400:
            return ProviderHTTPError(self.name, status, message, getattr(exc, "name", None))
        return ProviderStreamError(self.name, message)

    async def stream(self, call: ModelCall) -> AsyncIterator[ProviderEvent]:
        messages = chat_messages(
            call.items, call.system, self.prefill_instruction, provider=self.name
        )
        for message in messages:
            if message.get("content") is None:
                message["content"] = ""
        inputs: dict[str, Any] = {"messages": messages, "stream": True}
        if call.tools:
            inputs["tools"] = _tools(call.tools)
        try:
            body = await self.binding.run(self.model, inputs)
        except (ProviderError, asyncio.CancelledError):
            raise
        except Exception as exc:  # the binding's JS error
            raise self._refused(exc) from None
        yield Started({})  # accepted (and billed); nothing to re-attach to: no handle
        decoder = SseEventDecoder()
        calls = _Calls(self.name)
        usage: Usage | None = None
        iterator = body.__aiter__()
        finished = False
        try:
            while True:
                try:
                    piece = await iterator.__anext__()
                except StopAsyncIteration:
                    finished = True
                    break
                except (ProviderError, asyncio.CancelledError):
                    raise
                except Exception as exc:  # the stream broke mid-reply: transient
                    why = getattr(exc, "message", None) or exc
                    raise ProviderStreamError(
                        self.name, f"the stream broke mid-reply: {why}", transient=True
                    ) from exc
                for event in decoder.feed(_bytes(piece)):
                    if event.data.strip() == "[DONE]":
                        finished = True
                        done = calls.done()
                        for tool_call in done:
                            yield tool_call
                        yield Finished("tool-calls" if done else "stop", usage)
                        return
                    try:
                        data = json.loads(event.data)
                    except ValueError:
                        continue
                    if not isinstance(data, Mapping):
                        continue
                    if data.get("response"):
                        yield TextDelta("c0", str(data["response"]))
                    for piece_of_call in data.get("tool_calls") or ():
                        calls.add(piece_of_call)
                    if isinstance(data.get("usage"), Mapping):
                        u = data["usage"]
                        usage = Usage(int(u.get("prompt_tokens") or 0),
                                      int(u.get("completion_tokens") or 0))  # fmt: skip
            raise ProviderStreamError(self.name, "the stream ended before [DONE]")
        finally:
            if not finished:  # closed early (a watchdog, a cancelled turn): stop the model
                await _close(iterator, body)


async def _close(iterator: Any, body: Any) -> None:
    """Stop reading ``body``: its iterator's ``aclose`` releases and cancels it (its ``cancel``
    where the iterator has none), which closes the upstream connection."""
    for method in (getattr(iterator, "aclose", None), getattr(body, "cancel", None)):
        if method is None:
            continue
        try:
            result = method()
            if hasattr(result, "__await__"):
                await result
            return
        except Exception:
            continue
