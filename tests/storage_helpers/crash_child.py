"""Child process for tests/test_storage_crash.py: write N keys in one turn, then die by SIGKILL.

Usage: crash_child.py DB_PATH N MODE [LEVEL], where LEVEL is the durability (process, the
default, or power: commits fsynced off the loop, "acknowledged" once the output gate opens) and
MODE is
  mid-turn      kill itself after the writes, before the turn yields (nothing committed);
  after-commit  yield once (the implicit transaction commits), then kill itself;
  wait          report "ready" on stdout after the writes, then block (mid-turn) until the
                parent kills it.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal
import sys

from doemu.clock import SystemClock
from doemu.storage import ObjectStorage
from doemu.storage.durability import SyncPool


async def main(path: pathlib.Path, count: int, mode: str, level: str) -> None:
    pool = SyncPool() if level == "power" else None
    storage = ObjectStorage(path, clock=SystemClock(), sync_pool=pool)
    # Commit the empty schema first so the file exists in a known state.
    storage.commit()
    for i in range(count):
        storage.put(f"key-{i:04d}", {"i": i, "payload": "x" * 100})
    storage.sql.exec("CREATE TABLE IF NOT EXISTS t (n INTEGER)")
    storage.sql.exec("INSERT INTO t VALUES (?)", count)
    if mode == "after-commit":
        await asyncio.sleep(0)  # the turn yields: its implicit transaction commits
        barrier = storage.barrier()
        if barrier is not None:
            await barrier  # what a response would wait for at the power level
    if mode == "wait":
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        sys.stdin.read()  # blocks without yielding to the event loop, until the parent kills us
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    level = sys.argv[4] if len(sys.argv) > 4 else "process"
    asyncio.run(main(pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], level))
