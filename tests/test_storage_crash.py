"""A turn's writes survive a real SIGKILL all together or not at all.

A child process opens an ObjectStorage, writes N keys plus a SQL row in one turn, and is killed
with SIGKILL; the test then reopens the file and checks what is there.
"""

from __future__ import annotations

import os
import pathlib
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable

import pytest

from doemu.clock import SystemClock
from doemu.storage import ObjectStorage

from .settled import settled

CHILD = pathlib.Path(__file__).parent / "storage_helpers" / "crash_child.py"
N = 200


LEVELS = pytest.mark.parametrize("level", ["process", "power"])


def _run_child(db: pathlib.Path, mode: str, level: str = "process") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(db), str(N), mode, level],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _counts(db: pathlib.Path) -> tuple[int, int]:
    """(KV keys, SQL rows) as seen by a fresh, independent connection."""
    conn = sqlite3.connect(db)
    try:
        keys = conn.execute("SELECT count(*) FROM _cf_KV").fetchone()[0]
        has_t = conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 't'").fetchone()[0]
        rows = conn.execute("SELECT count(*) FROM t").fetchone()[0] if has_t else 0
        return keys, rows
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("mid-turn", (0, 0)), ("after-commit", (N, 1))],
)
@LEVELS
def test_sigkill_leaves_a_turn_all_or_nothing(
    tmp_path: pathlib.Path, mode: str, expected: tuple[int, int], level: str
) -> None:
    """1. The child writes N keys and one row in one turn and SIGKILLs itself, either before the
    turn yields (nothing committed) or right after (the implicit transaction committed).
    2. A fresh connection sees none or all of the turn's writes."""
    db = tmp_path / "obj.sqlite"
    child = _run_child(db, mode, level)
    child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert _counts(db) == expected


@LEVELS
def test_sigkill_from_the_parent_mid_turn(
    tmp_path: pathlib.Path, open_storage: Callable[..., ObjectStorage], level: str
) -> None:
    """1. The child writes in one turn, says "ready" through a pipe and blocks mid-turn.
    2. The parent SIGKILLs it. 3. Reopened through ObjectStorage, no write of the turn exists,
    and the object is fully usable."""
    db = tmp_path / "obj.sqlite"
    child = _run_child(db, "wait", level)
    assert child.stdout is not None
    assert child.stdout.readline() == "ready\n"
    os.kill(child.pid, signal.SIGKILL)
    child.communicate(timeout=30)  # reaps the child and closes the pipes
    assert child.returncode == -signal.SIGKILL
    assert _counts(db) == (0, 0)

    storage = open_storage(db.name, clock=SystemClock())
    assert settled(storage.get("key-0000")) is None
    storage.put("after", 1)
    storage.commit()
    storage.close()
    assert _counts(db)[0] == 1


@LEVELS
def test_sigkill_after_the_first_commit_of_a_reopened_object(
    tmp_path: pathlib.Path, open_storage: Callable[..., ObjectStorage], level: str
) -> None:
    """An object woken from eviction starts a new WAL (its first commit runs unsynced, see
    StorageConnection): 1. a closed object file has no WAL; 2. the child reopens it, writes one
    turn, commits and is SIGKILLed; 3. every write of that turn is there, and the old data too."""
    db = tmp_path / "obj.sqlite"
    storage = open_storage(db.name, clock=SystemClock())
    storage.put("before", 1)
    storage.commit()
    storage.close()
    assert not pathlib.Path(f"{db}-wal").exists()
    child = _run_child(db, "after-commit", level)
    child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert _counts(db) == (N + 1, 1)


def test_a_reopened_object_is_back_to_normal_sync_after_its_first_write(
    open_storage: Callable[..., ObjectStorage],
) -> None:
    storage = open_storage("obj.sqlite", clock=SystemClock())
    storage.put("before", 1)
    storage.commit()
    storage.close()

    def pragma(s: ObjectStorage, name: str) -> int:
        value = s._conn.read(f"PRAGMA {name}").fetchone()[0]
        return int(value)

    reopened = open_storage("obj.sqlite", clock=SystemClock())
    assert (pragma(reopened, "synchronous"), pragma(reopened, "wal_autocheckpoint")) == (0, 0)
    assert settled(reopened.get("before")) == 1
    reopened.commit()  # a read-only transaction writes no WAL header: still the new-WAL mode
    assert pragma(reopened, "synchronous") == 0
    reopened.put("after", 2)
    reopened.commit()
    assert (pragma(reopened, "synchronous"), pragma(reopened, "wal_autocheckpoint")) == (1, 1000)
    fresh = open_storage("new.sqlite", clock=SystemClock())
    # A new object's WAL comes with the template and is never "new".
    assert pragma(fresh, "synchronous") == 1
