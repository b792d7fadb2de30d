"""Giving memory that evicted objects freed back to the operating system (glibc's ``malloc_trim``).

A live object's SQLite connection holds a few hundred KB of native memory (its page cache,
lookaside, schema and prepared statements). Closing it frees that memory to the C allocator,
which keeps it for later allocations: after a burst of evictions the process's RSS stays where
the burst left it. ``malloc_trim(0)`` returns the free pages of every arena to the kernel. It
walks the free lists, so it is called after a burst, not per close (see
:class:`~doemu.storage.files.ObjectFiles`), and off the event loop; ``ctypes`` releases the GIL
for the call.

Only glibc has ``malloc_trim``; elsewhere (musl, macOS) :func:`trim_freed_memory` does nothing.
``ctypes`` is imported on first use, never at start-up.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

__all__ = ["trim_freed_memory"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        import ctypes

        fn = ctypes.CDLL(None).malloc_trim  # the C library this process already uses
    except (OSError, AttributeError, ImportError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    trim: Callable[[int], int] = fn
    return trim


def trim_freed_memory() -> bool:
    """Return the C allocator's free memory to the OS; False where that is not possible."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
