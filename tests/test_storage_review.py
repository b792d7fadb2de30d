"""Regressions found in review: alarm changes inside the alarm handler, and async transactions
that ran concurrently with other events."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from workers import DurableObject

from doemu.storage import ObjectStorage, Transaction
from doemu.testing.plugin import HarnessFactory

from .storage_helpers import NOW


class Boom(Exception):
    pass


async def armed(storage: ObjectStorage, alarm_commits: list[float | None]) -> float:
    """An alarm at NOW + 10, committed and reported, being delivered."""
    at = NOW + 10
    await storage.setAlarm(at)
    await storage.sync()
    assert alarm_commits == [at]
    storage.begin_alarm_delivery(at)
    return at


# -- the alarm handler sets the delivered time again ---------------------------------------------


async def test_setting_the_delivered_time_again_is_reported_and_kept(
    storage: ObjectStorage, alarm_commits: list[float | None]
) -> None:
    at = await armed(storage, alarm_commits)
    await storage.setAlarm(at)  # the scheduler already dropped this time: it must learn again
    assert await storage.getAlarm() == at
    await storage.sync()
    assert alarm_commits == [at, at]
    assert storage.end_alarm_delivery(success=True) is True  # set by the handler: not consumed
    storage.commit()
    assert storage.alarm_time() == at
    assert alarm_commits == [at, at]


async def test_setting_the_delivered_time_reported_when_committed_after_delivery(
    storage: ObjectStorage, alarm_commits: list[float | None]
) -> None:
    at = await armed(storage, alarm_commits)
    await storage.setAlarm(at)
    assert storage.end_alarm_delivery(success=False) is True  # a retry is not needed
    storage.commit()
    assert alarm_commits == [at, at]


async def test_untouched_delivery_is_not_reported_until_settled(
    storage: ObjectStorage, alarm_commits: list[float | None]
) -> None:
    at = await armed(storage, alarm_commits)
    await storage.put("k", 1)
    await storage.deleteAlarm()
    await storage.setAlarm(at)  # back to the delivered time, but set by the handler
    storage.set_meta("x", 1)
    await storage.sync()
    assert alarm_commits == [at, at]
    assert storage.end_alarm_delivery(success=True) is True


async def test_an_untouched_successful_delivery_reports_the_deletion(
    storage: ObjectStorage, alarm_commits: list[float | None]
) -> None:
    at = await armed(storage, alarm_commits)
    await storage.put("k", 1)
    await storage.sync()  # the handler's own commits report nothing while the alarm is untouched
    assert alarm_commits == [at]
    assert storage.end_alarm_delivery(success=True) is False
    storage.commit()
    assert alarm_commits == [at, None]


# -- a setAlarm that was rolled back does not count ----------------------------------------------


@pytest.mark.parametrize("success", [True, False])
async def test_set_alarm_rolled_back_with_transaction_sync_does_not_count(
    storage: ObjectStorage, alarm_commits: list[float | None], success: bool
) -> None:
    at = await armed(storage, alarm_commits)

    def tentative() -> None:
        storage.setAlarm(NOW + 99_999)
        raise Boom

    with pytest.raises(Boom):
        storage.transactionSync(tentative)
    assert await storage.getAlarm() is None  # still "being delivered"
    await storage.sync()
    assert storage.end_alarm_delivery(success=success) is False
    storage.commit()
    if success:
        assert storage.alarm_time() is None  # consumed
        assert alarm_commits == [at, None]
    else:
        assert storage.alarm_time() == at  # left for the retry
        assert alarm_commits == [at]


async def test_delete_alarm_rolled_back_with_txn_rollback_does_not_count(
    storage: ObjectStorage, alarm_commits: list[float | None]
) -> None:
    at = await armed(storage, alarm_commits)

    async def tentative(txn: Transaction) -> None:
        await txn.deleteAlarm()
        await txn.setAlarm(at)
        txn.rollback()

    await storage.transaction(tentative)
    assert await storage.getAlarm() is None
    assert storage.end_alarm_delivery(success=False) is False
    assert storage.alarm_time() == at


async def test_set_alarm_in_a_kept_transaction_counts(
    storage: ObjectStorage, alarm_commits: list[float | None]
) -> None:
    at = await armed(storage, alarm_commits)

    def kept() -> None:
        storage.setAlarm(at)

    storage.transactionSync(kept)
    assert await storage.getAlarm() == at
    assert storage.end_alarm_delivery(success=False) is True


async def test_ctx_abort_drops_the_handlers_set_alarm(
    storage: ObjectStorage, alarm_commits: list[float | None]
) -> None:
    at = await armed(storage, alarm_commits)
    await storage.setAlarm(at)
    storage.rollback()
    assert await storage.getAlarm() is None
    assert storage.end_alarm_delivery(success=False) is False


async def test_a_delivery_interrupted_by_a_crash_leaves_nothing_behind(
    open_storage: Callable[..., ObjectStorage],
) -> None:
    first = open_storage("crash.sqlite")
    await first.setAlarm(NOW + 10)
    first.begin_alarm_delivery(NOW + 10)
    await first.setAlarm(NOW + 10)
    await first.sync()
    first.close()  # the process died before the delivery ended
    second = open_storage("crash.sqlite")
    second.begin_alarm_delivery(NOW + 10)
    assert await second.getAlarm() is None  # this delivery has not set anything
    assert second.end_alarm_delivery(success=False) is False


# -- the same through the runtime ----------------------------------------------------------------


class Rearming(DurableObject):
    async def arm(self, at: float) -> None:
        await self.ctx.storage.setAlarm(at)

    async def state(self) -> list[Any]:
        return [await self.ctx.storage.get("n") or 0, await self.ctx.storage.getAlarm()]

    async def alarm(self, info: Any) -> None:
        storage = self.ctx.storage
        n = (await storage.get("n") or 0) + 1
        await storage.put("n", n)
        mode = self.env.MODE
        if mode == "same" and n == 1:
            await storage.setAlarm(info.scheduledTime)
        if mode == "rolled-back":

            def tentative() -> None:
                storage.setAlarm(10**13)
                raise Boom

            with pytest.raises(Boom):
                storage.transactionSync(tentative)
            if n == 1:
                raise RuntimeError("fails once: must be retried")


async def test_handler_rearming_the_delivered_time_fires_again(
    doemu_harness: HarnessFactory, unique_name: Callable[[str], str]
) -> None:
    h = await doemu_harness({"R": Rearming}, vars={"MODE": "same"})
    stub = h.env.R.getByName(unique_name("rearming"))
    await stub.arm(h.clock.now() + 1000)
    await h.advance(1000)
    await h.advance(10)
    assert await stub.state() == [2, None]


async def test_rolled_back_set_alarm_does_not_cancel_the_retry(
    doemu_harness: HarnessFactory, unique_name: Callable[[str], str]
) -> None:
    h = await doemu_harness({"R": Rearming}, vars={"MODE": "rolled-back"})
    stub = h.env.R.getByName(unique_name("rolled-back"))
    await stub.arm(h.clock.now() + 1000)
    await h.advance(1000)
    await h.advance(300_000)
    assert await stub.state() == [2, None]


# -- concurrent async transactions ---------------------------------------------------------------


def held_txn(
    key: str,
    *,
    fail: bool,
    entered: asyncio.Event | None = None,
    release: asyncio.Event | None = None,
) -> Callable[[Transaction], Awaitable[None]]:
    """A transaction body: put ``key``, set ``entered``, wait for ``release``, then end (raising
    :class:`Boom` if ``fail``)."""

    async def body(txn: Transaction) -> None:
        await txn.put(key, 1)
        if entered is not None:
            entered.set()
        if release is not None:
            await release.wait()
        if fail:
            raise Boom

    return body


async def quietly(awaitable: Awaitable[Any]) -> None:
    try:
        await awaitable
    except Boom:
        pass


@pytest.mark.parametrize(
    ("first", "second", "released_first"),
    [
        (("ok", False), ("bad", True), "second"),
        (("ok", False), ("bad", True), "first"),
        (("bad", True), ("ok", False), "second"),
    ],
)
async def test_concurrent_transactions_do_not_share_savepoints(
    storage: ObjectStorage,
    first: tuple[str, bool],
    second: tuple[str, bool],
    released_first: str,
) -> None:
    """1. A transaction is open and held.  2. Another event starts a transaction: it waits for
    the first instead of opening a savepoint inside it.  3. Both are let go, in either order (the
    order that would decide which writes survive if they shared one savepoint stack): only the
    succeeding one's write is kept."""
    release = {"first": asyncio.Event(), "second": asyncio.Event()}
    entered = {"first": asyncio.Event(), "second": asyncio.Event()}
    requested = asyncio.Event()

    def run(which: str, key: str, fail: bool) -> Awaitable[None]:
        body = held_txn(key, fail=fail, entered=entered[which], release=release[which])
        return quietly(storage.transaction(body))

    one = asyncio.create_task(run("first", *first))
    await entered["first"].wait()

    async def second_event() -> None:
        requested.set()  # it runs on, without yielding, up to its first wait
        await run("second", *second)

    two = asyncio.create_task(second_event())
    await requested.wait()
    assert not entered["second"].is_set()  # waiting for the first transaction to end
    release[released_first].set()
    release["second" if released_first == "first" else "first"].set()
    await asyncio.gather(one, two)
    assert await storage.list() == {"ok": 1}


async def test_exclusive_runs_the_whole_transaction_and_never_sees_its_error(
    open_storage: Callable[..., ObjectStorage],
) -> None:
    gate = asyncio.Lock()  # stands for the object's input gate
    entered: list[str] = []
    leaked: list[BaseException] = []

    async def exclusive(fn: Callable[[], Awaitable[Any]]) -> Any:
        async with gate:
            entered.append("in")
            try:
                return await fn()
            except BaseException as exc:
                leaked.append(exc)
                raise

    storage = open_storage("x.sqlite", exclusive=exclusive)
    started = asyncio.Event()
    knocking = asyncio.Event()

    async def body(txn: Transaction) -> None:
        await txn.put("t", 1)
        await storage.transaction(lambda inner: inner.put("nested", 1))  # no second gate
        started.set()
        await knocking.wait()  # another event waits at the gate while the transaction holds it
        raise Boom

    async def other_event() -> str:
        knocking.set()  # it runs on, without yielding, into the gate's queue
        async with gate:  # delivered only once the gate opens
            await storage.put("other", "acknowledged")
            return "replied"

    txn = asyncio.create_task(storage.transaction(body))
    await started.wait()
    other = asyncio.create_task(other_event())
    with pytest.raises(Boom):
        await txn
    assert await other == "replied"
    await asyncio.sleep(0)
    assert await storage.list() == {"other": "acknowledged"}
    assert entered == ["in"]
    assert leaked == []
    assert await storage.transaction(lambda t: t.get("other")) == "acknowledged"
    assert entered == ["in", "in"]


async def test_nested_transactions_from_other_tasks_end_before_the_outer_one(
    storage: ObjectStorage,
) -> None:
    spawned: list[asyncio.Task[Any]] = []
    bad_entered, outer_returned, release = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def outer(txn: Transaction) -> None:
        await txn.put("outer", 1)
        # Two nested transactions in tasks the callback does not await: they run one at a time,
        # and the outer transaction waits for them before it ends.
        bad = held_txn("bad", fail=True, entered=bad_entered, release=release)
        spawned.append(asyncio.create_task(quietly(storage.transaction(bad))))
        ok = held_txn("ok", fail=False, release=release)
        spawned.append(asyncio.create_task(storage.transaction(ok)))
        await bad_entered.wait()  # the first nested one runs; the second waits for it
        outer_returned.set()

    running = asyncio.create_task(storage.transaction(outer))
    await outer_returned.wait()
    assert not running.done()  # the callback returned, the transaction waits for the nested ones
    assert not any(task.done() for task in spawned)
    release.set()
    await running
    assert all(task.done() for task in spawned)
    assert await storage.list() == {"ok": 1, "outer": 1}


async def test_a_task_that_outlives_its_transaction_starts_a_top_level_one(
    storage: ObjectStorage,
) -> None:
    later: list[asyncio.Task[Any]] = []
    outer_ended = asyncio.Event()

    async def late() -> None:
        await outer_ended.wait()
        await storage.transaction(held_txn("late", fail=True))

    async def outer(txn: Transaction) -> None:
        await txn.put("outer", 1)
        later.append(asyncio.create_task(quietly(late())))

    await storage.transaction(outer)
    outer_ended.set()
    async with asyncio.timeout(2):
        await later[0]
    assert await storage.list() == {"outer": 1}
