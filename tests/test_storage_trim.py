"""Memory that evicted objects freed goes back to the OS once a burst of closes is over.

:class:`~doemu.storage.files.ObjectFiles` counts the connections it closes; after
``TRIM_MIN_CLOSES`` of them and ``TRIM_AFTER_IDLE_S`` without file jobs it collects garbage on
the loop and calls ``malloc_trim`` (glibc) on its worker thread, once per burst.
"""

from __future__ import annotations

import ctypes.util
import sqlite3
from pathlib import Path

from doemu.storage import files as files_module
from doemu.storage.files import ObjectFiles
from doemu.storage.trim import trim_freed_memory

from .polling import eventually


def _open(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("CREATE TABLE IF NOT EXISTS t (x)")
    return db


async def test_a_burst_of_closes_is_followed_by_one_trim(tmp_path: Path) -> None:
    files = ObjectFiles()
    try:
        few = files_module.TRIM_MIN_CLOSES - 1
        for i in range(few):  # not enough closes to be worth a collection and a trim
            files.close_later(_open(tmp_path / f"a{i}.sqlite"), tmp_path / f"a{i}.sqlite")
        await eventually(lambda: files._pending_closes == 0, what="the closes")
        assert files.trims == 0
        for i in range(files_module.TRIM_MIN_CLOSES + 10):  # a burst, inline closes included
            path = tmp_path / f"b{i}.sqlite"
            files.close_later(_open(path), path)
        await eventually(lambda: files.trims == 1, within=10, what="the trim after the burst")
    finally:
        files.close()
    assert files.trims == 1  # once per burst, not per close


def test_trimming_works_where_glibc_is_the_c_library() -> None:
    glibc = ctypes.util.find_library("c") is not None and hasattr(ctypes.CDLL(None), "malloc_trim")
    assert trim_freed_memory() is glibc
