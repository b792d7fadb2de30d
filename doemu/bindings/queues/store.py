"""One queue's messages in one SQLite file (``<persist>/queues/<queue>.sqlite``).

A message is a row from the moment ``send`` answers (committed, and fsynced at ``--durability
power`` before the promise resolves) until its consumer acknowledges it, so a SIGKILL loses none:
a batch that was being delivered is delivered again after the restart (its lease is dropped at
open; the delivery had already counted in ``attempts``). Messages that exhausted their retries
are recorded in ``dead_letters`` (and moved to the dead-letter queue, if the consumer has one).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from ...storage.durability import SyncPool
from ..sqlite import BindingFile

__all__ = ["QueueStore", "StoredMessage"]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS messages (id TEXT PRIMARY KEY, seq INTEGER NOT NULL, "
    "body BLOB NOT NULL, content_type TEXT NOT NULL, enqueued REAL NOT NULL, "
    "visible_at REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, "
    "leased INTEGER NOT NULL DEFAULT 0)",
    "CREATE INDEX IF NOT EXISTS messages_ready ON messages (leased, visible_at, seq)",
    "CREATE TABLE IF NOT EXISTS dead_letters (id TEXT PRIMARY KEY, body BLOB NOT NULL, "
    "content_type TEXT NOT NULL, enqueued REAL NOT NULL, attempts INTEGER NOT NULL, "
    "died REAL NOT NULL, moved_to TEXT)",
    # A process that died mid-delivery held leases in memory only: they end with it.
    "UPDATE messages SET leased = 0 WHERE leased = 1",
)


@dataclass(frozen=True)
class StoredMessage:
    id: str
    body: bytes
    content_type: str
    enqueued: float
    attempts: int


class QueueStore:
    """The file of one queue (see the module docstring)."""

    def __init__(self, path: Path, sync_pool: SyncPool | None) -> None:
        self.file = BindingFile(path, _SCHEMA, sync_pool)
        row = self.file.conn.execute("SELECT coalesce(max(seq), 0) FROM messages").fetchone()
        self._seq = int(row[0])

    def add(
        self, messages: list[tuple[str, bytes, str, float, int]], now: float
    ) -> asyncio.Future[None] | None:
        """Store ``(id, body, content type, visible at, attempts)`` rows; what to wait for."""
        with self.file.write() as conn:
            for message_id, body, content_type, visible_at, attempts in messages:
                self._seq += 1
                conn.execute(
                    "INSERT INTO messages (id, seq, body, content_type, enqueued, visible_at, "
                    "attempts) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (message_id, self._seq, body, content_type, now, visible_at, attempts),
                )
        return self.file.durable()

    def ready(self, now: float) -> tuple[int, float | None]:
        """How many messages could be delivered now, and since when the oldest has waited."""
        count, oldest = self.file.conn.execute(
            "SELECT count(*), min(visible_at) FROM messages WHERE leased = 0 AND visible_at <= ?",
            (now,),
        ).fetchone()
        return int(count), None if oldest is None else float(oldest)

    def next_visible(self, now: float) -> float | None:
        row = self.file.conn.execute(
            "SELECT min(visible_at) FROM messages WHERE leased = 0 AND visible_at > ?", (now,)
        ).fetchone()
        return None if row[0] is None else float(row[0])

    def lease(self, limit: int, now: float) -> list[StoredMessage]:
        """Take up to ``limit`` ready messages for a delivery, counting the attempt."""
        rows = self.file.conn.execute(
            "SELECT id, body, content_type, enqueued, attempts FROM messages "
            "WHERE leased = 0 AND visible_at <= ? ORDER BY visible_at, seq LIMIT ?",
            (now, limit),
        ).fetchall()
        with self.file.write() as conn:
            conn.executemany(
                "UPDATE messages SET leased = 1, attempts = attempts + 1 WHERE id = ?",
                [(r[0],) for r in rows],
            )
        return [StoredMessage(r[0], bytes(r[1]), r[2], float(r[3]), int(r[4]) + 1) for r in rows]

    def settle(
        self,
        acked: list[str],
        retried: list[tuple[str, float]],
        dead: list[str],
        moved_to: str | None,
        now: float,
    ) -> list[StoredMessage]:
        """Apply a delivery's outcome in one transaction; returns the dead messages."""
        died: list[StoredMessage] = []
        with self.file.write() as conn:
            conn.executemany("DELETE FROM messages WHERE id = ?", [(i,) for i in acked])
            conn.executemany(
                "UPDATE messages SET leased = 0, visible_at = ? WHERE id = ?",
                [(when, i) for i, when in retried],
            )
            for message_id in dead:
                row = conn.execute(
                    "SELECT id, body, content_type, enqueued, attempts FROM messages WHERE id = ?",
                    (message_id,),
                ).fetchone()
                if row is None:
                    continue
                died.append(StoredMessage(row[0], bytes(row[1]), row[2], row[3], row[4]))
                conn.execute(
                    "INSERT OR REPLACE INTO dead_letters (id, body, content_type, enqueued, "
                    "attempts, died, moved_to) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (*row, now, moved_to),
                )
                conn.execute("DELETE FROM messages WHERE id = ?", (message_id,))
        return died

    def backlog(self, limit: int = 100) -> list[dict[str, object]]:
        rows = self.file.conn.execute(
            "SELECT id, content_type, enqueued, visible_at, attempts, leased, length(body) "
            "FROM messages ORDER BY seq LIMIT ?",
            (limit,),
        ).fetchall()
        keys = ("id", "contentType", "enqueued", "visibleAt", "attempts", "inFlight", "bytes")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def dead_letters(self, limit: int = 100) -> list[dict[str, object]]:
        rows = self.file.conn.execute(
            "SELECT id, content_type, enqueued, attempts, died, moved_to FROM dead_letters "
            "ORDER BY died LIMIT ?",
            (limit,),
        ).fetchall()
        keys = ("id", "contentType", "enqueued", "attempts", "died", "movedTo")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def count(self) -> int:
        return int(self.file.conn.execute("SELECT count(*) FROM messages").fetchone()[0])

    # -- what the admin API reads and does (the inspector's queue view) ------------------------
    def counts(self, now: float) -> dict[str, int]:
        """The backlog split: ``ready`` (deliverable now), ``delayed`` (a delay or a retry's wait
        not over), ``inFlight`` (in a batch being delivered), and ``deadLetters``."""
        ready, delayed, leased = self.file.conn.execute(
            "SELECT coalesce(sum(leased = 0 AND visible_at <= ?), 0), "
            "coalesce(sum(leased = 0 AND visible_at > ?), 0), coalesce(sum(leased), 0) "
            "FROM messages",
            (now, now),
        ).fetchone()
        dead = self.file.conn.execute("SELECT count(*) FROM dead_letters").fetchone()[0]
        return {
            "ready": int(ready),
            "delayed": int(delayed),
            "inFlight": int(leased),
            "deadLetters": int(dead),
        }

    def dead_letter_page(self, limit: int, offset: int) -> list[tuple[dict[str, object], bytes]]:
        """A page of dead letters, oldest death first: each one's fields and its body."""
        rows = self.file.conn.execute(
            "SELECT id, content_type, enqueued, attempts, died, moved_to, body FROM dead_letters "
            "ORDER BY died, id LIMIT ? OFFSET ?",
            (limit, offset),
        ).fetchall()
        keys = ("id", "contentType", "enqueued", "attempts", "died", "movedTo")
        return [(dict(zip(keys, r[:6], strict=True)), bytes(r[6])) for r in rows]

    def purge(self) -> int:
        """Delete every message that waits (delivered batches settle as if acknowledged); the
        dead letters stay. How many went."""
        with self.file.write() as conn:
            return int(conn.execute("DELETE FROM messages WHERE leased = 0").rowcount)

    def replay(self, message_id: str, now: float) -> StoredMessage | None:
        """Move the dead letter ``message_id`` back into this queue as a new delivery (attempts
        from 0, ready now), in one transaction; None when there is no such dead letter."""
        with self.file.write() as conn:
            row = conn.execute(
                "SELECT id, body, content_type, enqueued FROM dead_letters WHERE id = ?",
                (message_id,),
            ).fetchone()
            if row is None:
                return None
            conn.execute("DELETE FROM dead_letters WHERE id = ?", (message_id,))
            self._seq += 1
            conn.execute(
                "INSERT OR REPLACE INTO messages (id, seq, body, content_type, enqueued, "
                "visible_at, attempts) VALUES (?, ?, ?, ?, ?, ?, 0)",
                (row[0], self._seq, row[1], row[2], row[3], now),
            )
        return StoredMessage(row[0], bytes(row[1]), row[2], float(row[3]), 0)

    def withdraw(self, message_id: str) -> str:
        """Take a waiting message out (a dead letter's copy in its dead-letter queue, when it is
        moved back): ``removed``, ``inFlight`` (left alone: a batch has it) or ``absent``."""
        with self.file.write() as conn:
            row = conn.execute("SELECT leased FROM messages WHERE id = ?", (message_id,)).fetchone()
            if row is None:
                return "absent"
            if row[0]:
                return "inFlight"
            conn.execute("DELETE FROM messages WHERE id = ?", (message_id,))
            return "removed"

    def close(self) -> None:
        self.file.close()
