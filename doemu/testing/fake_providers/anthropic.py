"""Anthropic Messages: ``POST /v1/messages``, streamed (SSE with ``event:`` lines) or not.

The stream follows ``anthropic.types.RawMessageStreamEvent``: ``message_start`` (the message with
``content: []``, ``stop_reason: null`` and ``usage.input_tokens``; ``output_tokens`` is 1 there,
as the real API sends it), then per text block ``content_block_start`` (``{"type": "text",
"text": ""}``), a ``ping`` after the first one, ``content_block_delta`` (``text_delta``) …,
``content_block_stop``; per tool use ``content_block_start`` (``{"type": "tool_use", "id",
"name", "input": {}}``), one ``input_json_delta`` with the whole JSON as ``partial_json``,
``content_block_stop``; finally ``message_delta`` (``stop_reason`` ``end_turn`` or ``tool_use``,
cumulative ``usage.output_tokens``) and ``message_stop``.

The real API's prefill rule is enforced (:mod:`.intake`): a final assistant message whose text
ends in whitespace is a 400 ``invalid_request_error``.
"""

from __future__ import annotations

import copy
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .engine import Event
from .errors import anthropic_error
from .intake import anthropic_intake, new_id
from .relay import tied_generation
from .script import GenerationStatus, Item, Text
from .state import Ledger
from .tokens import messages_input_tokens

__all__ = ["AnthropicMessage", "messages_route"]


class AnthropicMessage:
    """One message's events and final object (a :class:`~.engine.Format`)."""

    def __init__(self, body: dict[str, Any], input_tokens: int) -> None:
        self.id = new_id("msg_")
        self.model = body.get("model")
        self.input_tokens = input_tokens
        self.output_tokens = 0
        self.content: list[dict[str, Any]] = []
        self.stop_reason: str | None = None

    def message(self, *, starting: bool = False) -> dict[str, Any]:
        """The message object: complete for a non-streaming answer; ``starting``: as in
        ``message_start`` (no content yet, ``output_tokens`` 1 as the real API reports it)."""
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "content": copy.deepcopy(self.content),
            "model": self.model,
            "stop_reason": self.stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": self.input_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": 1 if starting else self.output_tokens,
                "service_tier": "standard",
            },
        }

    def final(self) -> dict[str, Any]:
        """The non-streaming answer: the whole message."""
        return self.message()

    @staticmethod
    def _event(kind: str, **fields: Any) -> Event:
        return kind, {"type": kind, **copy.deepcopy(fields)}

    # -- Format ---------------------------------------------------------------------------------

    def opening(self) -> list[Event]:
        return [self._event("message_start", message=self.message(starting=True))]

    def item_start(self, index: int, item: Item) -> list[Event]:
        if isinstance(item, Text):
            block: dict[str, Any] = {"type": "text", "text": ""}
        else:
            block = {"type": "tool_use", "id": item.id or new_id("toolu_"), "name": item.name}
            block["input"] = {}
        self.content.append(block)
        events = [self._event("content_block_start", index=index, content_block=block)]
        if index == 0:
            events.append(self._event("ping"))
        return events

    def delta(self, index: int, item: Item, piece: str) -> list[Event]:
        self.output_tokens += 1
        if isinstance(item, Text):
            self.content[index]["text"] += piece
            delta = {"type": "text_delta", "text": piece}
        else:
            delta = {"type": "input_json_delta", "partial_json": piece}
        return [self._event("content_block_delta", index=index, delta=delta)]

    def item_end(self, index: int, item: Item) -> list[Event]:
        if not isinstance(item, Text):
            self.content[index]["input"] = dict(item.arguments)
        return [self._event("content_block_stop", index=index)]

    def closing(self) -> list[Event]:
        tool_use = any(block["type"] == "tool_use" for block in self.content)
        self.stop_reason = "tool_use" if tool_use else "end_turn"
        return [
            self._event(
                "message_delta",
                delta={"stop_reason": self.stop_reason, "stop_sequence": None},
                usage={"output_tokens": self.output_tokens},
            ),
            self._event("message_stop"),
        ]

    def stopped(self, status: GenerationStatus) -> None:
        pass


def messages_route(ledger: Ledger) -> Route:
    """``POST /v1/messages``: each request that passes the checks is a new generation."""

    async def create(request: Request) -> Response:
        body = await anthropic_intake(request, ledger)
        if isinstance(body, Response):
            return body
        message = AnthropicMessage(body, messages_input_tokens(body))
        return tied_generation(ledger, "messages", request, body, message, anthropic_error)

    return Route("/v1/messages", create, methods=["POST"])
