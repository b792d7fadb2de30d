"""tests/locks.py: what keeps two pytest-xdist workers from installing one Node project, or
building doemu's wheel in this tree, at the same time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .locks import exclusive

#: Another process tries the lock without waiting: prints "free" or "held".
TRY = """
import fcntl, sys
with open(sys.argv[1], "ab") as handle:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("held")
    else:
        print("free")
"""


def other_process(path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", TRY, str(path)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_another_process_waits_while_the_lock_is_held(tmp_path: Path) -> None:
    """Held here, the lock is refused to another process; released, that process gets it. The
    file is created when missing and never written (a package.json is locked as it is)."""
    path = tmp_path / "package.json"
    path.write_text("{}")
    with exclusive(path):
        assert other_process(path) == "held"
    assert other_process(path) == "free"
    assert path.read_text() == "{}"
    with exclusive(tmp_path / "new.lock"):
        assert other_process(tmp_path / "new.lock") == "held"
