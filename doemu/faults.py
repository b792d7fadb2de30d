"""Crash points: where a test may have doemu killed, to prove what survives a crash there.

``DOEMU_CRASH_AT=<point>`` in a ``doemu dev`` process's environment makes it SIGKILL itself the
first time it reaches :func:`crash_point` with that name, as a power cut or an OOM kill would stop
it: no ``finally``, no flush, no commit. Only the end-to-end crash tests set it. The variable is
read once, at import, so a point costs one comparison when unset.

Points:

``alarm-committed``
    An object's commit that set an alarm has returned; the runtime has not yet acted on it.
``alarm-prepared``
    The namespace's alarm table holds a new alarm time; the object's commit has not run yet.
"""

from __future__ import annotations

import os
import signal

__all__ = ["crash_point"]

_POINT = os.environ.get("DOEMU_CRASH_AT") or None


def crash_point(name: str) -> None:
    """SIGKILL this process if ``DOEMU_CRASH_AT`` names ``name`` (else nothing)."""
    if _POINT is not None and _POINT == name:
        os.kill(os.getpid(), signal.SIGKILL)
