"""Queues in process: send and sendBatch, batching on the clock, acks, retries, dead letters.

The consumer is the entry Worker's ``queue(batch, env, ctx)``; what it received is recorded in
``SEEN`` (per test, by queue name) and the manual clock moves batches along.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pyodide.ffi import JsException
from workers import WorkerEntrypoint

from doemu.compat.rpc import JsDict
from doemu.config.bindings import QueueConsumer, QueueProducer, WorkerResources
from doemu.testing.plugin import HarnessFactory

SEEN: dict[str, list[Any]] = {}


class Default(WorkerEntrypoint):
    async def queue(self, batch: Any, env: Any, ctx: Any) -> None:
        assert env is None and ctx is None  # as workerd-Python passes them to a class entrypoint
        SEEN.setdefault(batch.queue, []).append(
            [(m.body, m.attempts, type(m.timestamp).__name__) for m in batch.messages]
        )
        mode = batch.queue
        if mode.startswith("throws"):
            raise RuntimeError("consumer failed")
        if mode.startswith("mixed"):
            for message in batch.messages:
                if message.body == "bad":
                    message.retry(delaySeconds=30)
                else:
                    message.ack()
        if mode.startswith("retry-all"):
            batch.retryAll()


def _resources(queue: str, **consumer: Any) -> WorkerResources:
    return WorkerResources(
        producers=(QueueProducer("Q", queue),),
        consumers=(QueueConsumer(queue, **consumer),) if consumer is not None else (),
    )


async def test_a_batch_goes_when_full_or_when_its_timeout_passes(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness(
        {}, resources=_resources("batched", max_batch_size=3, max_batch_timeout=5), entry=Default
    )
    q = h.env.Q
    assert await q.send({"n": 1}) is None
    await q.send("text body", contentType="text")
    await h.advance(0)
    assert "batched" not in SEEN  # 2 of 3, and the timeout has not passed
    await q.sendBatch([{"body": b"\x00\x01", "contentType": "bytes"}, {"body": [1, 2]}])
    await h.advance(0)
    (first,) = SEEN["batched"]
    assert first[0] == (JsDict(n=1), 1, "datetime")
    assert first[1][0] == "text body"
    assert bytes(first[2][0]) == b"\x00\x01"
    await h.advance(4_999)
    assert len(SEEN["batched"]) == 1  # [1, 2] waits for the timeout
    await h.advance(1)
    assert SEEN["batched"][1] == [([1, 2], 1, "datetime")]
    assert h.runtime.extra.queue_store("batched").count() == 0  # acked when queue() returned


async def test_a_consumer_that_always_throws_sends_messages_to_the_dead_letter_queue(
    doemu_harness: HarnessFactory,
) -> None:
    resources = WorkerResources(
        producers=(QueueProducer("Q", "throws-1"),),
        consumers=(
            QueueConsumer(
                "throws-1",
                max_batch_size=10,
                max_batch_timeout=1,
                max_retries=2,
                retry_delay=10,
                dead_letter_queue="throws-dlq",
            ),
        ),
    )
    h = await doemu_harness({}, resources=resources, entry=Default)
    await h.env.Q.send({"job": 1})
    await h.advance(1_000)  # the batch timeout: the first delivery
    await h.advance(11_000)  # the retry delay, then the batch timeout again
    await h.advance(11_000)
    assert [b[0][1] for b in SEEN["throws-1"]] == [1, 2, 3]  # attempts counted per delivery
    extra = h.runtime.extra
    assert extra.queue_store("throws-1").count() == 0
    (dead,) = extra.queue_store("throws-1").dead_letters()
    assert dead["attempts"] == 3 and dead["movedTo"] == "throws-dlq"
    assert extra.queue_store("throws-dlq").count() == 1  # waits there (no consumer)


async def test_per_message_ack_and_retry(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness(
        {}, resources=_resources("mixed-1", max_batch_size=2, max_batch_timeout=1), entry=Default
    )
    await h.env.Q.sendBatch([{"body": "good"}, {"body": "bad"}])
    await h.advance(0)  # a full batch goes at once
    await h.advance(31_000)  # "bad" after its 30 s delay (then the 1 s batch timeout)
    assert SEEN["mixed-1"] == [
        [("good", 1, "datetime"), ("bad", 1, "datetime")],
        [("bad", 2, "datetime")],
    ]


async def test_delays_and_bad_input(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness(
        {}, resources=_resources("delayed", max_batch_size=1, max_batch_timeout=0), entry=Default
    )
    q = h.env.Q
    await q.send("later", contentType="text", delaySeconds=60)
    await h.advance(59_000)
    assert "delayed" not in SEEN
    await h.advance(1_000)
    assert SEEN["delayed"] == [[("later", 1, "datetime")]]
    with pytest.raises(JsException, match="message length of 128003 bytes exceeds limit of 128000"):
        await q.send("x" * 128_001)
    with pytest.raises(JsException, match=r"batch message count of 101 exceeds limit of 100"):
        await q.sendBatch([{"body": 1}] * 101)
    with pytest.raises(JsException, match=r"^TypeError: Content Type \"text\" requires"):
        await q.send(5, contentType="text")
    with pytest.raises(JsException, match="Unknown queue message content type"):
        await q.send(5, contentType="xml")
    with pytest.raises(JsException, match="delaySeconds must be a number from 0 to 43200"):
        await q.send(5, delaySeconds=50_000)
    assert h.runtime.extra.queue_store("delayed").count() == 0  # nothing refused was stored


async def test_unacked_messages_survive_a_restart_with_their_attempts(
    doemu_harness: HarnessFactory, tmp_path: Any
) -> None:
    """A message stored before a restart is delivered after it; a v8 body keeps its types."""
    h = await doemu_harness(
        {},
        resources=_resources("kept", max_batch_size=5, max_batch_timeout=5),
        entry=Default,
        persist_dir=tmp_path / "state",
    )
    when = dt.datetime(2026, 1, 2, 3, 4, 5)
    await h.env.Q.send({"at": when, "raw": b"\x01"}, contentType="v8")
    await h.restart()
    await h.advance(5_000)
    ((body, attempts, _),) = SEEN["kept"][0]
    assert attempts == 1 and body["at"] == when and bytes(body["raw"]) == b"\x01"


def test_config_reads_producers_and_consumers(tmp_path: Any) -> None:
    from doemu.config import ConfigValueError, parse_config

    config = parse_config(
        {
            "name": "w",
            "main": "main.py",
            "queues": {
                "producers": [{"binding": "Q", "queue": "jobs"}],
                "consumers": [
                    {"queue": "jobs", "max_batch_size": 50, "dead_letter_queue": "jobs-dlq"}
                ],
            },
        },
        base_dir=tmp_path,
    )
    assert config.resources.producers == (QueueProducer("Q", "jobs"),)
    assert config.resources.consumers == (QueueConsumer("jobs", 50, 5.0, 3, 0, "jobs-dlq", None),)
    with pytest.raises(ConfigValueError) as bad:
        parse_config(
            {
                "name": "w",
                "main": "main.py",
                "queues": {"consumers": [{"queue": "q", "max_batch_size": 500}]},
            },
            base_dir=tmp_path,
        )
    assert "max_batch_size must be a number from 1 to 100, got 500" in str(bad.value)


async def test_the_admin_api_lists_queues_backlogs_and_dead_letters(tmp_path: Any) -> None:
    from doemu.clock import ManualClock
    from doemu.runtime import Runtime
    from doemu.server.app import DoemuApp

    from .admin_helpers import API, T0, client

    runtime = Runtime(
        worker_name="q-admin",
        classes={},
        persist_dir=tmp_path / "state",
        clock=ManualClock(T0),
        resources=WorkerResources(producers=(QueueProducer("Q", "waiting"),)),
    )
    await runtime.start()
    try:
        await runtime.env.Q.send("hello", contentType="text")
        async with client(DoemuApp(runtime)) as http:
            (listed,) = (await http.get(f"{API}/queues")).json()
        assert listed["queue"] == "waiting" and listed["producers"] == ["Q"]
        assert listed["consumer"] is None and listed["backlog"] == 1
        assert listed["messages"][0]["contentType"] == "text"
        assert listed["messages"][0]["attempts"] == 0 and listed["dead_letters"] == []
    finally:
        await runtime.close()
