"""``doemu init --force`` into an existing project: add doemu's parts to files that hold the
user's own, never replace them.

``pyproject.toml`` holds the user's name, dependencies and tool settings, and ``.gitignore``
their own patterns: replacing either loses work. So these two are merged:

* ``pyproject.toml``: each table of the template (``[dependency-groups]``,
  ``[tool.pytest.ini_options]`` …) that the file does not have is appended, as the template
  writes it; a table the file already has is kept exactly as it is, and the result says which
  line of the template it lacks (the user decides). A file that is not valid TOML is left alone.
* ``.gitignore``: the template's patterns it lacks are appended.

Appending whole tables (rather than editing inside one) keeps every byte the user wrote, and
needs no TOML writer: the text appended is the template's own.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from typing import Any

__all__ = ["Merged", "merge_gitignore", "merge_pyproject"]

_HEADER = re.compile(r"^\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


@dataclass(frozen=True)
class Merged:
    """A merge's new text (``None``: leave the file as it is) and what to tell the user."""

    text: str | None
    notes: tuple[str, ...]


def _tables(template: str) -> list[tuple[str, str]]:
    """The template's top-level tables as ``(dotted name, text)``, in order; text before the
    first header belongs to no table and is dropped."""
    tables: list[tuple[str, str]] = []
    name: str | None = None
    lines: list[str] = []
    for line in template.splitlines(keepends=True):
        match = _HEADER.match(line.strip())
        if match is not None:
            if name is not None:
                tables.append((name, "".join(lines)))
            name, lines = match.group(1).replace('"', ""), [line]
        elif name is not None:
            lines.append(line)
    if name is not None:
        tables.append((name, "".join(lines)))
    return tables


def _lookup(document: dict[str, Any], dotted: str) -> Any:
    value: Any = document
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _lacks(existing: Any, table: str) -> list[str]:
    """The template table's ``key = value`` lines whose key ``existing`` (the user's table)
    does not have."""
    lacking = []
    for line in table.splitlines()[1:]:
        key = line.partition("=")[0].strip()
        if "=" in line and not line.lstrip().startswith("#") and key not in existing:
            lacking.append(line.strip())
    return lacking


def merge_pyproject(existing: str, template: str) -> Merged:
    """``existing`` with the template's missing tables appended (see the module docstring)."""
    try:
        document = tomllib.loads(existing)
    except tomllib.TOMLDecodeError as exc:
        return Merged(None, (f"it is not valid TOML ({exc})",))
    added: list[str] = []
    notes: list[str] = []
    text = existing
    for name, table in _tables(template):
        found = _lookup(document, name)
        if found is None:
            text = text.rstrip("\n") + "\n\n" + table.rstrip("\n") + "\n"
            added.append(f"[{name}]")
        elif isinstance(found, dict) and name != "project":  # the project's own: not doemu's
            notes.extend(
                f"kept your [{name}]; doemu's has `{line}`" for line in _lacks(found, table)
            )
    if added:
        notes.insert(0, "added " + ", ".join(added))
    return Merged(text if added else None, tuple(notes))


def merge_gitignore(existing: str, template: str) -> Merged:
    """``existing`` with the template's patterns it lacks appended (comments included)."""
    have = {line.strip() for line in existing.splitlines()}
    missing = [
        line
        for line in template.splitlines()
        if line.strip() and not line.startswith("#") and line.strip() not in have
    ]
    if not missing:
        return Merged(None, ())
    text = existing.rstrip("\n") + ("\n" if existing.strip() else "")
    text += "# added by doemu init\n" + "\n".join(missing) + "\n"
    return Merged(text, ("added " + " ".join(missing),))
