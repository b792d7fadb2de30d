"""The entry Worker's ``queue(batch, env, ctx)``: batches delivered on the doemu clock.

A consumer (``[[queues.consumers]]``) delivers a batch when ``max_batch_size`` messages are
ready, or when the oldest ready message has waited ``max_batch_timeout`` seconds, with at most
``max_concurrency`` batches in flight. ``Default(ctx, env).queue(batch, env, ctx)`` receives a
:class:`MessageBatch` (``queue``, ``messages``, ``ackAll()``, ``retryAll(delaySeconds=)``)
whose :class:`Message` s have ``id``, ``timestamp``, ``body``, ``attempts``, ``ack()`` and
``retry(delaySeconds=)``. After the handler: an acknowledged message is deleted, a retried one
comes back after its delay (else ``retry_delay``); the others are acknowledged if the handler
returned and retried if it raised. A message delivered ``max_retries + 1`` times without an ack
goes to ``dead_letter_queue`` (or is dropped, as on Cloudflare), and is listed as a dead letter.
As with crons, ``env`` and ``ctx`` arrive as ``None`` (workerd-Python's class entrypoints), the
real ones with ``--lenient``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import logging
import traceback
from collections.abc import Callable
from typing import Any

from ...clock import Clock, TimerHandle
from ...compat import call_relaxed
from ...config.bindings import QueueConsumer
from ...jsboundary import is_strict
from ..boundary import option
from ..entry import EntryHost, ExecutionContext
from .codec import decode_body
from .store import QueueStore, StoredMessage

__all__ = ["Message", "MessageBatch", "QueueConsumerService"]

_log = logging.getLogger("doemu.queues")

#: Batches in flight at once when the consumer sets no ``max_concurrency``.
DEFAULT_CONCURRENCY = 10


def _delay_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
    options = args[0] if args else kwargs
    value = option(options, "delaySeconds")
    return None if value is None else int(value)


class Message:
    """One message of a batch, as the consumer sees it."""

    __slots__ = ("_decision", "attempts", "body", "id", "timestamp")

    def __init__(self, stored: StoredMessage) -> None:
        self.id = stored.id
        self.timestamp = dt.datetime.fromtimestamp(stored.enqueued / 1000.0)
        self.body = decode_body(stored.body, stored.content_type)
        self.attempts = stored.attempts
        #: ``("ack", None)``, ``("retry", delay)``, or None (decided by the handler's outcome).
        self._decision: tuple[str, int | None] | None = None

    def ack(self) -> None:
        """Acknowledge this message: it is not delivered again, whatever the batch does."""
        if self._decision is None:
            self._decision = ("ack", None)

    def retry(self, *args: Any, **kwargs: Any) -> None:
        """Deliver this message again (after ``delaySeconds``, else the consumer's delay)."""
        if self._decision is None:
            self._decision = ("retry", _delay_of(args, kwargs))

    def __repr__(self) -> str:
        return f"<Message {self.id} attempts={self.attempts}>"


class MessageBatch:
    """What ``queue(batch, …)`` receives."""

    __slots__ = ("messages", "queue")

    def __init__(self, queue: str, messages: list[Message]) -> None:
        self.queue = queue
        self.messages = messages

    def ackAll(self) -> None:
        for message in self.messages:
            message.ack()

    def retryAll(self, *args: Any, **kwargs: Any) -> None:
        delay = _delay_of(args, kwargs)
        for message in self.messages:
            if message._decision is None:
                message._decision = ("retry", delay)

    ack_all = ackAll
    retry_all = retryAll


class QueueConsumerService:
    """Delivers one queue's messages to the Worker's ``queue()`` (see the module docstring)."""

    def __init__(
        self,
        spec: QueueConsumer,
        store: Callable[[], QueueStore],
        dead_letter: Callable[[str, list[StoredMessage]], None],
        host: EntryHost,
        clock: Clock,
        entry: type | None,
    ) -> None:
        self.spec = spec
        self._store = store
        self._dead_letter = dead_letter
        self._host = host
        self._clock = clock
        self.entry = entry
        self._timer: TimerHandle | None = None
        self._timer_at: float | None = None
        self._inflight = 0
        self._running = False
        self.delivered = 0
        self._warned = False

    @property
    def handler_present(self) -> bool:
        return self.entry is not None and callable(getattr(self.entry, "queue", None))

    def start(self) -> None:
        if not self.handler_present:
            _log.warning(
                '[queues] the queue "%s" has a consumer but the Worker has no Default.queue() '
                "handler; its messages wait",
                self.spec.queue,
            )
            return
        self._running = True
        self.poke()

    def stop(self) -> None:
        self._running = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def poke(self) -> None:
        """Messages arrived (or a batch finished): deliver what is due, arm the next timer."""
        if not self._running:
            return
        self._arm(self._clock.now())

    def _arm(self, when: float) -> None:
        if self._timer is not None and self._timer_at is not None and self._timer_at <= when:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = self._clock.call_at(when, self._pump)

    def _pump(self) -> None:
        self._timer, self._timer_at = None, None
        if not self._running:
            return
        store = self._store()
        spec = self.spec
        limit = spec.max_concurrency or DEFAULT_CONCURRENCY
        while self._inflight < limit:
            now = self._clock.now()
            ready, oldest = store.ready(now)
            if not ready:
                break
            assert oldest is not None
            due = oldest + spec.max_batch_timeout * 1000.0
            if ready < spec.max_batch_size and due > now:
                self._arm(due)
                return
            batch = store.lease(spec.max_batch_size, now)
            self._inflight += 1
            self._host.track(asyncio.ensure_future(self._deliver(batch)))
        upcoming = store.next_visible(self._clock.now())
        if upcoming is not None and self._inflight < limit:
            self._arm(upcoming)

    async def _deliver(self, stored: list[StoredMessage]) -> None:
        try:
            await self.deliver(stored)
        finally:
            self._inflight -= 1
            self.poke()

    async def deliver(self, stored: list[StoredMessage]) -> dict[str, Any]:
        """Run ``queue()`` on one batch and apply its outcome; returns a summary."""
        spec = self.spec
        messages = [Message(m) for m in stored]
        batch = MessageBatch(spec.queue, messages)
        ctx = ExecutionContext(self._host.track)
        error: str | None = None
        try:
            assert self.entry is not None
            instance = self.entry(ctx, self._host.env)
            with self._host.entry_scope(ctx.waitUntil):
                env, context = (None, None) if is_strict() else (self._host.env, ctx)
                result = call_relaxed(instance.queue, batch, env, context)
                if inspect.isawaitable(result):
                    await result
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            _log.error(
                'queue() raised for a batch of %d from "%s":\n%s',
                len(messages),
                spec.queue,
                "".join(traceback.format_exception(exc)),
            )
        now = self._clock.now()
        acked, retried, dead = [], [], []
        for message in messages:
            decision = message._decision or (("retry", None) if error else ("ack", None))
            if decision[0] == "ack":
                acked.append(message.id)
            elif message.attempts > spec.max_retries:
                dead.append(message.id)
            else:
                delay = decision[1] if decision[1] is not None else spec.retry_delay
                retried.append((message.id, now + delay * 1000.0))
        died = self._store().settle(acked, retried, dead, spec.dead_letter_queue, now)
        if died:
            _log.warning(
                'queue "%s": %d message(s) failed %d attempt(s)%s',
                spec.queue,
                len(died),
                spec.max_retries + 1,
                f', moved to "{spec.dead_letter_queue}"' if spec.dead_letter_queue else ", dropped",
            )
            if spec.dead_letter_queue is not None:
                self._dead_letter(spec.dead_letter_queue, died)
        self.delivered += len(messages)
        summary = {
            "queue": spec.queue,
            "messages": len(messages),
            "acked": len(acked),
            "retried": len(retried),
            "dead": len(died),
            "error": error,
        }
        self._host.emit("queue.batch", **summary)
        return summary
