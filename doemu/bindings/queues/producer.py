"""``env.<QUEUE>``: ``send(body, contentType=…, delaySeconds=…)`` and ``sendBatch([...])``.

As through the Python SDK, keyword options are one trailing JS object and the body crosses with
``python_to_rpc``. A message is stored (committed, fsynced at power durability) before the
promise resolves; its consumer, if the Worker has one, is told at once. Limits are Cloudflare's:
a message at most 128 KB, a batch at most 100 messages and 256 KB, a delay at most 12 hours.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ..boundary import after, call, js_arguments, option
from ..errors import BindingError, BindingTypeError
from .codec import CONTENT_TYPES, encode_body
from .store import QueueStore

__all__ = ["MAX_BATCH_BYTES", "MAX_BATCH_MESSAGES", "MAX_DELAY", "MAX_MESSAGE_BYTES", "Queue"]

MAX_MESSAGE_BYTES = 128_000
MAX_BATCH_MESSAGES = 100
MAX_BATCH_BYTES = 256_000
MAX_DELAY = 43_200


def _delay(value: Any, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_DELAY:
        raise BindingTypeError(
            f"Queue send failed: delaySeconds must be a number from 0 to {MAX_DELAY}, got {value!r}"
        )
    return int(value)


def _content_type(value: Any) -> str:
    if value is None:
        return "json"
    if value not in CONTENT_TYPES:
        raise BindingTypeError(
            f'Unknown queue message content type "{value}" (expected one of '
            f"{', '.join(CONTENT_TYPES)})"
        )
    return str(value)


class Queue:
    """A queue producer binding (see the module docstring)."""

    __slots__ = ("_binding", "_delay", "_notify", "_now", "_queue", "_store")

    def __init__(
        self,
        binding: str,
        queue: str,
        store: Callable[[], QueueStore],
        now: Callable[[], float],
        notify: Callable[[], None],
        delivery_delay: int = 0,
    ) -> None:
        self._binding = binding
        self._queue = queue
        self._store = store
        self._now = now
        self._notify = notify
        self._delay = delivery_delay

    def __repr__(self) -> str:
        return f"<Queue {self._queue} (env.{self._binding})>"

    def send(self, *args: Any, **kwargs: Any) -> Any:
        """Store one message; resolves to ``None`` once it is durable."""
        values = js_arguments(args, kwargs)
        if not values:
            raise BindingTypeError("Queue send failed: a message body is required")
        body, options = values[0], values[1] if len(values) > 1 else None
        return call(lambda: self._put([(body, option(options, "contentType"),
                                            option(options, "delaySeconds"))]))  # fmt: skip

    def sendBatch(self, *args: Any, **kwargs: Any) -> Any:
        """Store several messages (``[{body, contentType, delaySeconds}]``) in one write."""
        values = js_arguments(args, kwargs)
        batch = values[0] if values else None
        options = values[1] if len(values) > 1 else None
        if not isinstance(batch, list):
            raise BindingTypeError("Queue sendBatch failed: expected a list of messages")
        if len(batch) > MAX_BATCH_MESSAGES:
            raise BindingError(
                f"Queue sendBatch failed: batch message count of {len(batch)} exceeds limit of "
                f"{MAX_BATCH_MESSAGES}"
            )
        default = option(options, "delaySeconds")
        items = []
        for entry in batch:
            if not isinstance(entry, Mapping) or "body" not in entry:
                raise BindingTypeError(
                    "Queue sendBatch failed: each message must be an object with a body"
                )
            delay = entry.get("delaySeconds", default)
            items.append((entry["body"], entry.get("contentType"), delay))
        return call(lambda: self._put(items, batch=True))

    send_batch = sendBatch

    def _put(self, items: list[tuple[Any, Any, Any]], batch: bool = False) -> Any:
        now = self._now()
        rows = []
        total = 0
        for body, content_type, delay in items:
            data = encode_body(body, _content_type(content_type))
            if len(data) > MAX_MESSAGE_BYTES:
                if batch:
                    detail = (
                        f"message in batch has length {len(data)} bytes which exceeds single "
                        f"message size limit of {MAX_MESSAGE_BYTES}"
                    )
                else:
                    detail = f"message length of {len(data)} bytes exceeds limit of"
                    detail += f" {MAX_MESSAGE_BYTES}"
                raise BindingError(f"Queue send{'Batch' if batch else ''} failed: {detail}")
            total += len(data)
            wait = _delay(delay, self._delay)
            rows.append(
                (uuid.uuid4().hex, data, _content_type(content_type), now + wait * 1000.0, 0)
            )
        if total > MAX_BATCH_BYTES:
            raise BindingError(
                f"Queue sendBatch failed: batch size of {total} bytes exceeds limit of "
                f"{MAX_BATCH_BYTES}"
            )
        durable = self._store().add(rows, now)
        self._notify()
        return after(durable, None)
