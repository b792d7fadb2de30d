"""Cheap line numbers of ``main`` and of each ``class_name``, so messages can point into the file.

``tomllib`` and ``json`` return values without positions. Rather than keep a position-tracking
parser, these scans look for the few keys messages point at;
:func:`~doemu.config.validate.parse_config` uses their result only when it matches the parsed
bindings one to one, so a layout the scans do not understand leaves ``line`` as ``None`` instead
of pointing at the wrong line.
"""

from __future__ import annotations

import json
import re

from .jsonc import string_end, strip_jsonc

__all__ = ["json_positions", "toml_positions"]


def _json_top_level_spans(stripped: str) -> dict[str, tuple[int, int, int]]:
    """``key -> (key offset, value start, value end)`` for the top-level object of valid JSON."""
    spans: dict[str, tuple[int, int, int]] = {}
    depth = 0
    last_key: tuple[str, int] | None = None
    current: tuple[str, int, int] | None = None
    i = 0
    length = len(stripped)
    while i < length:
        char = stripped[i]
        if char == '"':
            end = string_end(stripped, i)
            if depth == 1 and current is None:
                try:
                    last_key = (str(json.loads(stripped[i:end])), i)
                except json.JSONDecodeError:
                    last_key = None
            i = end
            continue
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0 and current is not None:
                spans[current[0]] = (current[1], current[2], i)
                current = None
        elif char == ":" and depth == 1 and current is None and last_key is not None:
            current = (last_key[0], last_key[1], i + 1)
            last_key = None
        elif char == "," and depth == 1 and current is not None:
            spans[current[0]] = (current[1], current[2], i)
            current = None
        i += 1
    return spans


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


_TOML_HEADER = re.compile(r"""\s*\[\[?\s*([\w.\-"' ]+?)\s*\]\]?\s*(?:#.*)?""")
_TOML_CLASS_NAME = re.compile(r"""(?<![\w"'])["']?class_name["']?\s*=\s*(["'])(.*?)\1""")
_TOML_MAIN = re.compile(r"""\s*["']?main["']?\s*=""")
_JSON_CLASS_NAME = re.compile(r'"class_name"\s*:\s*"((?:[^"\\\n]|\\.)*)"')


def toml_positions(text: str) -> tuple[list[tuple[int, str]], int | None]:
    """(line, value) of each top-level durable-object ``class_name``, and the ``main`` line."""
    class_lines: list[tuple[int, str]] = []
    main_line: int | None = None
    header: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _TOML_HEADER.fullmatch(line)
        if match is not None:
            header = re.sub(r"""\s|["']""", "", match.group(1))
            continue
        if header is None and main_line is None and _TOML_MAIN.match(line):
            main_line = number
        if header in (None, "durable_objects", "durable_objects.bindings"):
            for found in _TOML_CLASS_NAME.finditer(line):
                class_lines.append((number, found.group(2)))
    return class_lines, main_line


def json_positions(text: str) -> tuple[list[tuple[int, str]], int | None]:
    """:func:`toml_positions` for ``wrangler.json`` / ``wrangler.jsonc`` text."""
    stripped = strip_jsonc(text)
    spans = _json_top_level_spans(stripped)
    class_lines: list[tuple[int, str]] = []
    if "durable_objects" in spans:
        _, start, end = spans["durable_objects"]
        for found in _JSON_CLASS_NAME.finditer(stripped, start, end):
            try:
                value = str(json.loads(f'"{found.group(1)}"'))
            except json.JSONDecodeError:
                value = found.group(1)
            class_lines.append((_line_of(stripped, found.start()), value))
    main_line = _line_of(stripped, spans["main"][0]) if "main" in spans else None
    return class_lines, main_line
