"""Tracebacks that show the user's code, not doemu's machinery.

An exception raised in a Durable Object travels through doemu's host, gates, alarm service or
stub before anyone sees it: a dozen frames of ``doemu/`` and ``asyncio`` around the one line that
matters. :func:`user_traceback` keeps the frames of every file that is neither doemu's own nor
the standard library's (the Worker's modules and the libraries it uses, ``agents`` included),
with the innermost frame always kept so the message still says where it happened.

:class:`RemoteTraceback` carries such a traceback across an RPC call: the caller gets a fresh
exception of the same type and message (errors cross by value), whose ``__cause__`` is a
``RemoteTraceback`` printing the object's own frames, as ``concurrent.futures`` does for an
exception raised in a worker process. Python, pytest and doemu's log all print the cause, so
the object's file and line appear above the caller's.
"""

from __future__ import annotations

import functools
import os
import traceback

__all__ = ["RemoteTraceback", "is_framework_file", "user_traceback"]

_DOEMU = os.path.dirname(os.path.abspath(__file__)) + os.sep
_INSTALLED = ("site-packages", "dist-packages")


@functools.cache
def _stdlib() -> tuple[str, ...]:
    """The standard library's folders, found when a traceback is first filtered: importing
    ``sysconfig`` is 1.5 ms of every start-up, and most servers never filter one."""
    import sysconfig

    paths = (sysconfig.get_path(name) for name in ("stdlib", "platstdlib"))
    return tuple({os.path.abspath(path) + os.sep for path in paths})


def is_framework_file(filename: str) -> bool:
    """Whether ``filename`` is doemu's or the standard library's (not the user's concern)."""
    if filename.startswith("<"):
        return True
    path = os.path.abspath(filename)
    if path.startswith(_DOEMU):
        return True
    return path.startswith(_stdlib()) and not any(part in path for part in _INSTALLED)


def user_traceback(exc: BaseException, *, headline: str | None = None) -> str:
    """``exc`` as Python prints it (its causes too), with doemu's and the standard library's
    frames left out; ``headline`` replaces ``Traceback (most recent call last):``."""
    summary = traceback.TracebackException.from_exception(exc)
    _keep_user_frames(summary)
    text = "".join(summary.format())
    if headline is not None:
        text = text.replace("Traceback (most recent call last):", headline, 1)
    return text.rstrip("\n")


def _keep_user_frames(summary: traceback.TracebackException) -> None:
    seen: set[int] = set()
    while summary is not None and id(summary) not in seen:
        seen.add(id(summary))
        frames = [f for f in summary.stack if not is_framework_file(f.filename)]
        if not frames and summary.stack:
            frames = [summary.stack[-1]]
        summary.stack = traceback.StackSummary.from_list(frames)
        summary = summary.__cause__ or summary.__context__  # type: ignore[assignment]


class RemoteTraceback(Exception):
    """The traceback of an exception raised inside another object (see the module docstring)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return "\n" + self.text
