"""Shared by the storage tests (their fixtures are in tests/conftest.py).

``NOW`` is where the ``storage_clock`` fixture stands; ``crash_child.py`` is a script that
tests/test_storage_crash.py runs in a child process and SIGKILLs. ``committed_keys`` reads the
file from an independent connection, to see what a turn or transaction made durable.
"""

from __future__ import annotations

import pathlib
import sqlite3

__all__ = ["NOW", "Boom", "committed_keys"]

NOW = 1_700_000_000_000.0


class Boom(Exception):
    pass


def committed_keys(path: pathlib.Path) -> list[str]:
    """What an independent connection sees: only committed data."""
    conn = sqlite3.connect(path)
    try:
        return [row[0] for row in conn.execute("SELECT key FROM _cf_KV ORDER BY key")]
    finally:
        conn.close()
