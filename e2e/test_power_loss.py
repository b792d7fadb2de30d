"""Power-loss durability, tested by losing power.

A SIGKILL keeps every write the kernel has, synced or not, so it cannot tell ``--durability
power`` from ``process`` (``e2e/test_crash_recovery.py`` proves the SIGKILL promise). Here a real
``doemu dev`` runs with the power-cut shim (:mod:`e2e.powercut`) preloaded: every
``fsync``/``fdatasync`` under its persist dir records what it made durable. The load is a mix
of what an app writes — SQL increments, KV puts and alarms, on a dozen objects and on a new
object every third request, with every object evicted midway (so woken objects start new WAL
files) — and the process group
is SIGKILLed while requests are in flight. The cut then rebuilds the persist dir from what was
synced alone, and a fresh server (without the shim) reads everything back:

* at ``power``, every write whose response arrived survived (the shim saw the syncs, none of an
  unmodelled kind, and the cut did drop what was never synced);
* at ``process``, the same run loses acknowledged writes: the test can fail, and would if
  ``power`` stopped syncing.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from .harness import DevServer
from .powercut import CutReport, PowerCut, build_shim, compiler

OBJECTS = 12
CLIENTS = 16
#: Acknowledged writes before the objects are all evicted, and before the power is cut.
EVICT_AFTER, CUT_AFTER = 150, 400
ALARM_IN_MS = 3_600_000  # an hour: no alarm fires during the test; each must still be pending


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if compiler() is None:
        reason = "no C compiler (cc or gcc) to build the power-cut shim"
        if os.environ.get("DOEMU_E2E_REQUIRE_CC") == "1":
            pytest.fail(f"DOEMU_E2E_REQUIRE_CC=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return build_shim(tmp_path_factory.mktemp("powercut"))


@dataclass
class Acked:
    """What the clients saw acknowledged (a 200 that arrived before the cut)."""

    incr: dict[str, int] = field(default_factory=dict)
    sent: dict[str, int] = field(default_factory=dict)
    kv: dict[tuple[str, str], str] = field(default_factory=dict)
    alarms: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.incr.values()) + len(self.kv) + len(self.alarms)


@dataclass
class Outcome:
    acked: Acked
    report: CutReport
    syncs: list[tuple[str, str]]
    lost: list[str]  # acknowledged writes not found after the cut


async def _load(server: DevServer, names: list[str], acked: Acked) -> None:
    """Writes from many clients until CUT_AFTER are acknowledged, evicting every object once
    on the way; then the process group is SIGKILLed with requests still in flight."""
    stop = asyncio.Event()
    evict, enough = asyncio.Event(), asyncio.Event()

    def ack() -> None:
        if acked.total >= EVICT_AFTER:
            evict.set()
        if acked.total >= CUT_AFTER:
            enough.set()

    async def client(seed: int, http: httpx.AsyncClient) -> None:
        rng = random.Random(seed)
        n = 0
        while not stop.is_set():
            name = rng.choice(names)
            n += 1
            try:
                if n % 3 == 0:
                    acked.sent[name] = acked.sent.get(name, 0) + 1
                    response = await http.post(f"/COUNTER/{name}/incr")
                    if response.status_code == 200 and not stop.is_set():
                        acked.incr[name] = acked.incr.get(name, 0) + 1
                else:
                    if n % 3 == 2:  # a new object: its file and directory entry are new too
                        name = f"{names[0]}-new-{seed}-{n}"
                    key, value = f"k{seed}-{n}", f"v{seed}-{n}-" + "x" * rng.randrange(2_000)
                    response = await http.put(f"/COUNTER/{name}/kv/{key}", content=value)
                    if response.status_code == 200 and not stop.is_set():
                        acked.kv[(name, key)] = value
            except httpx.HTTPError:
                return  # the server is gone
            ack()

    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        for name in names[: OBJECTS // 2]:  # half the objects get an alarm before the load
            response = await http.post(f"/COUNTER/{name}/alarm", params={"in_ms": ALARM_IN_MS})
            response.raise_for_status()
            acked.alarms[name] = response.json()["alarm"]
        tasks = [asyncio.ensure_future(client(i, http)) for i in range(CLIENTS)]
        await asyncio.wait_for(evict.wait(), timeout=60)
        (await http.post("/__doemu/api/evict-all", json={})).raise_for_status()
        for name in names[OBJECTS // 2 :]:  # the rest after it, on woken objects
            response = await http.post(f"/COUNTER/{name}/alarm", params={"in_ms": ALARM_IN_MS})
            response.raise_for_status()
            acked.alarms[name] = response.json()["alarm"]
        await asyncio.wait_for(enough.wait(), timeout=60)
        stop.set()  # nothing that arrives from here on counts as acknowledged
        await asyncio.get_running_loop().run_in_executor(None, server.kill)
        await asyncio.gather(*tasks)


def _missing(server: DevServer, acked: Acked) -> list[str]:
    """Every acknowledged write the restarted server does not have."""
    missing = []
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for name, count in sorted(acked.incr.items()):
            value = http.get(f"/COUNTER/{name}/value").json()["value"]
            assert value <= acked.sent[name], (name, value, acked.sent[name])
            if value < count:
                missing.append(f"{name}: counter {value}, {count} increments acknowledged")
        for (name, key), value in sorted(acked.kv.items()):
            stored = http.get(f"/COUNTER/{name}/kv/{key}").json()["value"]
            if stored != value:
                missing.append(f"{name}: KV {key} is {stored!r:.20}")
        for name, at in sorted(acked.alarms.items()):
            alarm = http.get(f"/__doemu/api/objects/COUNTER/{name}/alarm")
            pending = alarm.json().get("scheduled_time") if alarm.status_code == 200 else None
            if pending != at:
                missing.append(f"{name}: alarm {pending}, {at} acknowledged")
    return missing


def _run(
    level: str, shim: Path, tmp_path: Path, project: Path, start: Callable[..., DevServer]
) -> Outcome:
    """1. ``doemu dev --durability LEVEL`` with the shim, on an empty persist dir.
    2. The load (:func:`_load`), then SIGKILL mid-load.  3. The cut: the persist dir becomes
    what was synced.  4. A fresh server without the shim; every acknowledged write looked up."""
    cut = PowerCut(shim, tmp_path / "state", tmp_path / "shadow")
    server = start(project, "--durability", level, persist=cut.root, env=cut.env())
    names = [f"pc-{level}-{i}" for i in range(OBJECTS)]
    acked = Acked()
    asyncio.run(_load(server, names, acked))
    assert acked.total >= CUT_AFTER
    report = cut.cut()
    after = start(project, "--durability", level, persist=cut.root)
    return Outcome(acked, report, cut.syncs(), _missing(after, acked))


def test_at_power_every_acknowledged_write_survives_a_power_cut(
    shim: Path, tmp_path: Path, counter_project: Path, dev_server: Callable[..., DevServer]
) -> None:
    out = _run("power", shim, tmp_path, counter_project, dev_server)
    assert out.lost == [], out.lost
    # The shim saw doemu's and SQLite's syncs (through libc), and nothing it does not model.
    kinds = {what for what, _ in out.syncs}
    assert kinds <= {"fsync", "fdatasync"}, out.syncs
    synced = {Path(path).name for _, path in out.syncs}
    assert any(name.endswith(".sqlite-wal") for name in synced), sorted(synced)
    # And the cut was real: files the process had written but never synced are gone.
    assert out.report.lost, "the cut dropped nothing: it did not model a power loss"
    assert any("/.spare/" in path for path in out.report.lost), out.report.lost


def test_at_process_a_power_cut_loses_acknowledged_writes(
    shim: Path, tmp_path: Path, counter_project: Path, dev_server: Callable[..., DevServer]
) -> None:
    """The same run at ``process``: nothing waits for the disk, so acknowledged writes are
    lost. This is what the power test would see if ``power`` stopped syncing."""
    out = _run("process", shim, tmp_path, counter_project, dev_server)
    assert out.lost, "a power cut at process durability lost nothing: the test cannot fail"
