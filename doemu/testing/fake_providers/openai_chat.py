"""OpenAI chat completions: ``POST /v1/chat/completions``, streamed or not.

A stream is ``data: <chat.completion.chunk>`` lines as in
``openai.types.chat.chat_completion_chunk``: a first delta ``{"role": "assistant", "content":
""}``, one chunk per text delta, a tool call as ``delta.tool_calls[{index, id, type: "function",
function: {name, arguments: ""}}]`` followed by its arguments delta, a last choice chunk with
``finish_reason`` (``stop`` or ``tool_calls``), the usage chunk (``choices: []``) only when
``stream_options.include_usage`` is set, then ``data: [DONE]``. Without ``stream`` the answer is
one ``chat.completion`` object. There is no idempotency here (the header is only recorded), and
a client that goes away, or a ``die_after`` cut, stops the generation.
"""

from __future__ import annotations

import copy
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .engine import Event
from .errors import openai_error
from .intake import new_id, openai_intake
from .relay import tied_generation
from .script import GenerationStatus, Item, Text
from .state import Ledger
from .tokens import chat_input_tokens

__all__ = ["ChatCompletion", "chat_route"]


class ChatCompletion:
    """One completion's chunks and final object (a :class:`~.engine.Format`)."""

    def __init__(self, body: dict[str, Any], input_tokens: int) -> None:
        self.id = new_id("chatcmpl-")
        self.model = body.get("model")
        self.created = int(time.time())
        options = body.get("stream_options")
        self.include_usage = isinstance(options, dict) and options.get("include_usage") is True
        self.input_tokens = input_tokens
        self.output_tokens = 0
        self.content = ""
        self.tool_calls: list[dict[str, Any]] = []
        self.tool_index: dict[int, int] = {}  # item index -> index among the tool calls

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"

    def usage(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.input_tokens,
            "completion_tokens": self.output_tokens,
            "total_tokens": self.input_tokens + self.output_tokens,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        }

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> Event:
        # A copy: the call's arguments grow after this chunk is stored, and relays send it later.
        delta = copy.deepcopy(delta)
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return None, self._object("chat.completion.chunk", [choice])

    def _object(self, kind: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
        chunk: dict[str, Any] = {
            "id": self.id,
            "object": kind,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": choices,
        }
        if self.include_usage or kind == "chat.completion":
            chunk["usage"] = None
        return chunk

    def final(self) -> dict[str, Any]:
        """The non-streaming answer: a ``chat.completion`` object."""
        message: dict[str, Any] = {
            "role": "assistant",
            "content": self.content or None,
            "refusal": None,
        }
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        choice = {
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": self.finish_reason,
        }
        return {**self._object("chat.completion", [choice]), "usage": self.usage()}

    # -- Format ---------------------------------------------------------------------------------

    def opening(self) -> list[Event]:
        return [self._chunk({"role": "assistant", "content": "", "refusal": None})]

    def item_start(self, index: int, item: Item) -> list[Event]:
        if isinstance(item, Text):
            return []
        position = self.tool_index[index] = len(self.tool_calls)
        call = {
            "id": item.id or new_id("call_"),
            "type": "function",
            "function": {"name": item.name, "arguments": ""},
        }
        self.tool_calls.append(call)
        return [self._chunk({"tool_calls": [{"index": position, **call}]})]

    def delta(self, index: int, item: Item, piece: str) -> list[Event]:
        self.output_tokens += 1
        if isinstance(item, Text):
            self.content += piece
            return [self._chunk({"content": piece})]
        position = self.tool_index[index]
        self.tool_calls[position]["function"]["arguments"] += piece
        delta = {"index": position, "function": {"arguments": piece}}
        return [self._chunk({"tool_calls": [delta]})]

    def item_end(self, index: int, item: Item) -> list[Event]:
        return []

    def closing(self) -> list[Event]:
        events = [self._chunk({}, self.finish_reason)]
        if self.include_usage:
            events.append(
                (None, {**self._object("chat.completion.chunk", []), "usage": self.usage()})
            )
        events.append((None, "[DONE]"))
        return events

    def stopped(self, status: GenerationStatus) -> None:
        pass


def chat_route(ledger: Ledger) -> Route:
    """``POST /v1/chat/completions``: each request that passes the checks is a new generation."""

    async def create(request: Request) -> Response:
        required = ("model", "messages")
        body = await openai_intake(request, ledger, "chat", "chat.completions", required)
        if isinstance(body, Response):
            return body
        completion = ChatCompletion(body, chat_input_tokens(body))
        return tied_generation(ledger, "chat", request, body, completion, openai_error)

    return Route("/v1/chat/completions", create, methods=["POST"])
