"""``[[migrations]]`` and ``exports``: which Durable Object classes exist, and which have SQL.

Cloudflare fixes a class's storage backend when a migration creates it, not in the binding, so
the final set of classes comes from replaying the history in order, with wrangler's own rules
and error texts (``Cannot apply … migration``): only ``new_sqlite_classes`` get ``storage.sql``.
The declarative ``exports`` field, the alternative to that history, is read here too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .checker import Checker, show, unexpected
from .model import ClassInfo, DurableObjectBinding, MigrationError

__all__ = [
    "Migration",
    "check_exports",
    "check_migrations",
    "replay_migrations",
    "warn_unmigrated",
]


_MIGRATION_KEYS = (
    "tag", "new_classes", "new_sqlite_classes", "renamed_classes", "deleted_classes",
    "transferred_classes",
)  # fmt: skip
_EXPORT_LIVE_STATES = (None, "created", "expecting-transfer")
_EXPORT_STATES = (*_EXPORT_LIVE_STATES, "deleted", "renamed", "transferred")


@dataclass(frozen=True)
class Migration:
    """One well-formed ``[[migrations]]`` entry; ``index`` is its position in the array."""

    index: int
    tag: str
    new_classes: list[str]
    new_sqlite_classes: list[str]
    renamed_classes: list[tuple[str, str]]
    deleted_classes: list[str]
    transferred_classes: list[tuple[str, str, str]]


def check_migrations(check: Checker, value: Any) -> list[Migration]:
    """The well-formed ``[[migrations]]`` entries; problems (and duplicate tags) go to ``check``."""
    entries = check.array_of_tables(value, "migrations")
    result: list[Migration] = []
    seen_tags: dict[str, int] = {}
    for index, entry in enumerate(entries or []):
        key = f"migrations[{index}]"
        item = check.table(entry, key)
        if item is None:
            continue
        warning = unexpected(key, item, _MIGRATION_KEYS)
        if warning:
            check.warnings.append(warning)
        tag = check.string(item.get("tag"), f"{key}.tag", required=True)
        if tag is not None:
            if tag in seen_tags:
                check.errors.append(
                    f'{key}.tag "{tag}" is already used by migrations[{seen_tags[tag]}]: '
                    "migration tags are unique names"
                )
            seen_tags.setdefault(tag, index)
        new = check.strings(item.get("new_classes"), f"{key}.new_classes")
        new_sqlite = check.strings(item.get("new_sqlite_classes"), f"{key}.new_sqlite_classes")
        deleted = check.strings(item.get("deleted_classes"), f"{key}.deleted_classes")
        renamed = _pairs(
            check, item.get("renamed_classes"), f"{key}.renamed_classes", ("from", "to")
        )
        transferred = _pairs(
            check,
            item.get("transferred_classes"),
            f"{key}.transferred_classes",
            ("from", "from_script", "to"),
        )
        if None in (tag, new, new_sqlite, deleted, renamed, transferred):
            continue
        assert tag is not None and new is not None and new_sqlite is not None
        assert deleted is not None and renamed is not None and transferred is not None
        result.append(
            Migration(
                index,
                tag,
                new,
                new_sqlite,
                [(pair[0], pair[1]) for pair in renamed],
                deleted,
                [(triple[0], triple[1], triple[2]) for triple in transferred],
            )
        )
    return result


def _pairs(
    check: Checker, value: Any, key: str, fields: tuple[str, ...]
) -> list[tuple[str, ...]] | None:
    if value is None:
        return []
    shape = "{" + ", ".join(f"{name}: string" for name in fields) + "}"
    if not isinstance(value, list) or not all(
        isinstance(item, dict) and all(isinstance(item.get(name), str) for name in fields)
        for item in value
    ):
        # wrangler's text for renamed_classes (validateMigrations).
        check.errors.append(
            f'Expected "{key}" to be an array of "{shape}" objects but got {show(value)}.'
        )
        return None
    return [tuple(str(item[name]) for name in fields) for item in value]


def replay_migrations(
    where: str, check: Checker, migrations: Sequence[Migration]
) -> tuple[list[str], dict[str, ClassInfo]]:
    """Replay as wrangler does (deleted, renamed, new, new_sqlite per step), with its texts."""
    classes: dict[str, ClassInfo] = {}
    problems: list[str] = []
    for step in migrations:
        prefix = f"migrations[{step.index}] (tag {step.tag!r})"
        for name in step.deleted_classes:
            if classes.pop(name, None) is None:
                problems.append(
                    f"{prefix}: Cannot apply deleted_classes migration to non-existent class {name}"
                )
        for old, new in step.renamed_classes:
            info = classes.pop(old, None)
            if info is None:
                problems.append(
                    f"{prefix}: Cannot apply renamed_classes migration to non-existent class {old}"
                )
                continue
            classes[new] = ClassInfo(
                new, info.sql, info.tag, (*info.renamed_from, old), info.transferred
            )
        for kind, names, sql in (
            ("new_classes", step.new_classes, False),
            ("new_sqlite_classes", step.new_sqlite_classes, True),
        ):
            for name in names:
                if name in classes:
                    problems.append(
                        f"{prefix}: Cannot apply {kind} migration to existing class {name}"
                    )
                    continue
                classes[name] = ClassInfo(name, sql, step.tag)
        for old, script, new in step.transferred_classes:
            if new in classes:
                problems.append(
                    f"{prefix}: Cannot apply transferred_classes migration to existing class {new}"
                )
                continue
            check.warnings.append(
                f"{prefix}: transferred_classes ({script}:{old} -> {new}) cannot be replayed "
                f"locally: {new} starts empty and without storage.sql, as under wrangler dev"
            )
            classes[new] = ClassInfo(new, False, step.tag, transferred=True)
    if problems:
        raise MigrationError(where, problems)
    return [step.tag for step in migrations], classes


def check_exports(check: Checker, value: Any) -> dict[str, ClassInfo]:
    """The declarative ``exports`` field: live ``durable-object`` entries become classes."""
    table = check.table(value, "exports")
    classes: dict[str, ClassInfo] = {}
    for name, entry in (table or {}).items():
        item = check.table(entry, f"exports.{name}")
        if item is None or item.get("type") != "durable-object":
            continue
        state = item.get("state")
        if state not in _EXPORT_STATES:
            check.errors.append(
                f"exports.{name}.state must be one of created, expecting-transfer, deleted, "
                f"renamed or transferred, got {show(state)}"
            )
            continue
        if state in _EXPORT_LIVE_STATES:
            classes[name] = ClassInfo(name, item.get("storage") == "sqlite")
    return classes


def _migration_snippet(tag: str, classes: Sequence[str], file_label: str) -> str:
    """A ``[[migrations]]`` entry to paste into ``file_label``, indented, in its format."""
    names = ", ".join(json.dumps(n) for n in classes)
    if file_label.endswith((".json", ".jsonc")):
        lines = ['"migrations": [', f'  {{ "tag": "{tag}", "new_sqlite_classes": [{names}] }}', "]"]
    else:
        lines = ["[[migrations]]", f'tag = "{tag}"', f"new_sqlite_classes = [{names}]"]
    return "\n".join("    " + line for line in lines)


def warn_unmigrated(
    check: Checker,
    bindings: Sequence[DurableObjectBinding],
    classes: Mapping[str, ClassInfo],
    *,
    has_history: bool,
    file_label: str,
) -> None:
    """Warn about bindings whose class no migration (or export) declares, as wrangler does."""
    missing = [b for b in bindings if b.class_name not in classes]
    if not missing:
        return
    names = list(dict.fromkeys(b.class_name for b in missing))
    if not has_history:
        # wrangler's warning (warnIfDurableObjectsHaveNoMigrations), naming the real file, with
        # the configuration to paste on lines of its own (in the file's own format).
        check.warnings.append(
            f"In {file_label}, you have configured [durable_objects] exported by this Worker "
            f"({', '.join(names)}), but no [migrations] for them. This may not work as expected "
            f"until you add a [migrations] section to your {file_label}. Add this configuration "
            f"to your {file_label}:\n\n{_migration_snippet('v1', names, file_label)}\n\n"
            "doemu runs them without storage.sql until then."
        )
        return
    tag = "add-" + "-".join(names).lower()
    for binding in missing:
        check.warnings.append(
            f'{binding.key} class_name "{binding.class_name}" has no migration: add it to '
            "new_sqlite_classes in a new [[migrations]] entry; until then doemu runs it "
            "without storage.sql (key-value storage only), as wrangler dev does. For example, "
            f"at the end of {file_label}:\n\n{_migration_snippet(tag, names, file_label)}\n"
        )
