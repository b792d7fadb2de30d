"""The storage alarm: get, set and delete with Cloudflare's validation, clamping and errors, the
commit hook reporting durable changes once, survival across a reopen, and delivery consuming or
keeping it."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest

from doemu.clock import ManualClock
from doemu.errors import AlarmError
from doemu.storage import ObjectStorage, Transaction

from .storage_helpers import NOW, Boom

# The error texts spelled out (golden), not imported from doemu: a drift in doemu's copy of
# Cloudflare's wording must fail a test.
SET_ALARM_NO_HANDLER = (
    "Your Durable Object class must have an alarm() handler in order to call setAlarm()"
)
SET_ALARM_NOT_POSITIVE = "setAlarm() cannot be called with an alarm time <= 0"


# -- alarms --------------------------------------------------------------------------------------


async def test_alarm_get_set_delete(storage: ObjectStorage) -> None:
    assert await storage.getAlarm() is None
    await storage.setAlarm(NOW + 5000)
    assert await storage.getAlarm() == NOW + 5000
    await storage.setAlarm(NOW + 1234.9)  # whole milliseconds, as JavaScript dates
    assert await storage.getAlarm() == NOW + 1234
    await storage.deleteAlarm()
    assert await storage.getAlarm() is None
    await storage.deleteAlarm()  # no alarm: no-op


async def test_alarm_accepts_datetimes(storage: ObjectStorage) -> None:
    when = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    await storage.setAlarm(when)
    assert await storage.getAlarm() == when.timestamp() * 1000
    await storage.setAlarm(dt.datetime(2030, 1, 1))  # naive means UTC
    assert await storage.getAlarm() == when.timestamp() * 1000
    await storage.setAlarm(dt.datetime(2030, 1, 1, 2, tzinfo=dt.timezone(dt.timedelta(hours=2))))
    assert await storage.getAlarm() == when.timestamp() * 1000


async def test_past_alarms_clamp_to_now(storage: ObjectStorage, storage_clock: ManualClock) -> None:
    await storage.setAlarm(1)
    assert await storage.getAlarm() == NOW
    storage_clock.advance(10_000)
    await storage.setAlarm(dt.datetime(2000, 1, 1))
    assert await storage.getAlarm() == NOW + 10_000


@pytest.mark.parametrize("when", [0, -5, 0.5, dt.datetime(1969, 12, 31, tzinfo=dt.UTC)])
async def test_alarm_time_must_be_positive(storage: ObjectStorage, when: Any) -> None:
    with pytest.raises(AlarmError) as info:
        await storage.setAlarm(when)
    assert info.value.message == SET_ALARM_NOT_POSITIVE
    assert info.value.name == "TypeError" and not isinstance(info.value, TypeError)


@pytest.mark.parametrize("when", ["tomorrow", None, True, float("nan"), float("inf")])
async def test_alarm_time_must_be_a_time(storage: ObjectStorage, when: Any) -> None:
    with pytest.raises(AlarmError):
        await storage.setAlarm(when)


async def test_alarm_needs_a_handler(open_storage: Callable[..., ObjectStorage]) -> None:
    storage = open_storage("h.sqlite", has_alarm_handler=False)
    with pytest.raises(AlarmError) as info:
        await storage.setAlarm(NOW + 1)
    assert info.value.message == SET_ALARM_NO_HANDLER
    assert await storage.getAlarm() is None
    await storage.deleteAlarm()  # allowed without a handler
    storage.has_alarm_handler = True
    await storage.setAlarm(NOW + 1)
    assert await storage.getAlarm() == NOW + 1


async def test_on_alarm_commit_reports_durable_changes_once(
    storage: ObjectStorage, alarm_commits: list[float | None]
) -> None:
    await storage.setAlarm(NOW + 1)
    await storage.setAlarm(NOW + 2)
    assert alarm_commits == []  # not durable yet
    await asyncio.sleep(0)
    assert alarm_commits == [NOW + 2]  # the final value, once
    await storage.put("unrelated", 1)
    await asyncio.sleep(0)
    await storage.setAlarm(NOW + 2)  # unchanged value
    await asyncio.sleep(0)
    assert alarm_commits == [NOW + 2]
    await storage.deleteAlarm()
    await storage.sync()
    assert alarm_commits == [NOW + 2, None]


async def test_on_alarm_commit_not_called_on_rollback(
    storage: ObjectStorage, alarm_commits: list[float | None]
) -> None:
    await storage.setAlarm(NOW + 1)
    storage.rollback()
    await asyncio.sleep(0)
    assert alarm_commits == []

    async def closure(txn: Transaction) -> None:
        await txn.setAlarm(NOW + 5)
        assert await txn.getAlarm() == NOW + 5
        txn.rollback()

    def failing() -> None:
        storage.setAlarm(NOW + 7)
        raise Boom

    await storage.transaction(closure)
    with pytest.raises(Boom):
        storage.transactionSync(failing)
    await asyncio.sleep(0)
    assert alarm_commits == []
    assert await storage.getAlarm() is None


async def test_alarm_set_and_deleted_in_one_turn_reports_nothing(
    storage: ObjectStorage, alarm_commits: list[float | None]
) -> None:
    await storage.setAlarm(NOW + 1)
    await storage.deleteAlarm()
    await asyncio.sleep(0)
    assert alarm_commits == []


async def test_alarm_survives_reopen(open_storage: Callable[..., ObjectStorage]) -> None:
    first = open_storage("reopen.sqlite")
    await first.setAlarm(NOW + 60_000)
    first.close()
    reports: list[float | None] = []
    second = open_storage("reopen.sqlite", on_alarm_commit=reports.append)
    assert await second.getAlarm() == NOW + 60_000
    await second.setAlarm(NOW + 60_000)
    await second.sync()
    assert reports == []  # already the committed value


# -- alarm delivery (runtime-facing) -------------------------------------------------------------


async def test_successful_delivery_consumes_the_alarm(
    storage: ObjectStorage, alarm_commits: list[float | None]
) -> None:
    await storage.setAlarm(NOW + 10)
    await storage.sync()
    storage.begin_alarm_delivery(NOW + 10)
    assert await storage.getAlarm() is None  # started: not "set" any more
    assert storage.alarm_time() == NOW + 10
    assert storage.end_alarm_delivery(success=True) is False
    assert storage.alarm_time() is None
    storage.commit()
    assert alarm_commits == [NOW + 10, None]


async def test_failed_delivery_keeps_the_alarm_for_the_retry(
    storage: ObjectStorage, alarm_commits: list[float | None]
) -> None:
    await storage.setAlarm(NOW + 10)
    await storage.sync()
    storage.begin_alarm_delivery(NOW + 10)
    assert storage.end_alarm_delivery(success=False) is False
    assert await storage.getAlarm() == NOW + 10
    storage.set_alarm_internal(NOW + 2010)  # the runtime's retry time
    storage.commit()
    assert await storage.getAlarm() == NOW + 2010
    assert alarm_commits == [NOW + 10, NOW + 2010]
    storage.set_alarm_internal(None)  # dropped after the last retry
    storage.commit()
    assert alarm_commits == [NOW + 10, NOW + 2010, None]


@pytest.mark.parametrize("success", [True, False])
async def test_a_handler_that_sets_the_alarm_keeps_it(
    storage: ObjectStorage, alarm_commits: list[float | None], success: bool
) -> None:
    await storage.setAlarm(NOW + 10)
    await storage.sync()
    storage.begin_alarm_delivery(NOW + 10)
    await storage.setAlarm(NOW + 60_000)
    assert await storage.getAlarm() == NOW + 60_000
    assert storage.end_alarm_delivery(success=success) is True
    await storage.sync()
    assert await storage.getAlarm() == NOW + 60_000
    assert alarm_commits == [NOW + 10, NOW + 60_000]


async def test_set_alarm_internal_skips_validation(
    open_storage: Callable[..., ObjectStorage],
) -> None:
    storage = open_storage("i.sqlite", has_alarm_handler=False)
    storage.set_alarm_internal(5.0)  # no handler check, no clamping
    assert await storage.getAlarm() == 5.0
