"""The fake LLM's books: scripted replies, request counts, generations and what they billed.

The three API modules write here from the server's loop; the test reads snapshots
(:meth:`Ledger.stats`) from its own thread. One lock guards it all, held only for plain
bookkeeping (never across an ``await``), so neither side ever waits on the other for long.

A generation's reply is the next scripted one; with the queue empty, the ledger's
:data:`~.script.Responder` (if any) computes it from the request. The code that asks for a reply
(:func:`~.intake.begin`) is handed no request, so the body travels in a context variable set when
it is received: each request runs in its own task, so concurrent generations never see each
other's bodies.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections import Counter, deque
from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from .gate import Gate
from .script import (
    DEFAULT_REPLY,
    ROUTES,
    Api,
    Generation,
    GenerationStatus,
    Item,
    Reply,
    Responder,
    Retrieval,
    Stats,
    Text,
)

__all__ = ["Ledger", "Record", "RetrievalRecord"]

_log = logging.getLogger("doemu.testing.fake_providers")

#: The request the current task is answering: ``(api, body)``, set by :meth:`Ledger.received`.
_REQUEST: ContextVar[tuple[Api, dict[str, Any]] | None] = ContextVar(
    "doemu_fake_llm_request", default=None
)


@dataclass
class Record:
    """A generation as the server updates it (the mutable twin of :class:`Generation`)."""

    id: str
    api: Api
    request: dict[str, Any]
    headers: dict[str, str]
    idempotency_key: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    text: str = ""
    status: GenerationStatus = "in_progress"

    def snapshot(self) -> Generation:
        return Generation(
            id=self.id,
            api=self.api,
            request=self.request,
            headers=dict(self.headers),
            idempotency_key=self.idempotency_key,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            text=self.text,
            status=self.status,
        )


@dataclass
class RetrievalRecord:
    """A streamed retrieval as the server updates it (the mutable twin of :class:`Retrieval`)."""

    response_id: str
    starting_after: int | None
    sent: list[int] = field(default_factory=list)

    def snapshot(self) -> Retrieval:
        return Retrieval(self.response_id, self.starting_after, tuple(self.sent))


@dataclass
class Ledger:
    """Everything a :class:`~.FakeLLM` knows, behind one lock."""

    api_key: str
    #: Asked for the reply of a generation when nothing is scripted (``None``: the default).
    responder: Responder | None = None
    gate: Gate = field(default_factory=Gate)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _queue: deque[Reply] = field(default_factory=deque)
    _counts: Counter[str] = field(default_factory=Counter)
    _bodies: dict[Api, list[dict[str, Any]]] = field(default_factory=dict)
    _records: list[Record] = field(default_factory=list)
    _retrievals: list[RetrievalRecord] = field(default_factory=list)

    # -- the test's side ------------------------------------------------------------------------

    def script(self, replies: Iterable[Reply]) -> None:
        with self._lock:
            self._queue.extend(replies)

    @property
    def queued(self) -> int:
        with self._lock:
            return len(self._queue)

    def stats(self) -> Stats:
        with self._lock:
            generations = [record.snapshot() for record in self._records]
            requests = {route: self._counts[route] for route in ROUTES}
            retrievals = [record.snapshot() for record in self._retrievals]
        return Stats(
            requests=requests,
            generations=generations,
            billed_input_tokens=sum(generation.input_tokens for generation in generations),
            billed_output_tokens=sum(generation.output_tokens for generation in generations),
            retrievals=retrievals,
        )

    def requests(self, api: Api) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._bodies.get(api, []))

    def reset(self) -> None:
        """Forget replies, counts and generations (stored responses are the caller's)."""
        with self._lock:
            self._queue.clear()
            self._counts.clear()
            self._bodies.clear()
            self._records.clear()
            self._retrievals.clear()
        self.gate.clear()

    # -- the server's side ----------------------------------------------------------------------

    def count(self, route: str) -> None:
        """A request reached ``route`` (whatever happens to it next)."""
        with self._lock:
            self._counts[route] += 1

    def received(self, api: Api, body: dict[str, Any]) -> None:
        """A request body parsed as JSON (kept for :meth:`next_reply` in this request's task)."""
        with self._lock:
            self._bodies.setdefault(api, []).append(body)
        _REQUEST.set((api, body))

    def next_reply(self) -> Reply:
        """The reply for a new generation: the next scripted one, else the responder's for this
        request, else :data:`DEFAULT_REPLY`."""
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            responder = self.responder
        request = _REQUEST.get()
        if responder is None or request is None:
            return DEFAULT_REPLY
        return _respond(responder, *request)

    def start(self, record: Record, input_tokens: int) -> Record:
        """A generation starts: it is billed its input tokens."""
        record.input_tokens = input_tokens
        with self._lock:
            self._records.append(record)
        return record

    def refuse(self, record: Record) -> Record:
        """A scripted ``fail``: kept as a failed generation, billed nothing."""
        record.status = "failed"
        with self._lock:
            self._records.append(record)
        return record

    def delta(self, record: Record, item: Item, piece: str) -> None:
        """One delta generated: one output token billed; text deltas add to the text."""
        with self._lock:
            record.output_tokens += 1
            if isinstance(item, Text):
                record.text += piece

    def retrieval(self, response_id: str, starting_after: int | None) -> RetrievalRecord:
        """A streamed retrieval starts (its events are added with :meth:`retrieved`)."""
        record = RetrievalRecord(response_id, starting_after)
        with self._lock:
            self._retrievals.append(record)
        return record

    def retrieved(self, record: RetrievalRecord, sequence_number: int) -> None:
        """Event ``sequence_number`` was sent to a retrieval."""
        with self._lock:
            record.sent.append(sequence_number)

    def finish(self, record: Record, status: GenerationStatus) -> None:
        with self._lock:
            record.status = status


def _respond(responder: Responder, api: Api, body: dict[str, Any]) -> Reply:
    """Ask ``responder`` (outside the lock: it is the test's code) with a copy of the body, so
    what :meth:`Ledger.requests` recorded stays what was sent. A responder that raises, or
    answers something that is not a reply, fails this generation with the provider's HTTP 500
    (logged with its traceback) instead of breaking the server."""
    try:
        reply = responder(api, copy.deepcopy(body))
    except Exception as exc:
        _log.exception("the fake LLM's responder failed on a %s request", api)
        return Reply(fail=(500, f"the fake LLM's responder failed: {type(exc).__name__}: {exc}"))
    if reply is None:
        return DEFAULT_REPLY
    if not isinstance(reply, Reply):
        _log.error("the fake LLM's responder returned %r, not a Reply or None", reply)
        return Reply(fail=(500, f"the fake LLM's responder returned {type(reply).__name__}"))
    return reply
