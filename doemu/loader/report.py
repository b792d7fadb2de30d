"""How a Worker that fails to import is shown: the user's file, line and message, and only the
user's own frames.

An exception raised while importing ``main`` (a ``SyntaxError``, an ``ImportError``, anything the
module runs at import time) travels through importlib, the loader, the dev server and click
before it reaches the terminal: some forty lines in which the user's one line is hard to find.
:func:`user_traceback` keeps the frames whose file lies in the project (not in a virtualenv or
``site-packages`` inside it) and the exception's own text, which for a ``SyntaxError`` is the
file, the line, the offending source and a caret. When no frame is the user's (the error is in
an installed package the Worker imports) the innermost frame is kept, so the message still says
where it happened; a ``SyntaxError`` names its place itself.
"""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from pathlib import Path

from ..config import display_path

__all__ = ["is_user_file", "user_traceback"]

_NOT_USER_PARTS = frozenset({"site-packages", "dist-packages", ".venv", "venv", "__pypackages__"})


def is_user_file(filename: str, roots: Sequence[Path]) -> bool:
    """Whether ``filename`` is the user's source: under a root, not in an installed package."""
    if filename.startswith("<"):
        return False
    path = Path(filename).absolute()
    for root in roots:
        try:
            relative = path.relative_to(root.absolute())
        except ValueError:
            continue
        return not (_NOT_USER_PARTS & set(relative.parts))
    return False


def user_traceback(exc: BaseException, roots: Sequence[Path]) -> str:
    """``exc`` as Python would print it, with only the frames of files under ``roots``."""
    summary = traceback.TracebackException.from_exception(exc)
    frames = [frame for frame in summary.stack if is_user_file(frame.filename, roots)]
    if not frames and summary.stack and not isinstance(exc, SyntaxError):
        frames = [summary.stack[-1]]
    shown = [
        traceback.FrameSummary(
            display_path(Path(f.filename)), f.lineno, f.name, line=f.line, lookup_line=False
        )
        for f in frames
    ]
    if isinstance(exc, SyntaxError) and summary.filename:
        summary.filename = display_path(Path(summary.filename))
    lines: list[str] = []
    if shown:
        lines.append("Traceback (your code only, most recent call last):\n")
        lines.extend(traceback.StackSummary.from_list(shown).format())
    lines.extend(summary.format_exception_only())
    return "".join(lines).rstrip("\n")
