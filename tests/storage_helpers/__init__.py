"""Shared by the storage tests (their fixtures are in tests/conftest.py).

``NOW`` is where the ``storage_clock`` fixture stands; ``crash_child.py`` is a script that
tests/test_storage_crash.py runs in a child process and SIGKILLs.
"""

from __future__ import annotations

__all__ = ["NOW"]

NOW = 1_700_000_000_000.0
