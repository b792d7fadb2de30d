"""Child process for tests/test_storage_crash.py: write N keys in one turn, then die by SIGKILL.

Usage: crash_child.py DB_PATH N MODE, where MODE is
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


async def main(path: pathlib.Path, count: int, mode: str) -> None:
    storage = ObjectStorage(path, clock=SystemClock())
    # Commit the empty schema first so the file exists in a known state.
    storage.commit()
    for i in range(count):
        storage.put(f"key-{i:04d}", {"i": i, "payload": "x" * 100})
    storage.sql.exec("CREATE TABLE IF NOT EXISTS t (n INTEGER)")
    storage.sql.exec("INSERT INTO t VALUES (?)", count)
    if mode == "after-commit":
        await asyncio.sleep(0)  # the turn yields: its implicit transaction commits
    if mode == "wait":
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        sys.stdin.read()  # blocks without yielding to the event loop, until the parent kills us
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    asyncio.run(main(pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]))
