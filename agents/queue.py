"""``queue(callback, payload)``: durable, in-order background work (``cf_agents_queues``).

An item is a row in the SDK's ``cf_agents_queues`` table (``id, payload, callback, created_at`` in
Unix seconds, ``retry_options``), written before ``queue()`` returns; the queue is then flushed in
the background (``ctx.waitUntil``), one item at a time in insertion order. Each item's callback —
a method name, called as ``method(payload, item)`` — is retried per its retry options; an item
that still fails is reported through ``on_error(error, item)`` and removed, so a poison item never
blocks the ones behind it.

Unlike the TypeScript SDK, whose flush only runs after a new ``queue()`` call, items left behind
by a crash or reset (the row is deleted only after its callback settled) are drained on the next
activation: :meth:`Queue.resume` runs from the Agent's ``_start`` after ``on_start``. Callbacks
therefore run *at least once* and should be idempotent.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from .core.callbacks import callback_name, find_callback, new_id, to_json
from .core.host import AgentHost, Core
from .errors import QueueError, RetryOptionsError
from .retry import (
    RetrySpec,
    resolve_retry_options,
    retry_options_from_json,
    retry_options_to_json,
    run_callback,
)

__all__ = ["SCHEMA", "Queue", "QueueError", "QueueItem"]

_log = logging.getLogger("agents.queue")

#: The SDK's DDL (its later ``ALTER TABLE ... ADD COLUMN retry_options`` folded in).
SCHEMA: tuple[str, ...] = (
    """
    CREATE TABLE IF NOT EXISTS cf_agents_queues (
      id TEXT PRIMARY KEY NOT NULL,
      payload TEXT,
      callback TEXT,
      created_at INTEGER DEFAULT (unixepoch()),
      retry_options TEXT
    )
    """,
)


@dataclass(frozen=True)
class QueueItem:
    """One pending ``cf_agents_queues`` row as the SDK's ``QueueItem``."""

    id: str
    callback: str
    payload: Any
    #: Unix seconds.
    created_at: int
    retry: Mapping[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The SDK's JSON shape."""
        out: dict[str, Any] = {
            "id": self.id,
            "callback": self.callback,
            "payload": self.payload,
            "created_at": self.created_at,
        }
        if self.retry:
            out["retry"] = retry_options_to_json(self.retry)
        return out


def _row_to_item(row: Mapping[str, Any]) -> QueueItem:
    """Raises ``ValueError`` when the stored payload is not JSON."""
    raw = row.get("payload")
    retry_fields = None
    if isinstance(row.get("retry_options"), str):
        try:
            retry_fields = retry_options_from_json(json.loads(row["retry_options"]))
        except ValueError:
            retry_fields = None
    return QueueItem(
        id=str(row["id"]),
        callback=str(row["callback"]),
        payload=json.loads(raw) if raw is not None else None,
        created_at=int(row.get("created_at") or 0),
        retry=retry_fields,
    )


_ORDER = " ORDER BY created_at ASC, rowid ASC"


class Queue:
    """Durable FIFO of method calls of the agent that owns it."""

    __slots__ = ("_core", "_flushing", "_host")
    #: The tables this feature owns (the Agent ensures them at every activation).
    SCHEMA: ClassVar[tuple[str, ...]] = SCHEMA

    def __init__(self, core: Core, host: AgentHost) -> None:
        self._core = core
        self._host = host
        self._flushing = False

    async def queue(
        self,
        callback: str | Callable[..., Any],
        payload: Any = None,
        *,
        retry: RetrySpec | None = None,
    ) -> str:
        """Persist a call of ``callback(payload, item)`` and process it in the background."""
        host = self._host
        name = callback_name(host, callback)
        if name is None:
            shown = callback if isinstance(callback, str) else getattr(callback, "__name__", "?")
            raise QueueError(f"queue callback {shown!r} is not a method of {type(host).__name__}")
        try:
            payload_json = to_json(payload)
        except (TypeError, ValueError) as exc:
            raise QueueError(f"queue payload is not JSON-serializable: {exc}") from exc
        try:
            resolve_retry_options(retry, host.options.retry)
        except RetryOptionsError as exc:
            raise QueueError(str(exc)) from exc
        retry_json = retry_options_to_json(retry)
        item_id = new_id()
        self._core.sql(
            "INSERT INTO cf_agents_queues (id, payload, callback, created_at, retry_options) "
            "VALUES (?, ?, ?, ?, ?)",
            item_id,
            payload_json,
            name,
            math.floor(self._core.now() / 1000),
            to_json(retry_json) if retry_json else None,
        )
        if self._core.started:  # before that, the Agent's _start resumes the queue
            self._start_flush()
        return item_id

    def _start_flush(self) -> None:
        if not self._flushing:
            # A Task, not a bare coroutine: Pyodide hands a Future to JavaScript as a Promise.
            self._core.wait_until(asyncio.ensure_future(self._flush()))

    def resume(self) -> None:
        """Drain items an earlier activation left behind (in the background, not in ``_start``)."""
        if self._core.sql("SELECT id FROM cf_agents_queues LIMIT 1"):
            self._start_flush()

    async def _flush(self) -> None:
        """Process items in order until the table is empty; one flush at a time."""
        if self._flushing:
            return
        self._flushing = True
        sql = self._core.sql
        try:
            while True:
                rows = sql("SELECT id FROM cf_agents_queues" + _ORDER)
                if not rows:
                    break
                for entry in rows:
                    current = sql("SELECT * FROM cf_agents_queues WHERE id = ?", entry["id"])
                    if not current:
                        continue  # dequeued meanwhile
                    # Removed only once the callback settled (errors are caught inside): a
                    # reset mid-callback leaves the row for the next activation.
                    await self._execute(current[0])
                    self.dequeue(str(entry["id"]))
        finally:
            self._flushing = False

    async def _execute(self, row: Mapping[str, Any]) -> None:
        core, host = self._core, self._host
        try:
            item = _row_to_item(row)
        except ValueError as exc:
            await core.report(
                QueueError(f"queue item {row['id']} has a corrupt payload: {exc}"), row
            )
            return
        method = find_callback(host, item.callback)
        if method is None:
            await core.report(
                QueueError(f"queue item {item.id}: callback {item.callback!r} not found"), item
            )
            return
        await run_callback(
            core,
            host,
            method,
            item,
            item.payload,
            item.retry,
            label=f"queue callback {item.callback!r}",
        )

    # -- inspection and removal --------------------------------------------------------------------
    def dequeue(self, id: str) -> None:
        """Remove one pending item."""
        self._core.sql("DELETE FROM cf_agents_queues WHERE id = ?", id)

    def dequeue_all(self) -> None:
        """Remove every pending item."""
        self._core.sql("DELETE FROM cf_agents_queues")

    def dequeue_all_by_callback(self, callback: str) -> None:
        """Remove every pending item for ``callback``."""
        self._core.sql("DELETE FROM cf_agents_queues WHERE callback = ?", callback)

    def get_queue(self, id: str) -> QueueItem | None:
        """The pending item with this id, or None."""
        rows = self._core.sql("SELECT * FROM cf_agents_queues WHERE id = ?", id)
        if not rows:
            return None
        try:
            return _row_to_item(rows[0])
        except ValueError:
            return None

    def get_queues(self, key: str, value: Any) -> list[QueueItem]:
        """Pending items whose (object) payload has ``payload[key] == value``, in order."""
        out: list[QueueItem] = []
        for row in self._core.sql("SELECT * FROM cf_agents_queues" + _ORDER):
            try:
                item = _row_to_item(row)
            except ValueError:
                continue
            if isinstance(item.payload, Mapping) and item.payload.get(key) == value:
                out.append(item)
        return out
