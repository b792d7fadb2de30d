"""wrangler config parsing, migrations replay and doemu settings resolution."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from doemu.config import (
    ConfigNotFoundError,
    ConfigSyntaxError,
    ConfigValueError,
    DoemuSettings,
    DurableObjectBinding,
    MigrationError,
    SettingsError,
    WorkerConfig,
    find_config,
    find_pyproject,
    load_config,
    parse_config,
    parse_idle_timeout,
    parse_jsonc,
    resolve_settings,
    strip_jsonc,
)
from doemu.errors import ConfigError

FIXTURES = Path(__file__).parent / "fixtures" / "config"

BASE_TOML = """\
name = "my-worker"
main = "src/entry.py"
compatibility_date = "2025-01-01"
compatibility_flags = ["python_workers"]
"""


def write(tmp_path: Path, text: str, name: str = "wrangler.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load(tmp_path: Path, text: str, name: str = "wrangler.toml") -> WorkerConfig:
    return load_config(write(tmp_path, text, name))


def problems_of(tmp_path: Path, text: str, name: str = "wrangler.toml") -> tuple[str, ...]:
    with pytest.raises(ConfigValueError) as info:
        load(tmp_path, text, name)
    return info.value.problems


# ------------------------------------------------------------------------------ files and TOML


def test_example_toml_fixture_parses() -> None:
    config = load_config(FIXTURES / "agents" / "wrangler.toml")
    assert config.name == "research-agents"
    assert config.main == "src/entry.py"
    assert config.main_module == "entry"
    assert config.main_path == FIXTURES / "agents" / "src" / "entry.py"
    assert config.base_dir == FIXTURES / "agents"
    assert config.compatibility_date == "2025-06-01"
    assert config.compatibility_flags == ("python_workers",)
    assert [(b.name, b.class_name) for b in config.bindings] == [
        ("COUNTER", "Counter"),
        ("RESEARCHER", "Researcher"),
    ]
    assert config.classes["Counter"].sql is True
    assert config.classes["Researcher"].sql is False
    assert config.vars == {"MODEL": "scripted", "MAX_STEPS": 8, "DEBUG": True, "LIMITS": {"a": 1}}
    assert config.warnings == ()
    assert config.source == FIXTURES / "agents" / "wrangler.toml"


def test_repo_example_file_is_valid(tmp_path: Path) -> None:
    example = Path(__file__).parents[1] / "wrangler.toml.example"
    config = load(tmp_path, example.read_text(encoding="utf-8"))
    assert config.main == "src/entry.py"
    assert "python_workers" in config.compatibility_flags
    assert config.bindings and all(config.sql_enabled(b.class_name) for b in config.bindings)
    assert config.warnings == ()


def test_binding_lines_are_recorded_for_toml(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        BASE_TOML
        + """
[[durable_objects.bindings]]
name = "A"
class_name = "Alpha"   # a comment

[[env.staging.durable_objects.bindings]]
name = "X"
class_name = "Ignored"

[[durable_objects.bindings]]
"name" = "B"
"class_name" = 'Beta'

[[migrations]]
tag = "v1"
new_sqlite_classes = ["Alpha", "Beta"]
""",
    )
    assert [(b.class_name, b.line, b.index) for b in config.bindings] == [
        ("Alpha", 8, 0),
        ("Beta", 16, 1),
    ]
    assert config.main_line == 2


def test_inline_bindings_in_durable_objects_table(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        BASE_TOML
        + """
[durable_objects]
bindings = [
  { name = "A", class_name = "Alpha" },
  { name = "B", class_name = "Beta" },
]
[[migrations]]
tag = "v1"
new_classes = ["Alpha", "Beta"]
""",
    )
    assert [(b.name, b.line) for b in config.bindings] == [("A", 8), ("B", 9)]


def test_invalid_toml_names_file_line_and_column(tmp_path: Path) -> None:
    with pytest.raises(ConfigSyntaxError) as info:
        load(tmp_path, 'name = "x"\nmain = \n')
    assert info.value.line == 2
    assert "wrangler.toml: invalid TOML:" in str(info.value)
    assert str(tmp_path) in str(info.value)


def test_unknown_top_level_keys_warn_in_wranglers_words(tmp_path: Path) -> None:
    config = load(tmp_path, BASE_TOML + 'colour = "blue"\nflavour = 1\nroutes = []\n')
    assert 'Unexpected fields found in top-level field: "colour","flavour"' in config.warnings
    # Keys wrangler knows and doemu does not need are accepted silently.
    assert not any("routes" in w for w in config.warnings)


def test_unsupported_bindings_and_env_sections_warn(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        BASE_TOML
        + """
[[kv_namespaces]]
binding = "KV"
id = "abc"

[env.production]
name = "prod"
""",
    )
    assert '"kv_namespaces" is not emulated by doemu and is ignored' in config.warnings
    assert any("[env.*] sections are ignored" in w for w in config.warnings)


# ------------------------------------------------------------------------------------- JSONC


def test_strip_jsonc_keeps_strings_and_offsets() -> None:
    text = '{\n  "url": "http://x//y", // trailing\n  /* block\n  */ "a": [1, 2,],\n}'
    stripped = strip_jsonc(text)
    assert len(stripped) == len(text)
    assert stripped.count("\n") == text.count("\n")
    assert json.loads(stripped) == {"url": "http://x//y", "a": [1, 2]}


def test_strip_jsonc_handles_escapes_and_comment_markers_in_strings() -> None:
    text = r'{"a": "quote \" // not a comment /* nor this */", "b": "\\", /* c */ "d": 1,}'
    assert json.loads(strip_jsonc(text)) == {
        "a": 'quote " // not a comment /* nor this */',
        "b": "\\",
        "d": 1,
    }


def test_jsonc_double_comma_is_still_an_error() -> None:
    with pytest.raises(ConfigSyntaxError) as info:
        parse_jsonc('{"a": [1,,]}')
    assert (info.value.line, info.value.column) == (1, 11)


def test_jsonc_error_points_at_original_line(tmp_path: Path) -> None:
    text = '{\n  // comment\n  "name": "x",\n  "main": oops\n}\n'
    with pytest.raises(ConfigSyntaxError) as info:
        load(tmp_path, text, "wrangler.jsonc")
    assert (info.value.line, info.value.column) == (4, 11)
    assert "wrangler.jsonc:4:11: invalid JSON" in str(info.value)


def test_jsonc_fixture_matches_toml_fixture() -> None:
    toml = load_config(FIXTURES / "agents" / "wrangler.toml")
    jsonc = load_config(FIXTURES / "jsonc" / "wrangler.jsonc")
    assert jsonc.name == toml.name
    assert jsonc.bindings[0].class_name == "Counter"
    assert [b.name for b in jsonc.bindings] == [b.name for b in toml.bindings]
    assert jsonc.classes == toml.classes
    assert jsonc.vars == {**toml.vars, "URL": "https://example.com//path"}
    # Lines of each class_name, and of main, in the JSONC file.
    assert [b.line for b in jsonc.bindings] == [11, 16]
    assert jsonc.main_line == 4


def test_plain_json_is_parsed_as_jsonc_like_wrangler(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        '{"name": "w", "main": "src/entry.py", "compatibility_date": "2025-01-01",'
        ' "compatibility_flags": ["python_workers"], // wrangler allows this\n}',
        "wrangler.json",
    )
    assert config.name == "w"


# -------------------------------------------------------------------------------- discovery


def test_search_order_follows_wrangler(tmp_path: Path) -> None:
    (tmp_path / "wrangler.toml").write_text(BASE_TOML)
    assert find_config(tmp_path) == tmp_path / "wrangler.toml"
    (tmp_path / "wrangler.jsonc").write_text("{}")
    assert find_config(tmp_path) == tmp_path / "wrangler.jsonc"
    (tmp_path / "wrangler.json").write_text("{}")
    assert find_config(tmp_path) == tmp_path / "wrangler.json"


def test_search_walks_up_and_nearest_directory_wins(tmp_path: Path) -> None:
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    (tmp_path / "wrangler.json").write_text("{}")
    assert find_config(nested) == tmp_path / "wrangler.json"
    (tmp_path / "a" / "wrangler.toml").write_text(BASE_TOML)
    assert find_config(nested) == tmp_path / "a" / "wrangler.toml"


def test_load_config_searches_from_cwd(tmp_path: Path) -> None:
    (tmp_path / "wrangler.toml").write_text(BASE_TOML)
    (tmp_path / "src").mkdir()
    assert load_config(cwd=tmp_path / "src").name == "my-worker"
    assert load_config(tmp_path).source == tmp_path / "wrangler.toml"


def test_missing_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigNotFoundError) as info:
        load_config(tmp_path / "nope.toml")
    assert "nope.toml: no such file" in str(info.value)
    with pytest.raises(ConfigNotFoundError, match=r"wrangler\.jsonc or wrangler\.toml"):
        load_config(tmp_path)
    with pytest.raises(ConfigError, match=r"must end in \.toml, \.json or \.jsonc"):
        load_config(write(tmp_path, "x", "wrangler.yaml"))


# ------------------------------------------------------------------------------------ errors


def test_error_names_file_key_and_value(tmp_path: Path) -> None:
    text = (
        BASE_TOML
        + """
[[durable_objects.bindings]]
name = "A"
class_name = "Alpha"

[[durable_objects.bindings]]
name = "B"
class_name = 3
"""
    )
    with pytest.raises(ConfigValueError) as info:
        load(tmp_path, text)
    assert info.value.problems == (
        "durable_objects.bindings[1].class_name must be a string, got 3",
    )
    assert str(info.value) == (
        f"{tmp_path / 'wrangler.toml'}: durable_objects.bindings[1].class_name must be a string, "
        "got 3"
    )


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        """\
name = "My Worker"
main = "src/entry.js"
compatibility_date = "2025-13-01"
compatibility_flags = "python_workers"

[[durable_objects.bindings]]
class_name = "A"

[vars]
WHEN = 1979-05-27T07:32:00Z
""",
    )
    assert problems == (
        'Expected "name" to be of type string, alphanumeric and lowercase with dashes only but '
        'got "My Worker".',
        'main must be a .py file or a dotted module, got "src/entry.js"',
        'compatibility_date "2025-13-01" is not a calendar date',
        'compatibility_flags must be an array of strings, got "python_workers"',
        "durable_objects.bindings[0].name is required",
        "vars.WHEN must be a string, number, boolean or JSON object, got "
        "1979-05-27T07:32:00+00:00 (a TOML date/time)",
    )


@pytest.mark.parametrize(
    ("lines", "problem"),
    [
        ('main = "src/entry.py"', 'name is required (the Worker name; Durable Object ids derive '
         'from "<name>-<Class>")'),
        ('name = "w"', 'main is required: the entry module, e.g. main = "src/entry.py" (relative '
         "to the config file) or a dotted module name"),
        ('name = "w"\nmain = "src/my-entry.py"', "main \"src/my-entry.py\": 'my-entry' is not a "
         "valid Python module name (use letters, digits and underscores)"),
        ('name = "w"\nmain = "app.worker:Default"', 'main "app.worker:Default" must be a module, '
         "not '<module>:<attribute>': the entry point is always the class named Default in it"),
        ('name = "w"\nmain = "x.py"\ncompatibility_date = "2999-01-01"',
         'Compatibility date "2999-01-01" is in the future and unsupported'),
        ('name = "w"\nmain = "x.py"\ndurable_objects = []',
         "durable_objects must be a table (an object), got []"),
        ('name = "w"\nmain = "x.py"\n[durable_objects]\nbinding = []',
         'durable_objects is missing the required "bindings" array'),
        ('name = "w"\nmain = "x.py"\n[[durable_objects.bindings]]\nname = "A"\n'
         'class_name = "my-class"',
         'durable_objects.bindings[0].class_name must be a Python class name, got "my-class"'),
        ('name = "w"\nmain = "x.py"\n[[durable_objects.bindings]]\nname = "A"\n'
         'class_name = "A"\nenvironment = "prod"',
         'durable_objects.bindings[0]: binding should have a "script_name" field if '
         '"environment" is present.'),
        ('name = "w"\nmain = "x.py"\nvars = "x"', 'vars must be a table (an object), got "x"'),
        ('name = "w"\nmain = "x.py"\nmigrations = {tag = "v1"}',
         'migrations must be an array of tables, got {"tag": "v1"}'),
        ('name = "w"\nmain = "x.py"\n[[migrations]]\nnew_classes = ["A"]',
         "migrations[0].tag is required"),
        ('name = "w"\nmain = "x.py"\n[[migrations]]\ntag = "v1"\nrenamed_classes = ["A"]',
         'Expected "migrations[0].renamed_classes" to be an array of "{from: string, to: '
         'string}" objects but got ["A"].'),
    ],
)  # fmt: skip
def test_single_errors(tmp_path: Path, lines: str, problem: str) -> None:
    assert problems_of(tmp_path, lines + "\n") == (problem,)


def test_duplicate_binding_names_use_wranglers_text(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        BASE_TOML
        + """
[[durable_objects.bindings]]
name = "A"
class_name = "One"
[[durable_objects.bindings]]
name = "A"
class_name = "Two"
[[durable_objects.bindings]]
name = "MODEL"
class_name = "Three"
[vars]
MODEL = "x"
""",
    )
    assert problems == (
        "A assigned to multiple Durable Object bindings.",
        "MODEL assigned to Durable Object and Environment Variable bindings.",
    )


def test_python_main_without_python_workers_flag_warns(tmp_path: Path) -> None:
    config = load(tmp_path, 'name = "w"\nmain = "src/entry.py"\ncompatibility_date = "2025-01-01"')
    assert config.warnings[0].startswith(
        "The `python_workers` compatibility flag is required to use Python."
    )


def test_missing_compatibility_date_warns_and_toml_date_is_accepted(tmp_path: Path) -> None:
    config = load(tmp_path, 'name = "w"\nmain = "app.worker"\n')
    assert config.compatibility_date is None
    assert config.warnings[0].startswith("no compatibility_date is set")
    assert config.main_path is None and config.main_module == "app.worker"
    config = load(tmp_path, 'name = "w"\nmain = "app.worker"\ncompatibility_date = 2025-02-03\n')
    assert config.compatibility_date == "2025-02-03"


def test_unexpected_binding_and_migration_fields_warn(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        BASE_TOML
        + """
[[durable_objects.bindings]]
name = "A"
class_name = "A"
colour = "red"
[[migrations]]
tag = "v1"
new_sqlite_classes = ["A"]
new_sqlite_class = ["B"]
""",
    )
    assert config.warnings == (
        'Unexpected fields found in durable_objects.bindings[0] field: "colour"',
        'Unexpected fields found in migrations[0] field: "new_sqlite_class"',
    )


def test_cross_script_binding_warns_and_is_kept_apart(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        BASE_TOML
        + """
[[durable_objects.bindings]]
name = "LOCAL"
class_name = "Local"
script_name = "my-worker"
[[durable_objects.bindings]]
name = "OTHER"
class_name = "Remote"
script_name = "other-worker"
[[migrations]]
tag = "v1"
new_sqlite_classes = ["Local"]
""",
    )
    assert [b.name for b in config.bindings] == ["LOCAL"]
    assert config.external_bindings == (
        DurableObjectBinding("OTHER", "Remote", line=12, index=1, script_name="other-worker"),
    )
    assert config.warnings == (
        'durable_objects.bindings[1] "OTHER" has script_name "other-worker": bindings to Durable '
        "Objects of another Worker are not supported locally; env.OTHER will not be available",
    )


# -------------------------------------------------------------------------------- migrations

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
    assert config.warnings == (
        'durable_objects.bindings[0] class_name "Chat" has no migration: add it to '
        "new_sqlite_classes in a new [[migrations]] entry; until then doemu runs it without "
        "storage.sql (key-value storage only), as wrangler dev does",
    )


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


# -------------------------------------------------------------------------------------- vars


def test_vars_keep_json_types(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        BASE_TOML
        + """
[vars]
S = "text"
I = 3
F = 1.5
B = false
L = [1, "two"]
O = { nested = { deep = true } }
""",
    )
    assert config.vars == {
        "S": "text",
        "I": 3,
        "F": 1.5,
        "B": False,
        "L": [1, "two"],
        "O": {"nested": {"deep": True}},
    }


def test_vars_reject_non_json_values(tmp_path: Path) -> None:
    assert problems_of(tmp_path, BASE_TOML + "[vars]\nX = nan\n") == (
        "vars.X must be a string, number, boolean or JSON object, got NaN",
    )


def test_parse_config_from_a_mapping_and_unique_key(tmp_path: Path) -> None:
    config = parse_config(
        {
            "name": "my-worker",
            "main": "entry.py",
            "durable_objects": {"bindings": [{"name": "C", "class_name": "Counter"}]},
            "migrations": [{"tag": "v1", "new_sqlite_classes": ["Counter"]}],
        },
        base_dir=tmp_path,
    )
    assert config.source is None and config.source_name == "<config>"
    assert config.main_path == tmp_path / "entry.py"
    assert config.unique_key(config.binding("C")) == "my-worker-Counter"
    assert config.unique_key("Other") == "my-worker-Other"
    assert config.where(3) == "<config>:3"
    with pytest.raises(KeyError):
        config.binding("NOPE")


# ---------------------------------------------------------------------------------- settings


def test_settings_defaults(tmp_path: Path) -> None:
    settings = resolve_settings({}, {}, None, base_dir=tmp_path)
    assert settings == DoemuSettings(persist_to=tmp_path / ".doemu" / "state")
    assert settings.idle_timeout == (70.0, 140.0)
    assert (settings.host, settings.port, settings.limits) == ("127.0.0.1", 8787, "local")


def test_settings_precedence_cli_over_env_over_pyproject(tmp_path: Path) -> None:
    pyproject = write(
        tmp_path,
        """
[project]
name = "x"

[tool.doemu]
port = 9000
host = "0.0.0.0"
idle-timeout = [1, 2]
persist_to = "state-dir"
log_level = "debug"
max_live_objects = 50
""",
        "pyproject.toml",
    )
    only_file = resolve_settings({}, {}, pyproject)
    assert (only_file.port, only_file.host, only_file.idle_timeout) == (9000, "0.0.0.0", (1, 2))
    assert only_file.persist_to == tmp_path / "state-dir"
    assert (only_file.log_level, only_file.max_live_objects) == ("debug", 50)

    env = {"DOEMU_PORT": "9100", "DOEMU_IDLE_TIMEOUT": "5", "DOEMU_HOST": "", "OTHER": "x"}
    with_env = resolve_settings({}, env, pyproject)
    assert (with_env.port, with_env.host, with_env.idle_timeout) == (9100, "0.0.0.0", (5, 5))

    cli = {"port": 9200, "host": None, "idle_timeout": "0.5-1.5", "config": "ignored"}
    with_cli = resolve_settings(cli, env, pyproject)
    assert (with_cli.port, with_cli.idle_timeout) == (9200, (0.5, 1.5))
    assert with_cli.host == "0.0.0.0"  # None means the flag was not given
    assert with_cli.log_level == "debug"


def test_settings_env_and_cli_values_are_parsed(tmp_path: Path) -> None:
    env = {
        "DOEMU_PERSIST": "no",
        "DOEMU_RELOAD": "on",
        "DOEMU_LIMITS": "Production",
        "DOEMU_ADMIN_TOKEN": "s3cret",
        "DOEMU_PERSIST_TO": str(tmp_path / "abs"),
        "DOEMU_LOG_LEVEL": "WARNING",
    }
    settings = resolve_settings({"max-live-objects": "7"}, env, None)
    assert settings.persist is False and settings.reload is True
    assert settings.limits == "production" and settings.admin_token == "s3cret"
    assert settings.persist_to == tmp_path / "abs"
    assert settings.log_level == "warning" and settings.max_live_objects == 7
    relative = resolve_settings({"persist_to": "rel/state"}, {}, None)
    assert relative.persist_to == Path.cwd() / "rel" / "state"


@pytest.mark.parametrize(
    ("cli", "env", "message"),
    [
        ({}, {"DOEMU_IDLE_TIMEOUT": "abc"},
         "DOEMU_IDLE_TIMEOUT='abc': expected seconds like 70-140 or 5"),
        ({"idle_timeout": "140-70"}, {},
         "--idle-timeout='140-70': expected seconds like 70-140 or 5"),
        ({}, {"DOEMU_PORT": "80a"},
         "DOEMU_PORT='80a': expected a port number 0-65535 (0 picks a free port)"),
        ({"port": 70000}, {}, "--port=70000: expected a port number 0-65535 (0 picks a free port)"),
        ({}, {"DOEMU_PERSIST": "maybe"},
         "DOEMU_PERSIST='maybe': expected true or false (also 1/0, yes/no, on/off)"),
        ({"log_level": "loud"}, {},
         "--log-level='loud': expected one of critical, error, warning, info, debug, trace"),
        ({}, {"DOEMU_LIMITS": "cloud"}, "DOEMU_LIMITS='cloud': expected local or production"),
        ({"max_live_objects": 0}, {}, "--max-live-objects=0: expected a positive integer"),
        ({}, {"DOEMU_LOOP": "fast"}, "DOEMU_LOOP='fast': expected auto, asyncio or uvloop"),
        ({"loop": "trio"}, {}, "--loop='trio': expected auto, asyncio or uvloop"),
    ],
)  # fmt: skip
def test_settings_errors(cli: dict[str, object], env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as info:
        resolve_settings(cli, env, None)
    assert str(info.value) == message


def test_pyproject_settings_errors(tmp_path: Path) -> None:
    pyproject = write(tmp_path, "[tool.doemu]\nprot = 1\n", "pyproject.toml")
    with pytest.raises(SettingsError, match=r"\[tool.doemu\] has unknown key 'prot'"):
        resolve_settings({}, {}, pyproject)
    write(tmp_path, '[tool.doemu]\nidle_timeout = "soon"\n', "pyproject.toml")
    with pytest.raises(SettingsError) as info:
        resolve_settings({}, {}, pyproject)
    assert str(info.value).endswith(
        "pyproject.toml [tool.doemu] idle_timeout='soon': expected seconds like 70-140 or 5"
    )
    write(tmp_path, "[tool.doemu\n", "pyproject.toml")
    with pytest.raises(SettingsError, match="invalid TOML"):
        resolve_settings({}, {}, pyproject)


def test_loop_setting_comes_from_every_source_in_order(tmp_path: Path) -> None:
    pyproject = write(tmp_path, '[tool.doemu]\nloop = "asyncio"\n', "pyproject.toml")
    assert resolve_settings({}, {}, None).loop == "auto"
    assert resolve_settings({}, {}, pyproject).loop == "asyncio"
    assert resolve_settings({}, {"DOEMU_LOOP": " UVloop "}, pyproject).loop == "uvloop"
    cli = {"loop": "asyncio"}
    assert resolve_settings(cli, {"DOEMU_LOOP": "uvloop"}, pyproject).loop == "asyncio"
    assert resolve_settings({"loop": None}, {"DOEMU_LOOP": ""}, None).loop == "auto"

    write(tmp_path, "[tool.doemu]\nloop = 1\n", "pyproject.toml")
    with pytest.raises(SettingsError) as info:
        resolve_settings({}, {}, pyproject)
    assert str(info.value).endswith(
        "pyproject.toml [tool.doemu] loop=1: expected auto, asyncio or uvloop"
    )


def test_loop_uvloop_without_uvloop_installed_names_the_source(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # what a missing package looks like
    sources: list[tuple[dict[str, str], dict[str, str], str]] = [
        ({"loop": "uvloop"}, {}, "--loop"),
        ({}, {"DOEMU_LOOP": "uvloop"}, "DOEMU_LOOP"),
    ]
    for cli, env, source in sources:
        with pytest.raises(SettingsError) as info:
            resolve_settings(cli, env, None)
        assert str(info.value).startswith(f"{source}='uvloop': uvloop is not installed")
        assert "use auto or asyncio" in str(info.value)
        assert info.value.source == source
    # auto falls back to asyncio quietly; asyncio never needs uvloop
    assert resolve_settings({}, {"DOEMU_LOOP": "auto"}, None).loop == "auto"
    assert resolve_settings({"loop": "asyncio"}, {}, None).loop == "asyncio"


def test_pyproject_without_tool_doemu_and_find_pyproject(tmp_path: Path) -> None:
    write(tmp_path, BASE_TOML)
    assert find_pyproject(load_config(tmp_path)) is None
    pyproject = write(tmp_path, '[project]\nname = "x"\n', "pyproject.toml")
    assert find_pyproject(load_config(tmp_path)) == pyproject
    assert resolve_settings({}, {}, pyproject).port == 8787


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("70-140", (70.0, 140.0)),
        ("5", (5.0, 5.0)),
        (" 1.5 - 2 ", (1.5, 2.0)),
        ("0", (0.0, 0.0)),
        (".5", (0.5, 0.5)),
        (3, (3.0, 3.0)),
        ([1, 2.5], (1.0, 2.5)),
        ("abc", None),
        ("5-", None),
        ("-5", None),
        ("10-5", None),
        ("1-2-3", None),
        (True, None),
        ([1], None),
        (float("inf"), None),
    ],
)
def test_parse_idle_timeout(value: object, expected: tuple[float, float] | None) -> None:
    assert parse_idle_timeout(value) == expected


def test_public_names_are_exported() -> None:
    import doemu.config
    import doemu.loader

    for module in (doemu.config, doemu.loader):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"
