"""queue(): durable in-order processing, retries, poison items, and draining after a crash.

The queue is flushed in the background (``ctx.waitUntil``), so tests poll the table with a deadline
instead of sleeping. Back-off sleeps are replaced by a recorder.
"""

from __future__ import annotations

import asyncio
import importlib
import json
from collections.abc import Callable
from typing import Any

import pytest

from agents import Agent, AgentOptions, RetryOptions
from agents.queue import QueueItem
from doemu.clock import ManualClock
from doemu.testing.plugin import HarnessFactory

from .polling import eventually

retry_module = importlib.import_module("agents.retry")

START_MS = 1_700_000_000_000

DONE: dict[str, list[Any]] = {}
ATTEMPTS: dict[str, int] = {}
ERRORS: dict[str, list[dict[str, Any]]] = {}
STARTED: dict[str, asyncio.Event] = {}
GATE: dict[str, asyncio.Event] = {}


class Worker(Agent):
    options = AgentOptions(retry=RetryOptions(max_attempts=3, base_delay_ms=100, max_delay_ms=3000))

    async def work(self, payload: dict[str, Any], item: QueueItem) -> None:
        key = f"{self.name}:{payload['n']}"
        ATTEMPTS[key] = ATTEMPTS.get(key, 0) + 1
        if ATTEMPTS[key] <= payload.get("fail_times", 0):
            raise RuntimeError(f"item {payload['n']} failed")
        assert item.payload == payload
        DONE.setdefault(self.name, []).append(payload["n"])

    async def blocking(self, payload: dict[str, Any]) -> None:
        """Blocks on the first activation (until the test resets the object)."""
        ATTEMPTS[f"{self.name}:block"] = ATTEMPTS.get(f"{self.name}:block", 0) + 1
        gate = GATE.get(self.name)
        if gate is not None:
            STARTED[self.name].set()
            await gate.wait()
        DONE.setdefault(self.name, []).append(payload["n"])

    async def on_error(self, error: BaseException, context: Any = None) -> None:
        ERRORS.setdefault(self.name, []).append(
            {"error": str(error), "id": getattr(context, "id", None)}
        )

    async def enqueue(self, items: list[dict[str, Any]], callback: str = "work") -> list[str]:
        return [await self.queue(callback, item) for item in items]

    async def enqueue_with_retry(self, item: dict[str, Any], retry: dict[str, int]) -> str:
        return await self.queue(self.work, item, retry=retry)

    async def try_enqueue(self, callback: str) -> str:
        try:
            await self.queue(callback, {})
        except Exception as exc:
            return type(exc).__name__
        return "ok"

    async def enqueue_and_read_rows(self) -> list[dict[str, Any]]:
        await self.queue("work", {"n": 7}, retry={"max_attempts": 2})
        return self.sql("SELECT * FROM cf_agents_queues")  # before the flush gets a turn

    async def pending(self) -> int:
        return len(self.sql("SELECT id FROM cf_agents_queues"))

    async def rows(self) -> list[dict[str, Any]]:
        return self.sql("SELECT * FROM cf_agents_queues ORDER BY created_at, rowid")

    async def inspect_then_dequeue(self) -> dict[str, Any]:
        ids = [await self.queue("work", {"n": n, "kind": kind}) for n, kind in enumerate("aabc")]
        result: dict[str, Any] = {
            "get": self.get_queue(ids[0]).to_dict(),  # type: ignore[union-attr]
            "missing": self.get_queue("nope"),
            "by_kind": [i.id for i in self.get_queues("kind", "a")],
            "ids": ids,
        }
        self.dequeue(ids[0])
        self.dequeue_all_by_callback("other")
        result["after_dequeue"] = [i.id for i in self.get_queues("kind", "a")]
        return result

    async def enqueue_and_clear(self) -> int:
        for n in range(3):
            await self.queue("work", {"n": n})
        self.dequeue_all()
        return len(self.sql("SELECT id FROM cf_agents_queues"))


class QueuesOnStart(Agent):
    async def on_start(self) -> None:
        if not self.sql("SELECT id FROM cf_agents_queues"):
            if not DONE.get(self.name):
                await self.queue("work", {"n": "from on_start"})

    async def work(self, payload: dict[str, Any]) -> None:
        DONE.setdefault(self.name, []).append(payload["n"])

    async def ping(self) -> str:
        return "pong"


@pytest.fixture(autouse=True)
def fake_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(retry_module, "sleep", sleep)
    monkeypatch.setattr(retry_module, "random", lambda: 0.5)
    return slept


@pytest.fixture
async def worker(doemu_harness: HarnessFactory, unique_name: Callable[[str], str]) -> Any:
    h = await doemu_harness(
        {"WORKER": Worker, "ONSTART": QueuesOnStart}, clock=ManualClock(START_MS)
    )
    name = unique_name("worker")
    return h, h.env.WORKER.getByName(name), name


async def drained(stub: Any) -> None:
    async def empty() -> bool:
        return bool(await stub.pending() == 0)

    await eventually(empty, what="the queue to empty")


async def test_items_run_in_order_and_are_removed(worker: Any) -> None:
    _h, stub, name = worker
    ids = await stub.enqueue([{"n": n} for n in range(5)])
    assert len(set(ids)) == 5
    await drained(stub)
    assert DONE[name] == [0, 1, 2, 3, 4]


async def test_rows_use_the_sdk_columns(worker: Any) -> None:
    _h, stub, _name = worker
    [row] = await stub.enqueue_and_read_rows()
    assert set(row) == {"id", "payload", "callback", "created_at", "retry_options"}
    assert row["callback"] == "work"
    assert json.loads(row["payload"]) == {"n": 7}
    assert row["created_at"] == START_MS // 1000  # seconds
    assert json.loads(row["retry_options"]) == {"maxAttempts": 2}
    result = await stub.inspect_then_dequeue()
    assert result["get"] == {
        "id": result["ids"][0],
        "callback": "work",
        "payload": {"n": 0, "kind": "a"},
        "created_at": START_MS // 1000,
    }


async def test_a_failing_item_is_retried(worker: Any, fake_sleep: list[float]) -> None:
    _h, stub, name = worker
    await stub.enqueue([{"n": 1, "fail_times": 2}, {"n": 2}])
    await drained(stub)
    assert ATTEMPTS[f"{name}:1"] == 3
    assert DONE[name] == [1, 2]
    assert ERRORS.get(name) is None
    assert fake_sleep == [0.1, 0.2]  # floor(0.5 * 100 * 2**n) ms for n = 1, 2


async def test_a_poison_item_is_reported_and_never_blocks_later_ones(worker: Any) -> None:
    _h, stub, name = worker
    ids = await stub.enqueue([{"n": 1, "fail_times": 99}, {"n": 2}, {"n": 3}])
    await drained(stub)
    assert ATTEMPTS[f"{name}:1"] == 3
    assert DONE[name] == [2, 3]
    assert ERRORS[name] == [{"error": "item 1 failed", "id": ids[0]}]


async def test_per_item_retry_options(worker: Any) -> None:
    _h, stub, name = worker
    await stub.enqueue_with_retry({"n": 1, "fail_times": 99}, {"max_attempts": 1})
    await stub.enqueue_with_retry({"n": 2, "fail_times": 4}, {"maxAttempts": 5})
    await drained(stub)
    assert ATTEMPTS[f"{name}:1"] == 1
    assert ATTEMPTS[f"{name}:2"] == 5
    assert DONE[name] == [2]
    assert len(ERRORS[name]) == 1


async def test_unknown_callback_is_refused(worker: Any) -> None:
    _h, stub, _name = worker
    assert await stub.try_enqueue("no_such_method") == "QueueError"
    assert await stub.pending() == 0


async def test_get_queue_get_queues_and_dequeue(worker: Any) -> None:
    _h, stub, name = worker
    result = await stub.inspect_then_dequeue()
    assert result["missing"] is None
    assert result["by_kind"] == result["ids"][:2]
    assert result["after_dequeue"] == [result["ids"][1]]
    await drained(stub)
    assert DONE[name] == [1, 2, 3]  # item 0 was dequeued before the flush ran
    assert await stub.enqueue_and_clear() == 0


async def test_items_left_by_a_reset_are_drained_on_the_next_activation(worker: Any) -> None:
    h, stub, name = worker
    GATE[name] = asyncio.Event()
    STARTED[name] = asyncio.Event()
    await stub.enqueue([{"n": 1}, {"n": 2}], "blocking")
    await asyncio.wait_for(STARTED[name].wait(), 5)
    h.reset("WORKER", name, "simulated crash")  # in-flight item 1 never finished
    assert DONE.get(name) is None
    del GATE[name]  # the next activation does not block

    await stub.pending()  # any event activates the object; _start resumes the queue
    await drained(stub)
    assert DONE[name] == [1, 2]
    assert ATTEMPTS[f"{name}:block"] == 3  # item 1 ran again: at least once


async def test_items_queued_during_on_start_are_drained(worker: Any) -> None:
    h, _stub, _name = worker
    stub = h.env.ONSTART.getByName("onstart-" + _name)
    assert await stub.ping() == "pong"
    await eventually(
        lambda: DONE.get("onstart-" + _name) == ["from on_start"], what="the on_start item"
    )
