"""The start-up scan of ``_cf_ALARM``: on the loop, with the table's own connection, in chunks.

A restart's table usually holds a handful of rows, so the scan reads them where it is, without
a worker thread or a second connection; a table of thousands still gives the loop a turn
between chunks, and a write that lands between two chunks does not disturb the scan.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from doemu.alarms import load_alarms
from doemu.alarms.table import SCAN_CHUNK, AlarmTable
from doemu.storage.durability import SyncPool


def _id(i: int) -> str:
    return f"{i:064x}"


async def test_a_large_table_is_read_whole_and_the_loop_runs_between_chunks(
    tmp_path: Path,
) -> None:
    """A table of two chunks and a bit is read whole, with the loop running between chunks; a
    power-durable write made on the same connection mid-scan is committed (another connection
    sees it) before the scan ends."""
    pool = SyncPool()
    table = AlarmTable(tmp_path / "metadata.sqlite", sync_pool=pool)
    try:
        count = 2 * SCAN_CHUNK + 7
        for i in range(count):
            table.set(_id(i), 1_000.0 + i, f"name-{i}" if i % 2 else None)
        turns = 0
        scanning = True
        seen_mid_scan: list[tuple[int]] = []

        async def other_work() -> None:
            nonlocal turns
            while scanning:
                turns += 1
                if turns == 2:  # the first chunk has been read: between two chunks
                    table.set(_id(count), 5.0, "written meanwhile")
                    reader = sqlite3.connect(table.path)
                    try:
                        seen_mid_scan.extend(
                            reader.execute(
                                "SELECT count(*) FROM _cf_ALARM WHERE actor_id = ?", (_id(count),)
                            ).fetchall()
                        )
                    finally:
                        reader.close()
                await asyncio.sleep(0)

        other = asyncio.ensure_future(other_work())
        await asyncio.sleep(0)  # the other task's first turn
        try:
            loaded = await table.load_all()
        finally:
            scanning = False
            await other
        assert turns >= 3  # the first, then one per chunk boundary (two of them)
        assert seen_mid_scan == [(1,)]
        by_id = {actor: (when, name) for actor, when, name in loaded}
        assert len(by_id) in (count, count + 1)  # the row written meanwhile may or may not show
        assert all(by_id[_id(i)][0] == 1_000.0 + i for i in range(count))
        assert by_id[_id(3)] == (1_003.0, "name-3") and by_id[_id(4)] == (1_004.0, None)
        # The runtime's scan and a persist-dir reader see the same table.
        assert sorted(await load_alarms(table.path, read_only=True)) == sorted(
            await table.load_all()
        )
    finally:
        table.close()
        pool.close()


async def test_an_empty_table_and_a_missing_file(tmp_path: Path) -> None:
    table = AlarmTable(tmp_path / "metadata.sqlite")
    try:
        assert await table.load_all() == []
    finally:
        table.close()
    assert await load_alarms(tmp_path / "nothing-here.sqlite", read_only=True) == []
    assert not (tmp_path / "nothing-here.sqlite").exists()
