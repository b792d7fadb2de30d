"""JSON with comments and trailing commas, as wrangler reads ``wrangler.json`` / ``.jsonc``.

The standard library has no JSONC parser, and the stripping must keep every offset so that JSON
errors and the line scans of :mod:`doemu.config.positions` point into the user's file; hence a
small string-aware scanner of its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .model import ConfigSyntaxError, display_path

__all__ = ["parse_jsonc", "string_end", "strip_jsonc"]


def strip_jsonc(text: str) -> str:
    """Blank out ``//`` and ``/* */`` comments and trailing commas, respecting strings.

    Every removed character becomes a space (newlines are kept), so offsets, line and column
    numbers in the result are those of ``text``: JSON errors point at the right place.
    An unterminated block comment is left alone for the JSON parser to report.
    """
    out = list(text)
    length = len(text)
    pending_comma: int | None = None
    i = 0
    while i < length:
        char = text[i]
        if char == '"':
            i = string_end(text, i)
            pending_comma = None
            continue
        if char == "/" and i + 1 < length and text[i + 1] in "/*":
            if text[i + 1] == "/":
                end = text.find("\n", i)
                end = length if end == -1 else end
            else:
                close = text.find("*/", i + 2)
                if close == -1:
                    i += 1
                    pending_comma = None
                    continue
                end = close + 2
            for j in range(i, end):
                if out[j] not in "\r\n":
                    out[j] = " "
            i = end
            continue
        if char == ",":
            pending_comma = i
        elif char in "]}":
            if pending_comma is not None:
                out[pending_comma] = " "
            pending_comma = None
        elif not char.isspace():
            pending_comma = None
        i += 1
    return "".join(out)


def string_end(text: str, start: int) -> int:
    """Index just past the JSON string opening at ``start`` (``len(text)`` if unterminated)."""
    i = start + 1
    length = len(text)
    while i < length:
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == '"' or char == "\n":
            return i + 1
        i += 1
    return length


def parse_jsonc(text: str, *, source: Path | None = None) -> Any:
    """Parse JSON with comments and trailing commas (wrangler.jsonc). Errors name line:column."""
    try:
        return json.loads(strip_jsonc(text.removeprefix("\ufeff")))
    except json.JSONDecodeError as exc:
        where = display_path(source) if source is not None else "<json>"
        raise ConfigSyntaxError(
            f"{where}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}",
            path=source if source is not None else Path("<json>"),
            line=exc.lineno,
            column=exc.colno,
        ) from None
