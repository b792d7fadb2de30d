"""Object files: the template, spares renamed into place, and closes deferred to a worker."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from doemu.errors import SqlError, StorageError
from doemu.storage import ObjectStorage
from doemu.storage import files as files_mod
from doemu.storage.files import SPARE_DIR, FileClosing, ObjectFiles, template, write_template

from .polling import eventually_sync

SCHEMA = ("CREATE TABLE IF NOT EXISTS _cf_KV (key TEXT PRIMARY KEY, value BLOB) WITHOUT ROWID",)


@pytest.fixture
def files() -> Iterator[ObjectFiles]:
    f = ObjectFiles(spares=3)
    yield f
    f.close()


def _spares(directory: Path) -> list[Path]:
    spare_dir = directory / SPARE_DIR
    return sorted(spare_dir.glob("*.sqlite")) if spare_dir.exists() else []


def test_the_template_holds_the_schema_in_its_wal(tmp_path: Path) -> None:
    path = tmp_path / "obj.sqlite"
    write_template(path, SCHEMA)
    assert path.read_bytes()[18:20] == b"\x02\x02"  # WAL mode in the header
    db = sqlite3.connect(path)
    assert db.execute("SELECT name FROM sqlite_master").fetchall() == [("_cf_KV",)]
    db.close()


def test_the_first_write_appends_to_the_template_wal_instead_of_restarting_it(
    tmp_path: Path,
) -> None:
    """A restarted WAL gets a new header (new salts) and an fsync; an appended one keeps it."""
    path = tmp_path / "obj.sqlite"
    write_template(path, SCHEMA)
    header = Path(f"{path}-wal").read_bytes()[:32]
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("INSERT INTO _cf_KV VALUES ('k', x'01')")
    assert Path(f"{path}-wal").read_bytes()[:32] == header
    assert len(Path(f"{path}-wal").read_bytes()) > len(template(SCHEMA)[1])
    db.close()


def test_write_template_refuses_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "obj.sqlite"
    path.write_bytes(b"")
    with pytest.raises(FileExistsError):
        write_template(path, SCHEMA)


def test_spares_are_made_in_the_background_and_renamed_into_place(
    files: ObjectFiles, tmp_path: Path
) -> None:
    first = tmp_path / "a.sqlite"
    files.create(first, SCHEMA)  # no spare yet: written in place, and the pool fills
    eventually_sync(lambda: len(_spares(tmp_path)) == 3, within=10, what="three spares")
    second = tmp_path / "b.sqlite"
    files.create(second, SCHEMA)
    for path in (first, second):
        db = sqlite3.connect(path)
        db.execute("INSERT INTO _cf_KV VALUES ('k', x'01')")
        db.commit()
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        db.close()
    eventually_sync(lambda: len(_spares(tmp_path)) == 3, within=10, what="the pool topped up")


def test_a_taken_spare_leaves_the_pool(tmp_path: Path) -> None:
    f = ObjectFiles(spares=1)
    try:
        f.create(tmp_path / "a.sqlite", SCHEMA)
        eventually_sync(lambda: len(_spares(tmp_path)) == 1, within=10, what="one spare")
        (spare,) = _spares(tmp_path)
        f.create(tmp_path / "b.sqlite", SCHEMA)
        assert not spare.exists()
        assert not Path(f"{spare}-wal").exists()
        assert Path(tmp_path / "b.sqlite-wal").exists()
    finally:
        f.close()


def test_close_removes_the_spares(tmp_path: Path) -> None:
    f = ObjectFiles(spares=2)
    f.create(tmp_path / "a.sqlite", SCHEMA)
    eventually_sync(lambda: len(_spares(tmp_path)) == 2, within=10, what="two spares")
    f.close()
    assert not (tmp_path / SPARE_DIR).exists()
    assert (tmp_path / "a.sqlite").exists()


def test_spares_left_by_a_killed_process_are_swept(files: ObjectFiles, tmp_path: Path) -> None:
    stale_dir = tmp_path / SPARE_DIR
    stale_dir.mkdir()
    stale = stale_dir / "999999-0.sqlite"
    stale.write_bytes(b"half-written")
    files.create(tmp_path / "a.sqlite", SCHEMA)
    eventually_sync(lambda: not stale.exists(), within=10, what="the stale spare to go")
    # A spare is complete once its -shm file exists: the worker touches it last.
    eventually_sync(
        lambda: sum(Path(f"{s}-shm").exists() for s in _spares(tmp_path)) == 3,
        within=10,
        what="three complete fresh spares",
    )
    spares = _spares(tmp_path)
    assert len(spares) == 3 and stale not in spares
    data, wal = template(SCHEMA)
    for spare in spares:
        assert spare.name.startswith(f"{os.getpid()}-")  # made by this process
        assert spare.read_bytes() == data
        assert Path(f"{spare}-wal").read_bytes() == wal


def test_a_deferred_close_lets_the_file_be_reopened_at_once(
    files: ObjectFiles, tmp_path: Path
) -> None:
    path = tmp_path / "a.sqlite"
    files.create(path, SCHEMA)
    old = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    old.execute("INSERT INTO _cf_KV VALUES ('one', x'01')")
    files.close_later(old)
    new = sqlite3.connect(path, isolation_level=None)  # possibly before the old one closed
    new.execute("INSERT INTO _cf_KV VALUES ('two', x'02')")
    files.close()  # every deferred close has run
    with pytest.raises(sqlite3.ProgrammingError):
        old.execute("SELECT 1")
    assert [r[0] for r in new.execute("SELECT key FROM _cf_KV ORDER BY key")] == ["one", "two"]
    new.close()
    check = sqlite3.connect(path)
    assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    check.close()


def test_too_many_pending_closes_close_inline(
    files: ObjectFiles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files_mod, "MAX_PENDING_CLOSES", 0)
    db = sqlite3.connect(tmp_path / "x.sqlite", check_same_thread=False)
    files.close_later(db)
    with pytest.raises(sqlite3.ProgrammingError):  # closed before close_later returned
        db.execute("SELECT 1")


def test_after_close_connections_close_inline(tmp_path: Path) -> None:
    f = ObjectFiles()
    f.close()
    db = sqlite3.connect(tmp_path / "x.sqlite", check_same_thread=False)
    f.close_later(db)
    with pytest.raises(sqlite3.ProgrammingError):
        db.execute("SELECT 1")


@pytest.fixture
def held(files: ObjectFiles) -> Iterator[threading.Event]:
    """Keeps the worker busy until set, so deferred closes wait in its queue."""
    release = threading.Event()
    files._submit(release.wait)
    yield release
    release.set()


def test_a_connection_waiting_for_its_close_can_be_taken_back(
    files: ObjectFiles, held: threading.Event, tmp_path: Path
) -> None:
    path = tmp_path / "a.sqlite"
    files.create(path, SCHEMA)
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    files.close_later(db, path)
    assert files.reclaim(tmp_path / "other.sqlite") is None
    assert files.reclaim(path) is db
    assert files.reclaim(path) is None  # taken once
    held.set()
    files.close()  # the queued close ran and left the reclaimed connection alone
    db.execute("INSERT INTO _cf_KV VALUES ('still', x'01')")
    db.close()


def test_a_connection_closed_by_the_worker_is_not_handed_back(
    files: ObjectFiles, tmp_path: Path
) -> None:
    path = tmp_path / "a.sqlite"
    files.create(path, SCHEMA)
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    files.close_later(db, path)
    eventually_sync(lambda: files._pending_closes == 0, within=10, what="the deferred close")
    assert files.reclaim(path) is None
    with pytest.raises(sqlite3.ProgrammingError):
        db.execute("SELECT 1")


async def test_an_object_activated_again_before_its_close_reuses_the_connection(
    files: ObjectFiles, held: threading.Event, open_storage: Callable[..., ObjectStorage]
) -> None:
    """1. Evicted (closed later) with its data committed.
    2. Opened again while the close still waits: same connection, same data, no close.
    3. The new storage's authorizer guards it: user SQL still cannot touch _cf_ tables."""
    first = open_storage("obj.sqlite", files=files)
    first.sql.exec("CREATE TABLE t (v INTEGER)")
    first.sql.exec("INSERT INTO t VALUES (1)")
    db = first._conn.db
    first.close()
    second = open_storage("obj.sqlite", files=files)
    assert second._conn.db is db
    assert [r["v"] for r in second.sql.exec("SELECT v FROM t")] == [1]
    with pytest.raises(SqlError):
        second.sql.exec("SELECT * FROM _cf_KV")
    with pytest.raises(StorageError):
        first.sql.exec("SELECT v FROM t")  # the old handle stays closed
    second.close()
    held.set()


async def test_a_connection_whose_pragmas_user_sql_changed_is_not_reused(
    files: ObjectFiles, held: threading.Event, open_storage: Callable[..., ObjectStorage]
) -> None:
    first = open_storage("obj.sqlite", files=files)
    first.sql.exec("PRAGMA foreign_keys = OFF")
    db = first._conn.db
    first.close()
    assert files.reclaim(first.database_path) is None
    second = open_storage("obj.sqlite", files=files)
    assert second._conn.db is not db
    assert second.sql.exec("PRAGMA foreign_keys").one()["foreign_keys"] == 1
    second.close()
    held.set()


@pytest.mark.parametrize("reusable", [True, False])
async def test_reclaiming_a_file_being_closed_waits_off_the_loop(
    files: ObjectFiles, tmp_path: Path, reusable: bool
) -> None:
    """A connection opened during the close's checkpoint would find the file locked and sleep
    in SQLite's busy handler on the loop thread; reclaim() raises FileClosing instead, and its
    wait() lets the loop run other work until the close is over, reusable or not."""
    started, release = threading.Event(), threading.Event()

    class SlowClose:
        closed = False

        def close(self) -> None:
            started.set()
            release.wait(10)
            self.closed = True

    slow = SlowClose()
    path = tmp_path / "a.sqlite"
    files.close_later(slow, path, reusable=reusable)  # type: ignore[arg-type]
    assert started.wait(10)
    with pytest.raises(FileClosing) as info:
        files.reclaim(path)  # being closed: not handed back, and no wait on the loop
    waiting = asyncio.ensure_future(info.value.wait())
    ticks = 0
    while ticks < 20:  # the loop keeps turning while the close is held
        await asyncio.sleep(0)
        ticks += 1
    assert not waiting.done() and not slow.closed
    release.set()
    await asyncio.wait_for(waiting, 10)
    assert slow.closed
    assert files.reclaim(path) is None  # closed: nothing to take back, nothing to wait for
