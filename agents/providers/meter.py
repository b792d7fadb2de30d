"""A model request's usage, recorded the moment it is known — so a cut request still counts.

Providers report a request's usage at its end (OpenAI's ``response.completed``, the last
chat-completions chunk, Anthropic's ``message_delta``), but a request cut before that end was
billed all the same. :class:`RequestMeter` keeps one ``cf_agents_usage`` entry per request
(one ``llm:`` operation): opened *partial* when the provider accepts the request — with its
input tokens when the provider says them up front (Anthropic's ``message_start``) — its output
counted as the deltas stream (one per text delta or tool call: a lower bound of the tokens)
and written every :data:`EVERY` of them, then replaced by the provider's own report, no longer
partial. A recovery that goes on with the same operation (a re-attached OpenAI response, a
create collapsed by its idempotency key) finds that entry and completes it; one that makes a
new request leaves the cut one partial, and ``usage()`` says its totals are a lower bound.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

from .base import Provider, Usage

__all__ = ["EVERY", "RequestMeter"]

#: Output deltas between two writes of a running request's entry (and of the text cursor the
#: loop stores for a retrieving provider): a cut request's output lags by fewer than this.
EVERY = 10


class RequestMeter:
    """The usage entry of one request (operation ``op_id``) of turn ``turn``."""

    __slots__ = ("_agent", "_entry", "_floor", "_input", "_op_id", "_output", "_provider",
                 "_settled", "_turn", "_unwritten")  # fmt: skip

    def __init__(self, agent: Any, provider: Provider, turn: str, op_id: str) -> None:
        self._agent = agent
        self._provider = provider
        self._turn = turn
        self._op_id = op_id
        self._entry: int | None = None
        self._input = 0
        #: Output deltas this activation received for the request; ``_floor``: the count an
        #: earlier one recorded (a re-attached stream re-reads some of the same deltas, so the
        #: two are not added: the larger is still a lower bound).
        self._output = 0
        self._floor = 0
        self._unwritten = 0
        self._settled = False

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """The stream ended without :meth:`finished` (an error, an abort, the consumer gone):
        what was counted is written, still partial — unless nothing was (never accepted)."""
        if not self._settled and (self._entry is not None or self._output):
            self._find()
            self._write(partial=True)

    def started(self, input_tokens: int | None) -> None:
        """The provider accepted the request (its input tokens, when it says them now)."""
        self._find()
        if input_tokens is not None:
            self._input = max(self._input, int(input_tokens))
        self._write(partial=True)

    def delta(self) -> bool:
        """One output delta; True when this one wrote the entry (every :data:`EVERY`)."""
        self._output += 1
        self._unwritten += 1
        if self._unwritten < EVERY:
            return False
        self._find()
        self._write(partial=True)
        return True

    def finished(self, usage: Usage | None) -> int | None:
        """The request ended: the provider's report replaces what was counted; without one,
        the entry keeps the count and stays partial. Returns the input tokens the proactive
        context guard judges (``None``: unknown)."""
        self._settled = True
        self._find()
        if usage is None:
            self._write(partial=True)
            return None
        self._input, self._output, self._floor = usage.input_tokens, usage.output_tokens, 0
        self._write(partial=False)
        return usage.input_tokens or (usage.input_tokens + usage.output_tokens)

    def _find(self) -> None:
        """The operation's entry, if an earlier activation opened one (read once)."""
        if self._entry is not None:
            return
        found = self._agent.usage_entries(op_id=self._op_id, limit=1)
        if found:
            entry = found[0]
            self._entry = entry.id
            self._input = max(self._input, entry.input_tokens)
            self._floor = entry.output_tokens

    def _write(self, *, partial: bool) -> None:
        self._unwritten = 0
        output = max(self._floor, self._output)
        if self._entry is None:
            entry = self._agent.record_usage(
                provider=self._provider.name, model=self._provider.model,
                input_tokens=self._input, output_tokens=output, turn=self._turn,
                op_id=self._op_id, partial=partial,
            )  # fmt: skip
            self._entry = entry.id
        else:
            self._agent.update_usage(self._entry, input_tokens=self._input,
                                     output_tokens=output, partial=partial)  # fmt: skip
