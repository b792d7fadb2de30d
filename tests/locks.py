"""One process at a time, for work that two pytest-xdist workers could otherwise do at once on
the same files: an ``npm install`` into one of e2e/'s Node projects (a fresh clone has no
``node_modules``), or doemu's wheel, which ``pip wheel`` builds inside this tree.

:func:`exclusive` holds an ``flock`` on an existing file (a ``package.json``, a lock file in the
run's shared temporary directory): the second worker waits, then finds the work done. The lock
goes with the process, so a worker that dies releases it.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["exclusive"]


@contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing, never written) while inside."""
    with path.open("ab") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
