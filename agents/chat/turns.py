"""Chat turns one at a time, and what an overlapping submit does (``message_concurrency``).

Every turn of a chat (a client's submit or regenerate, a tool continuation, ``save_messages``,
``continue_last_turn``, a recovery) runs through one :class:`TurnQueue`, so two turns never
stream into the transcript at once (research §5.1). A turn captures the queue's *generation*
when it is enqueued; ``clear`` bumps the generation, and a turn whose generation is stale when
its time comes does not run (it is *skipped*).

:class:`SubmitPolicy` decides what a submit that arrives while turns are active or queued does
(research §5.2; regenerations and programmatic turns always queue):

* ``queue`` (the default): it runs after the turns before it;
* ``drop``: it is refused (not persisted; the sender gets a rollback snapshot and a skipped
  answer);
* ``latest``: it is persisted, and when its turn comes it is skipped if a newer overlapping
  submit exists — only the newest runs;
* ``merge``: as ``latest``, and the trailing user messages sent meanwhile are merged into one;
* ``{"strategy": "debounce", "debounceMs": N}``: as ``latest``, and the surviving turn first
  waits until ``arrival + N`` ms (default 750).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

__all__ = [
    "DEFAULT_DEBOUNCE_MS",
    "Decision",
    "Policy",
    "SubmitPolicy",
    "TurnQueue",
    "TurnSkipped",
    "parse_policy",
]

T = TypeVar("T")

#: ``MESSAGE_DEBOUNCE_MS`` of the SDK.
DEFAULT_DEBOUNCE_MS = 750.0

Strategy = Literal["queue", "drop", "latest", "merge", "debounce"]


@dataclass(frozen=True, slots=True)
class Policy:
    """A parsed ``message_concurrency`` value."""

    strategy: Strategy = "queue"
    debounce_ms: float = DEFAULT_DEBOUNCE_MS


def parse_policy(value: Any) -> Policy:
    """``message_concurrency`` as the SDK reads it; an unknown value is the default (queue)."""
    if isinstance(value, str) and value in ("queue", "drop", "latest", "merge"):
        return Policy(value)  # type: ignore[arg-type]
    if isinstance(value, Mapping) and value.get("strategy") == "debounce":
        raw = value.get("debounceMs")
        if isinstance(raw, int | float) and not isinstance(raw, bool) and raw >= 0:
            return Policy("debounce", float(raw))
        return Policy("debounce")
    return Policy()


class TurnSkipped(Exception):
    """A queued turn did not run: a clear made it stale, or a newer submit superseded it.

    Internal control flow of the chat layer (the request is answered with ``outcome:
    "skipped"``), never seen by user code.
    """


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with one submit: refuse it (``drop``), or run it under ``submit_seq``."""

    drop: bool
    submit_seq: int
    supersedable: bool
    merge_from: bool = False


class SubmitPolicy:
    """Numbers overlapping submits and tells a queued turn whether it was superseded."""

    __slots__ = ("_latest_seq", "_seq")

    def __init__(self) -> None:
        self._seq = 0
        self._latest_seq = 0

    def decide(self, policy: Policy, *, overlapping: bool, submit: bool) -> Decision:
        """The decision for a request that arrives now (``submit``: not a regenerate)."""
        self._seq += 1
        seq = self._seq
        if not submit or policy.strategy == "queue" or not overlapping:
            return Decision(False, seq, False)
        if policy.strategy == "drop":
            return Decision(True, seq, False)
        self._latest_seq = seq
        return Decision(False, seq, True, merge_from=policy.strategy == "merge")

    def superseded(self, decision: Decision) -> bool:
        """Whether a newer overlapping submit arrived after ``decision``'s."""
        return decision.supersedable and self._latest_seq > decision.submit_seq

    def reset(self) -> None:
        self._latest_seq = 0


class TurnQueue:
    """Runs turns strictly one after another, in the order they were enqueued."""

    __slots__ = ("_active", "_generation", "_queued", "_tail")

    def __init__(self) -> None:
        self._tail: asyncio.Future[None] | None = None
        self._generation = 0
        self._queued = 0
        self._active: str | None = None

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def active_request_id(self) -> str | None:
        """The request id of the turn running now, if any."""
        return self._active

    @property
    def busy(self) -> bool:
        """Whether a turn is running or waiting (what makes a submit *overlap*)."""
        return self._queued > 0

    async def idle(self) -> None:
        """Until every turn enqueued so far has ended (returns at once when none is)."""
        while self._tail is not None:
            await asyncio.shield(self._tail)

    def bump_generation(self) -> None:
        """``clear``: every turn enqueued so far is stale."""
        self._generation += 1

    async def run(
        self,
        request_id: str,
        fn: Callable[[], Awaitable[T]],
        *,
        generation: int | None = None,
        before: Callable[[], Awaitable[None]] | None = None,
    ) -> T:
        """Run ``fn()`` once every earlier turn is done; :class:`TurnSkipped` if it went stale.

        ``before`` runs at the head of the queue, before the staleness check (a debounce wait).
        """
        captured = self._generation if generation is None else generation
        previous = self._tail
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._tail = done
        self._queued += 1
        try:
            if previous is not None:
                await asyncio.shield(previous)
            if before is not None:
                await before()
            if captured != self._generation:
                raise TurnSkipped(f"turn {request_id} was enqueued before a clear")
            self._active = request_id
            try:
                return await fn()
            finally:
                self._active = None
        finally:
            self._queued -= 1
            if not done.done():
                done.set_result(None)
            if self._tail is done:
                self._tail = None
