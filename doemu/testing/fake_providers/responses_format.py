"""One OpenAI Responses object and its stream events, with the field names of the real API.

The events follow ``openai.types.responses``: ``response.created`` (``response.queued`` in
background mode), ``response.in_progress``; per message item ``response.output_item.added``,
``response.content_part.added``, ``response.output_text.delta`` …, ``response.output_text.done``,
``response.content_part.done``, ``response.output_item.done``; per function call
``response.output_item.added`` (``function_call`` item), ``response.function_call_arguments.delta``,
``response.function_call_arguments.done``, ``response.output_item.done``; finally
``response.completed`` with the whole response and its ``usage``. Every event carries ``type``
and ``sequence_number`` (its index in the stored list, from 0), which is what
``GET /v1/responses/{id}?stream=true&starting_after=N`` resumes from.

The response object itself (:meth:`ResponseState.obj`) is kept current as the generation goes,
so retrieving it mid-generation shows its status and the output so far.
"""

from __future__ import annotations

import copy
import time
from typing import Any

from .engine import Event
from .intake import new_id
from .script import GenerationStatus, Item, Text

__all__ = ["ResponseState"]


class ResponseState:
    """A response's object and event stream (a :class:`~.engine.Format`)."""

    def __init__(self, body: dict[str, Any], *, background: bool, input_tokens: int) -> None:
        self.id = new_id("resp_")
        self.body = body
        self.background = background
        self.created_at = int(time.time())
        self.completed_at: int | None = None
        self.status = "queued" if background else "in_progress"
        self.output: list[dict[str, Any]] = []
        self.input_tokens = input_tokens
        self.output_tokens = 0
        self.sequence = 0

    def obj(self) -> dict[str, Any]:
        """The response object as ``GET /v1/responses/{id}`` returns it now."""
        body = self.body
        done = self.status in ("completed", "incomplete")
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": self.status,
            "background": self.background,
            "completed_at": self.completed_at,
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "metadata": body.get("metadata") or {},
            "model": body.get("model"),
            "output": copy.deepcopy(self.output),
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": {"effort": None, "summary": None},
            "service_tier": "default",
            "store": body.get("store", True),
            "temperature": body.get("temperature", 1.0),
            "text": body.get("text") or {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [],
            "top_p": body.get("top_p", 1.0),
            "truncation": body.get("truncation", "disabled"),
            "usage": self.usage() if done else None,
            "user": body.get("user"),
        }

    def usage(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": self.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.input_tokens + self.output_tokens,
        }

    def _event(self, kind: str, **fields: Any) -> Event:
        payload = {"type": kind, **copy.deepcopy(fields), "sequence_number": self.sequence}
        self.sequence += 1
        return kind, payload

    # -- Format ---------------------------------------------------------------------------------

    def opening(self) -> list[Event]:
        events = [self._event("response.created", response=self.obj())]
        if self.background:
            events.append(self._event("response.queued", response=self.obj()))
            self.status = "in_progress"
        events.append(self._event("response.in_progress", response=self.obj()))
        return events

    def item_start(self, index: int, item: Item) -> list[Event]:
        if isinstance(item, Text):
            message: dict[str, Any] = {
                "id": new_id("msg_"),
                "type": "message",
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            }
            self.output.append(message)
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            added = self._event("response.output_item.added", output_index=index, item=message)
            message["content"].append(part)
            return [added, self._part_event("response.content_part.added", index)]
        call = {
            "id": new_id("fc_"),
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": item.id or new_id("call_"),
            "name": item.name,
        }
        self.output.append(call)
        return [self._event("response.output_item.added", output_index=index, item=call)]

    def delta(self, index: int, item: Item, piece: str) -> list[Event]:
        self.output_tokens += 1
        entry = self.output[index]
        if isinstance(item, Text):
            entry["content"][0]["text"] += piece
            return [
                self._event(
                    "response.output_text.delta",
                    item_id=entry["id"],
                    output_index=index,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            ]
        entry["arguments"] += piece
        return [
            self._event(
                "response.function_call_arguments.delta",
                item_id=entry["id"],
                output_index=index,
                delta=piece,
            )
        ]

    def item_end(self, index: int, item: Item) -> list[Event]:
        entry = self.output[index]
        entry["status"] = "completed"
        if isinstance(item, Text):
            done = [
                self._event(
                    "response.output_text.done",
                    item_id=entry["id"],
                    output_index=index,
                    content_index=0,
                    text=entry["content"][0]["text"],
                    logprobs=[],
                ),
                self._part_event("response.content_part.done", index),
            ]
        else:
            done = [
                self._event(
                    "response.function_call_arguments.done",
                    item_id=entry["id"],
                    output_index=index,
                    arguments=entry["arguments"],
                )
            ]
        return [*done, self._event("response.output_item.done", output_index=index, item=entry)]

    def closing(self) -> list[Event]:
        self.status = "completed"
        self.completed_at = int(time.time())
        return [self._event("response.completed", response=self.obj())]

    def stopped(self, status: GenerationStatus) -> None:
        self.status = status
        for entry in self.output:
            if entry["status"] == "in_progress":
                entry["status"] = "incomplete"

    def _part_event(self, kind: str, index: int) -> Event:
        entry = self.output[index]
        return self._event(
            kind,
            item_id=entry["id"],
            output_index=index,
            content_index=0,
            part=entry["content"][0],
        )
