"""wrangler config parsing: files, JSONC, discovery, errors and warnings, vars (see also
test_migrations.py and test_settings.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doemu.config import (
    ConfigNotFoundError,
    ConfigSyntaxError,
    ConfigValueError,
    DurableObjectBinding,
    find_config,
    find_pyproject,
    load_config,
    parse_config,
    parse_jsonc,
    resolve_settings,
    strip_jsonc,
)
from doemu.errors import ConfigError

from .config_helpers import BASE_TOML, load, problems_of, write

FIXTURES = Path(__file__).parent / "fixtures" / "config"

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
[[vectorize]]
binding = "V"
index_name = "i"

[env.production]
name = "prod"
""",
    )
    assert '"vectorize" is not emulated by doemu and is ignored' in config.warnings
    assert any("[env.*] sections are defined but no --env was given" in w for w in config.warnings)


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
        'Unexpected fields found in migrations[0] field: "new_sqlite_class" '
        '(did you mean "new_sqlite_classes"?)',
    )


def test_an_unknown_key_close_to_a_known_one_gets_a_did_you_mean(tmp_path: Path) -> None:
    """A typo is only a warning (as in wrangler), so the warning says what was probably meant;
    a key close to nothing gets no guess."""
    config = load(
        tmp_path,
        """\
name = "w"
main = "entry.py"
mian = "src/entry.py"
zebra = 1
[[durable_objects.bindings]]
name = "A"
clas_name = "A"
class_name = "A"
""",
    )
    assert (
        'Unexpected fields found in durable_objects.bindings[0] field: "clas_name" '
        '(did you mean "class_name"?)'
    ) in config.warnings
    assert (
        'Unexpected fields found in top-level field: "mian","zebra" (did you mean "main" for '
        '"mian"?)'
    ) in config.warnings


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


def test_pyproject_without_tool_doemu_and_find_pyproject(tmp_path: Path) -> None:
    write(tmp_path, BASE_TOML)
    assert find_pyproject(load_config(tmp_path)) is None
    pyproject = write(tmp_path, '[project]\nname = "x"\n', "pyproject.toml")
    assert find_pyproject(load_config(tmp_path)) == pyproject
    assert resolve_settings({}, {}, pyproject).port == 8787


def test_public_names_are_exported() -> None:
    import doemu.config
    import doemu.loader

    for module in (doemu.config, doemu.loader):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"
