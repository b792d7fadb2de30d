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
* ``merge``: as ``latest``, and the run of user messages sent since the first overlap is
  collapsed into one (:func:`merge_queued_user_messages`) — before the turn queues and again
  when it reaches the head of the queue, so the newest turn answers every one of them;
* ``{"strategy": "debounce", "debounceMs": N}``: as ``latest``, and the surviving turn first
  waits until ``arrival + N`` ms (default 750) by the agent's clock (``Date.now()``, which a
  test's manual clock drives), then checks again whether it was superseded.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

__all__ = [
    "DEFAULT_DEBOUNCE_MS",
    "Decision",
    "Policy",
    "SubmitPolicy",
    "TurnQueue",
    "TurnSkipped",
    "merge_queued_user_messages",
    "parse_policy",
    "wait_for_time",
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
    merge: bool = False
    #: ``debounce``: the time (ms since the epoch) the turn waits for before it may run.
    debounce_until: float | None = None
    #: The newest overlapping submit before this one (what :meth:`SubmitPolicy.withdraw` restores).
    previous_latest: int = 0


class SubmitPolicy:
    """Numbers overlapping submits and tells a queued turn whether it was superseded."""

    __slots__ = ("_latest_seq", "_seq")

    def __init__(self) -> None:
        self._seq = 0
        self._latest_seq = 0

    def decide(self, policy: Policy, *, overlapping: bool, submit: bool, now: float) -> Decision:
        """The decision for a request that arrives at ``now`` (``submit``: not a regenerate)."""
        self._seq += 1
        seq = self._seq
        if not submit or policy.strategy == "queue" or not overlapping:
            return Decision(False, seq, False)
        if policy.strategy == "drop":
            return Decision(True, seq, False)
        previous, self._latest_seq = self._latest_seq, seq
        until = now + policy.debounce_ms if policy.strategy == "debounce" else None
        return Decision(
            False,
            seq,
            True,
            merge=policy.strategy == "merge",
            debounce_until=until,
            previous_latest=previous,
        )

    def withdraw(self, decision: Decision) -> None:
        """A submit that was refused after its decision (it could not be saved) supersedes
        nothing: the newest overlapping submit is the one before it again."""
        if decision.supersedable and self._latest_seq == decision.submit_seq:
            self._latest_seq = decision.previous_latest

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
    ) -> T:
        """Run ``fn()`` once every earlier turn is done; :class:`TurnSkipped` if it went stale."""
        captured = self._generation if generation is None else generation
        previous = self._tail
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._tail = done
        self._queued += 1
        try:
            if previous is not None:
                await asyncio.shield(previous)
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


#: How often :func:`wait_for_time` looks at the clock again (seconds): a manual clock moved by a
#: test is noticed within this long.
_CLOCK_POLL_S = 0.05


async def wait_for_time(now: Callable[[], float], until_ms: float) -> None:
    """Until ``now() >= until_ms``: sleeps in short slices, so the wait follows the agent's
    clock (real time on Cloudflare; a manual clock in tests) rather than the loop's."""
    while (remaining := until_ms - now()) > 0:  # noqa: ASYNC110 - the clock is no event
        await asyncio.sleep(min(remaining / 1000, _CLOCK_POLL_S))


def merge_queued_user_messages(messages: Sequence[Any], start: int) -> list[Any] | None:
    """The transcript with the run of user messages from index ``start`` collapsed into one, or
    None when that run has fewer than two messages (``_getMergedQueuedUserMessages``).

    The merged message is the *last* one of the run (its id and fields) with the parts of all of
    them: text parts joined by a blank line into one text part, other parts kept in order.
    """
    end = start
    while end < len(messages) and messages[end].get("role") == "user":
        end += 1
    run = list(messages[start:end])
    if len(run) < 2:
        return None
    parts: list[Any] = copy.deepcopy(list(run[0].get("parts") or []))
    for message in run[1:]:
        _append_text(parts, "\n\n")
        for part in copy.deepcopy(list(message.get("parts") or [])):
            if isinstance(part, dict) and part.get("type") == "text":
                _append_text(parts, str(part.get("text", "")))
            else:
                parts.append(part)
    merged = {**run[-1], "parts": parts}
    return [*messages[:start], merged, *messages[end:]]


def _append_text(parts: list[Any], text: str) -> None:
    """Append ``text`` to a trailing text part, or as a new text part (``_appendMergedText``)."""
    if not text:
        return
    last = parts[-1] if parts else None
    if isinstance(last, dict) and last.get("type") == "text":
        parts[-1] = {**last, "text": str(last.get("text", "")) + text}
    else:
        parts.append({"type": "text", "text": text})
