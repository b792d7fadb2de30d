"""[[migrations]] replayed as wrangler replays them: which classes have SQL, renames, deletes."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from doemu.config import MigrationError

from .config_helpers import BASE_TOML, load, problems_of

BINDINGS = """
[[durable_objects.bindings]]
name = "CHAT"
class_name = "Chat"
"""


def test_migrations_replay_new_sqlite_rename_delete(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        BASE_TOML
        + BINDINGS
        + """
[[migrations]]
tag = "v1"
new_classes = ["Room", "Legacy"]
new_sqlite_classes = ["ChatRoom"]

[[migrations]]
tag = "v2"
renamed_classes = [{ from = "ChatRoom", to = "Chat" }]
deleted_classes = ["Legacy"]

[[migrations]]
tag = "v3"
new_sqlite_classes = ["Legacy"]
""",
    )
    assert config.migration_tags == ("v1", "v2", "v3")
    assert {name: info.sql for name, info in config.classes.items()} == {
        "Room": False,
        "Chat": True,
        "Legacy": True,
    }
    assert config.classes["Chat"].renamed_from == ("ChatRoom",)
    assert config.classes["Chat"].tag == "v1"
    assert config.classes["Legacy"].tag == "v3"
    assert config.sql_enabled("Chat") and not config.sql_enabled("Room")
    assert not config.sql_enabled("Unknown")
    assert config.warnings == ()


@pytest.mark.parametrize(
    ("migrations", "problem"),
    [
        ('[[migrations]]\ntag = "v1"\ndeleted_classes = ["Ghost"]',
         "migrations[0] (tag 'v1'): Cannot apply deleted_classes migration to non-existent "
         "class Ghost"),
        ('[[migrations]]\ntag = "v1"\nrenamed_classes = [{from = "Ghost", to = "Chat"}]',
         "migrations[0] (tag 'v1'): Cannot apply renamed_classes migration to non-existent "
         "class Ghost"),
        ('[[migrations]]\ntag = "v1"\nnew_classes = ["Chat"]\n'
         '[[migrations]]\ntag = "v2"\nnew_classes = ["Chat"]',
         "migrations[1] (tag 'v2'): Cannot apply new_classes migration to existing class Chat"),
        ('[[migrations]]\ntag = "v1"\nnew_classes = ["Chat"]\nnew_sqlite_classes = ["Chat"]',
         "migrations[0] (tag 'v1'): Cannot apply new_sqlite_classes migration to existing "
         "class Chat"),
    ],
)  # fmt: skip
def test_migration_replay_errors_use_wranglers_texts(
    tmp_path: Path, migrations: str, problem: str
) -> None:
    with pytest.raises(MigrationError) as info:
        load(tmp_path, BASE_TOML + migrations + "\n")
    assert info.value.problems == (problem,)


def test_duplicate_migration_tags_fail(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        BASE_TOML
        + '[[migrations]]\ntag = "v1"\nnew_classes = ["A"]\n'
        + '[[migrations]]\ntag = "v1"\nnew_classes = ["B"]\n',
    )
    assert problems == (
        'migrations[1].tag "v1" is already used by migrations[0]: migration tags are unique names',
    )


def test_deleting_then_recreating_in_one_step_follows_wranglers_order(tmp_path: Path) -> None:
    # wrangler applies deleted, renamed, new, new_sqlite in that order within one migration.
    config = load(
        tmp_path,
        BASE_TOML
        + '[[migrations]]\ntag = "v1"\nnew_classes = ["A"]\n'
        + '[[migrations]]\ntag = "v2"\ndeleted_classes = ["A"]\nnew_sqlite_classes = ["A"]\n',
    )
    assert config.classes["A"].sql is True


def test_transferred_classes_warn_and_start_without_sql(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        BASE_TOML
        + '[[migrations]]\ntag = "v1"\n'
        + 'transferred_classes = [{from = "Old", from_script = "legacy", to = "Chat"}]\n',
    )
    assert config.classes["Chat"].sql is False and config.classes["Chat"].transferred
    assert config.warnings == (
        "migrations[0] (tag 'v1'): transferred_classes (legacy:Old -> Chat) cannot be replayed "
        "locally: Chat starts empty and without storage.sql, as under wrangler dev",
    )


def test_binding_without_any_migrations_gets_wranglers_warning(tmp_path: Path) -> None:
    config = load(tmp_path, BASE_TOML + BINDINGS)
    assert config.warnings[0].startswith(
        "In wrangler.toml, you have configured [durable_objects] exported by this Worker (Chat), "
        "but no [migrations] for them. This may not work as expected until you add a "
        "[migrations] section to your wrangler.toml."
    )
    assert not config.sql_enabled("Chat")


def test_binding_whose_class_has_no_migration_warns(tmp_path: Path) -> None:
    config = load(
        tmp_path, BASE_TOML + BINDINGS + '[[migrations]]\ntag = "v1"\nnew_classes = ["Other"]\n'
    )
    (warning,) = config.warnings
    assert warning.startswith(
        'durable_objects.bindings[0] class_name "Chat" has no migration: add it to '
        "new_sqlite_classes in a new [[migrations]] entry; until then doemu runs it without "
        "storage.sql (key-value storage only), as wrangler dev does."
    )
    fixed = load(tmp_path, (tmp_path / "wrangler.toml").read_text() + "\n" + _pasted(warning))
    assert fixed.warnings == () and fixed.sql_enabled("Chat")


def _pasted(warning: str) -> str:
    """The configuration a warning offers to paste: its indented lines, dedented."""
    return textwrap.dedent("\n".join(line for line in warning.splitlines() if line[:4] == "    "))


@pytest.mark.parametrize("name", ["wrangler.toml", "wrangler.jsonc"])
def test_the_missing_migration_hint_is_configuration_to_paste(tmp_path: Path, name: str) -> None:
    """Pasted as offered (on lines of its own, in the file's format), the hint's configuration
    makes the warning go away and the class SQLite-backed."""
    if name == "wrangler.toml":
        text = BASE_TOML + BINDINGS
    else:
        text = (
            '{"name": "w", "main": "entry.py", "compatibility_date": "2026-01-01",\n'
            '"durable_objects": {"bindings": [{"name": "CHAT", "class_name": "Chat"}]}\n'
        )
    config = load(tmp_path, text + ("" if name == "wrangler.toml" else "}"), name)
    warning = next(w for w in config.warnings if "no [migrations]" in w)
    assert "\n\n    " in warning  # on lines of its own, not squeezed into the sentence
    pasted = _pasted(warning)
    fixed_text = text + "\n" + pasted if name == "wrangler.toml" else text + "," + pasted + "}"
    fixed = load(tmp_path, fixed_text, name)
    assert not [w for w in fixed.warnings if "migration" in w] and fixed.sql_enabled("Chat")


def test_declarative_exports(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        BASE_TOML
        + BINDINGS
        + """
[exports.ChatRoom]
type = "durable-object"
state = "renamed"
renamed_to = "Chat"
[exports.Chat]
type = "durable-object"
storage = "sqlite"
[exports.Plain]
type = "durable-object"
""",
    )
    assert {n: i.sql for n, i in config.classes.items()} == {"Chat": True, "Plain": False}
    problems = problems_of(
        tmp_path, BASE_TOML + '[exports.A]\ntype = "durable-object"\n[[migrations]]\ntag = "v1"\n'
    )
    assert problems[0].startswith("exports and migrations cannot both be set")
