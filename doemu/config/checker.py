"""How validation collects problems and spells values, shared by every checking module.

wrangler reports all the problems of a file at once, each with the offending value spelled as in
the file. :class:`Checker` gathers errors and warnings, :func:`show` renders values and
:func:`unexpected` words wrangler's unknown-key warning, so that :mod:`doemu.config.validate`,
:mod:`doemu.config.migrations` and :mod:`doemu.config.settings` word their messages alike.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from typing import Any

__all__ = ["Checker", "show", "unexpected"]


def show(value: Any) -> str:
    """A short rendering of a config value for messages, spelled as in the file."""
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return f"{value.isoformat()} (a TOML date/time)"
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def unexpected(
    where: str, keys: Iterable[str], known: Iterable[str], candidates: Iterable[str] = ()
) -> str | None:
    """wrangler's ``validateAdditionalProperties`` warning, or ``None`` when all keys are known,
    followed by ``(did you mean "main"?)`` for a key close to a known one (or to one of
    ``candidates``): a typo is otherwise ignored with a warning that is easy to read past."""
    known = set(known)
    extra = [key for key in keys if key not in known]
    if not extra:
        return None
    import difflib  # only for a file with an unknown key (2 ms of every start-up otherwise)

    pool = sorted(known | set(candidates))
    guesses = {
        key: match[0]
        for key in extra
        if (match := difflib.get_close_matches(key, pool, n=1, cutoff=0.75))
    }
    if len(extra) == 1 and guesses:
        hint = f' (did you mean "{guesses[extra[0]]}"?)'
    elif guesses:
        hint = " (did you mean " + ", ".join(f'"{g}" for "{k}"' for k, g in guesses.items()) + "?)"
    else:
        hint = ""
    listed = ",".join(f'"{key}"' for key in extra)
    return f"Unexpected fields found in {where} field: {listed}{hint}"


class Checker:
    """Collects every problem of one file so the user can fix them in one go."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.warnings: list[str] = []

    def string(self, value: Any, key: str, *, required: bool = False) -> str | None:
        if value is None:
            if required:
                self.errors.append(f"{key} is required")
            return None
        if not isinstance(value, str):
            self.errors.append(f"{key} must be a string, got {show(value)}")
            return None
        return value

    def strings(self, value: Any, key: str) -> list[str] | None:
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            self.errors.append(f"{key} must be an array of strings, got {show(value)}")
            return None
        return list(value)

    def table(self, value: Any, key: str) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.errors.append(f"{key} must be a table (an object), got {show(value)}")
            return None
        return value

    def array_of_tables(self, value: Any, key: str) -> list[Any] | None:
        if value is None:
            return []
        if not isinstance(value, list):
            self.errors.append(f"{key} must be an array of tables, got {show(value)}")
            return None
        return value
