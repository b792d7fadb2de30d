"""SIGKILL and restart: acknowledged writes and pending alarms survive a crash, at both
durability levels; and a kill between an alarm's two writes (the namespace's table, the object's
file) still leaves an alarm that fires with no request."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.polling import eventually_sync

from .harness import DevServer

LEVELS = pytest.mark.parametrize("level", ["process", "power"])


def admin_sql(server: DevServer, binding: str, name: str, query: str) -> list[list[Any]]:
    """Read an object's SQL through the admin API (read-only: never wakes the object)."""
    response = httpx.post(
        f"{server.url}/__doemu/api/objects/{binding}/{name}/sql", json={"query": query}
    )
    response.raise_for_status()
    return list(response.json()["rows"])


@LEVELS
def test_acknowledged_increments_survive_sigkill(
    dev_server: Any, counter_project: Path, level: str
) -> None:
    """1. 32 concurrent clients increment 40 objects.
    2. Once 400 increments are acknowledged, the process group is SIGKILLed mid-load.
    3. After a restart on the same persist dir, every object holds at least its acknowledged
       count (an increment whose response was lost may or may not have landed)."""
    server = dev_server(counter_project, "--durability", level)
    names = [f"crash-{i}" for i in range(40)]
    acked = dict.fromkeys(names, 0)
    sent = dict.fromkeys(names, 0)
    total_acked = 0
    killed = asyncio.Event()
    enough = asyncio.Event()

    async def client(seed: int) -> None:
        nonlocal total_acked
        rng = random.Random(seed)
        async with httpx.AsyncClient(base_url=server.url, timeout=5) as http:
            while not killed.is_set():
                name = rng.choice(names)
                sent[name] += 1
                try:
                    response = await http.post(f"/COUNTER/{name}/incr")
                except httpx.HTTPError:
                    return
                if response.status_code == 200:
                    acked[name] += 1
                    total_acked += 1
                    if total_acked >= 400:
                        enough.set()

    async def load_then_kill() -> None:
        tasks = [asyncio.ensure_future(client(i)) for i in range(32)]
        await asyncio.wait_for(enough.wait(), timeout=30)
        await asyncio.get_running_loop().run_in_executor(None, server.kill)
        killed.set()
        await asyncio.gather(*tasks)

    asyncio.run(load_then_kill())
    assert total_acked >= 400
    server.start()
    with httpx.Client(base_url=server.url) as http:
        for name in names:
            value = http.get(f"/COUNTER/{name}/value").json()["value"]
            assert acked[name] <= value <= sent[name], (name, acked[name], value, sent[name])


@LEVELS
def test_alarm_set_before_sigkill_fires_after_restart_without_a_request(
    dev_server: Any, counter_project: Path, level: str
) -> None:
    """1. On a manual clock (time stands still, so the alarm cannot fire before the kill however
    slow the machine), set an alarm for +3 s of server time.  2. Once the admin API reports it
    pending (committed and scheduled), SIGKILL the server and restart it on the real clock.
    3. With no request to the object, its own SQL log shows the alarm fired, not before its
    time."""
    server = dev_server(counter_project, "--durability", level, "--clock", "manual")
    clock = f"{server.url}/__doemu/api/clock"
    now = httpx.get(clock).json()["now"]
    alarm_at = httpx.post(f"{server.url}/COUNTER/sleeper/alarm?in_ms=3000").json()["alarm"]
    assert alarm_at == now + 3000  # the server's clock stood still in between
    alarm_api = f"{server.url}/__doemu/api/objects/COUNTER/sleeper/alarm"
    pending = eventually_sync(
        lambda: httpx.get(alarm_api).json()["scheduled_time"],
        within=5,
        what="the admin API to report the pending alarm",
    )
    assert pending == alarm_at
    assert httpx.get(clock).json()["now"] == now  # still before the alarm
    server.kill()
    server.args = ["--durability", level]  # the real clock from here on
    server.start()
    rows = eventually_sync(
        lambda: admin_sql(
            server, "COUNTER", "sleeper", "SELECT fired_at, scheduled FROM alarm_log"
        ),
        within=20,
        what="the alarm to fire after the restart",
    )
    fired_at, scheduled = rows[0]
    assert scheduled == alarm_at
    assert fired_at >= alarm_at
    # No request reached the object: it was built once before the crash and once by the alarm.
    assert admin_sql(server, "COUNTER", "sleeper", "SELECT count(*) FROM boots") == [[2]]


def _killed_by_its_crash_point(server: DevServer) -> None:
    assert server.proc is not None
    server.proc.wait(10)
    assert server.proc.returncode == -9, server.output
    server.env.pop("DOEMU_CRASH_AT")


@LEVELS
def test_a_kill_right_after_the_objects_alarm_commit_still_fires_it(
    dev_server: Any, counter_project: Path, level: str
) -> None:
    """1. ``DOEMU_CRASH_AT=alarm-committed``: the server SIGKILLs itself right after the commit
    that set the object's alarm, before the runtime does anything else with it.
    2. Restart without it.  3. With no request, the alarm fires: the namespace's alarm table
    held it before the object's file did (in the old order, table after object, it was lost
    until a request touched the object)."""
    server = dev_server(
        counter_project, "--durability", level, env={"DOEMU_CRASH_AT": "alarm-committed"}
    )
    with pytest.raises(httpx.HTTPError):
        httpx.post(f"{server.url}/COUNTER/sleeper/alarm?in_ms=1500")
    _killed_by_its_crash_point(server)
    server.start()
    rows = eventually_sync(
        lambda: admin_sql(
            server, "COUNTER", "sleeper", "SELECT fired_at, scheduled FROM alarm_log"
        ),
        within=20,
        what="the alarm to fire after the restart",
    )
    assert rows[0][0] >= rows[0][1]
    assert admin_sql(server, "COUNTER", "sleeper", "SELECT count(*) FROM boots") == [[2]]


def test_a_kill_between_the_table_and_the_objects_commit_leaves_nothing_behind(
    dev_server: Any, counter_project: Path
) -> None:
    """1. ``DOEMU_CRASH_AT=alarm-prepared``: the table holds the new alarm, the object's commit
    never ran.  2. Restart.  3. The row wakes the object once; the object has no alarm, so
    nothing fires and the row is dropped: the admin API reports no pending alarm."""
    server = dev_server(counter_project, env={"DOEMU_CRASH_AT": "alarm-prepared"})
    with pytest.raises(httpx.HTTPError):
        httpx.post(f"{server.url}/COUNTER/ghost/alarm?in_ms=500")
    _killed_by_its_crash_point(server)
    server.start()
    alarm_api = f"{server.url}/__doemu/api/objects/COUNTER/ghost/alarm"
    eventually_sync(
        lambda: admin_sql(server, "COUNTER", "ghost", "SELECT count(*) FROM boots") == [[1]],
        within=20,
        what="the stale row to wake the object once",
        ignoring=(httpx.HTTPStatusError,),  # 400 "no such table" until it is built
    )
    eventually_sync(
        lambda: httpx.get(alarm_api).json()["scheduled_time"] is None,
        within=10,
        what="the stale row to be dropped",
    )
    assert admin_sql(server, "COUNTER", "ghost", "SELECT count(*) FROM alarm_log") == [[0]]
