"""What a fake generation says and does: :class:`Reply` of :class:`Text` and :class:`ToolUse`.

A test scripts the model's answers instead of mocking an SDK, so the adapter under test meets the
real wire format *and* the failures a network brings: a pause (``hold_after``), a connection cut
mid-stream (``die_after``), a stream that never ends (``stall_after``), an HTTP error (``fail``).

A reply is a sequence of *deltas*: each chunk of a :class:`Text` is one text delta, and each
:class:`ToolUse` is one arguments delta (its whole JSON arguments). ``k`` in ``hold_after=k``,
``die_after=k`` and ``stall_after=k`` counts those deltas across the whole reply: the behaviour
starts once the ``k``-th delta has been sent (``k=0``: before the first). ``delay_ms`` is waited
between two deltas. Every delta is one billed output token (see :mod:`.tokens`).

When the queue is empty, a :data:`Responder` (``FakeLLM(responder=fn)``) may compute the reply
from the request instead: a fake that answers what it is asked, for demos and for tests whose
conversation is too long to script in advance.

:class:`Generation` and :class:`Stats` are the read side: snapshots of what the fake served and
billed, taken under its lock, so a test thread can read them while the server thread writes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "DEFAULT_REPLY",
    "ROUTES",
    "Api",
    "Generation",
    "GenerationStatus",
    "Item",
    "Reply",
    "Responder",
    "Retrieval",
    "Stats",
    "Text",
    "ToolUse",
]

Api = Literal["responses", "chat", "messages"]
"""The three wire formats: OpenAI Responses, OpenAI chat completions, Anthropic Messages."""

GenerationStatus = Literal["in_progress", "completed", "incomplete", "failed", "cancelled"]
"""``incomplete``: cut (die_after) or its client went away; ``failed``: a scripted ``fail``;
``cancelled``: a background response cancelled through ``POST /v1/responses/{id}/cancel``."""


@dataclass(frozen=True, init=False)
class Text:
    """Assistant text, streamed one delta per chunk: ``Text("Hello ", "world")`` is two deltas."""

    chunks: tuple[str, ...]

    def __init__(self, *chunks: str) -> None:
        object.__setattr__(self, "chunks", chunks)

    def deltas(self) -> tuple[str, ...]:
        """The pieces streamed, in order."""
        return self.chunks


@dataclass(frozen=True)
class ToolUse:
    """A function (tool) call: one arguments delta carrying ``json.dumps(arguments)``.

    ``id`` is the call id the client sees (Responses ``call_id``, chat ``tool_calls[].id``,
    Anthropic ``tool_use.id``); ``None`` gets a fresh provider-shaped one.
    """

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None

    @property
    def arguments_json(self) -> str:
        """The arguments as the wire carries them."""
        return json.dumps(dict(self.arguments))

    def deltas(self) -> tuple[str, ...]:
        """The pieces streamed: the whole arguments JSON at once."""
        return (self.arguments_json,)


Item = Text | ToolUse


@dataclass(frozen=True, init=False)
class Reply:
    """One scripted generation: its items in order, and how the stream behaves.

    ``fail=(status, message)`` answers the request with that HTTP status and the provider's real
    error body instead of generating anything (nothing is billed); ``retry_after`` (seconds) adds
    the ``Retry-After`` header a rate-limited or overloaded provider sends with it.
    """

    items: tuple[Item, ...]
    delay_ms: int
    hold_after: int | None
    die_after: int | None
    stall_after: int | None
    fail: tuple[int, str] | None
    retry_after: float | None

    def __init__(
        self,
        *items: Item,
        delay_ms: int = 0,
        hold_after: int | None = None,
        die_after: int | None = None,
        stall_after: int | None = None,
        fail: tuple[int, str] | None = None,
        retry_after: float | None = None,
    ) -> None:
        for item in items:
            if not isinstance(item, Text | ToolUse):
                raise TypeError(f"a Reply holds Text and ToolUse items, not {item!r}")
        object.__setattr__(self, "items", items)
        object.__setattr__(self, "delay_ms", delay_ms)
        object.__setattr__(self, "hold_after", hold_after)
        object.__setattr__(self, "die_after", die_after)
        object.__setattr__(self, "stall_after", stall_after)
        object.__setattr__(self, "fail", fail)
        object.__setattr__(self, "retry_after", retry_after)

    @property
    def delta_count(self) -> int:
        """How many deltas the whole reply streams (= its output tokens when it completes)."""
        return sum(len(item.deltas()) for item in self.items)

    @property
    def has_tool_use(self) -> bool:
        """Whether the reply ends in tool calls (stop reason ``tool_calls`` / ``tool_use``)."""
        return any(isinstance(item, ToolUse) for item in self.items)


DEFAULT_REPLY = Reply(Text("ok"))
"""What a generation says when nothing is scripted (and no responder answers)."""

Responder = Callable[[Api, dict[str, Any]], Reply | None]
"""``fn(api, request_body) -> Reply | None``: the reply of a generation nothing was scripted for,
computed from the request (its wire format ``api`` and its parsed JSON body); ``None`` leaves it to
:data:`DEFAULT_REPLY`. It runs on the fake's event loop, so it must not block; an exception it
raises is answered as the provider's HTTP 500 (the client sees the failure, the test goes on)."""


@dataclass(frozen=True)
class Generation:
    """One generation the fake started (or refused with a scripted ``fail``), as a snapshot.

    ``id`` is the provider's object id (``resp_…``, ``chatcmpl-…``, ``msg_…``); ``request`` the
    parsed JSON body; ``headers`` lower-cased; ``text`` all text generated so far.
    ``input_tokens``/``output_tokens`` are what this generation was billed.
    """

    id: str
    api: Api
    request: dict[str, Any]
    headers: dict[str, str]
    idempotency_key: str | None
    input_tokens: int
    output_tokens: int
    text: str
    status: GenerationStatus


@dataclass(frozen=True)
class Retrieval:
    """One ``GET /v1/responses/{id}?stream=true``: the ``starting_after`` it asked for (``None``:
    none) and the ``sequence_number`` of every event it was sent, in order — what proves a
    re-attaching client read nothing it already had."""

    response_id: str
    starting_after: int | None
    sent: tuple[int, ...]


ROUTES = (
    "responses.create",
    "responses.retrieve",
    "responses.cancel",
    "chat.completions",
    "messages",
)
"""The keys of :attr:`Stats.requests`, one per endpoint."""


@dataclass(frozen=True)
class Stats:
    """A snapshot of everything a :class:`~.FakeLLM` served and billed.

    ``requests`` counts every request that reached each route (authenticated or not); it has
    every key of :data:`ROUTES`, 0 for a route nobody called.
    """

    requests: dict[str, int]
    generations: list[Generation]
    billed_input_tokens: int
    billed_output_tokens: int
    #: The streamed retrievals of stored responses, in the order they arrived.
    retrievals: list[Retrieval] = field(default_factory=list)

    def by_api(self, api: Api) -> list[Generation]:
        """The generations of one wire format, in the order they started."""
        return [generation for generation in self.generations if generation.api == api]
