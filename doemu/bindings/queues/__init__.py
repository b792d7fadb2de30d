"""Queues: ``[[queues.producers]]`` (``env.Q.send``/``sendBatch``) and ``[[queues.consumers]]``
(the entry Worker's ``queue()``), on one SQLite file per queue.

* :mod:`.store`: a queue's messages, leases and dead letters;
* :mod:`.producer`: the ``env.<QUEUE>`` binding; :mod:`.codec`: bodies per ``contentType``;
* :mod:`.consumer`: batching, delivery, acks, retries and dead-letter queues.
"""

from __future__ import annotations

from .consumer import Message, MessageBatch, QueueConsumerService
from .producer import Queue
from .store import QueueStore, StoredMessage

__all__ = [
    "Message",
    "MessageBatch",
    "Queue",
    "QueueConsumerService",
    "QueueStore",
    "StoredMessage",
]
