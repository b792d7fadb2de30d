"""``doemu dev``'s configuration: ``--env`` sections, ``.dev.vars`` / ``--var``, ``--persist-to``
refusals and the ``clock`` setting (no server runs here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from doemu.config import (
    ConfigValueError,
    SettingsError,
    load_config,
    parse_var_options,
    resolve_settings,
    resolve_vars,
)

BASE = """
name = "app"
main = "src/entry.py"
compatibility_date = "2025-01-01"
compatibility_flags = ["python_workers"]

[[durable_objects.bindings]]
name = "COUNTER"
class_name = "Counter"

[[migrations]]
tag = "v1"
new_sqlite_classes = ["Counter", "Staging"]

[vars]
GREETING = "top"
ONLY_TOP = "1"
"""

STAGING = """
[env.staging]
compatibility_flags = ["python_workers", "extra"]

[env.staging.vars]
GREETING = "staging"

[[env.staging.durable_objects.bindings]]
name = "STAGED"
class_name = "Staging"
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "wrangler.toml").write_text(BASE + STAGING)
    return tmp_path


def test_env_selects_its_section_as_wrangler_merges_it(project: Path) -> None:
    """Before: ``[env.*]`` was warned about and ignored, and load_config had no ``env``."""
    config = load_config(env="staging")
    assert config.env == "staging"
    assert config.name == "app-staging"  # wrangler's "<name>-<env>": its own object ids
    assert config.main == "src/entry.py"  # inheritable: from the top level
    assert config.compatibility_flags == ("python_workers", "extra")  # overridden
    assert config.vars == {"GREETING": "staging"}  # non-inheritable: ONLY_TOP is not taken
    assert [(b.name, b.class_name) for b in config.bindings] == [("STAGED", "Staging")]
    assert set(config.classes) == {"Counter", "Staging"}  # migrations are top-level


def test_env_without_vars_warns_as_wrangler_does(project: Path) -> None:
    (project / "wrangler.toml").write_text(BASE + '\n[env.bare]\nname = "bare"\n')
    config = load_config(env="bare")
    assert config.name == "bare" and config.vars == {} and config.bindings == ()
    joined = "\n".join(config.warnings)
    assert '"vars" exists at the top level, but not on "env.bare"' in joined
    assert '"durable_objects" exists at the top level, but not on "env.bare"' in joined


def test_unknown_env_names_the_known_ones(project: Path) -> None:
    with pytest.raises(
        ConfigValueError, match=r"no \[env.prod\] section \(environments: staging\)"
    ):
        load_config(env="prod")


def test_without_env_the_top_level_is_used_and_the_note_says_how_to_pick(project: Path) -> None:
    config = load_config()
    assert config.env is None and config.name == "app" and config.vars["ONLY_TOP"] == "1"
    assert any("--env NAME" in w for w in config.warnings)


def test_dev_vars_override_vars_and_are_secret(project: Path) -> None:
    """Before: ``.dev.vars`` was never read."""
    (project / ".dev.vars").write_text('GREETING=from-dev-vars\nexport TOKEN="s3cret"\n# c\n')
    result = resolve_vars(load_config())
    assert result.values == {"GREETING": "from-dev-vars", "ONLY_TOP": "1", "TOKEN": "s3cret"}
    assert result.secrets == {"GREETING", "TOKEN"}
    assert result.source == project / ".dev.vars"
    shown = result.shown()
    assert shown["TOKEN"] == shown["GREETING"] == "(hidden)" and shown["ONLY_TOP"] == "'1'"
    assert "s3cret" not in repr(shown)


def test_var_options_override_both_and_are_not_secret(project: Path) -> None:
    (project / ".dev.vars").write_text("TOKEN=s3cret\n")
    cli = parse_var_options(["TOKEN:visible", "URL:http://x:1/a"])
    assert cli == {"TOKEN": "visible", "URL": "http://x:1/a"}  # the value keeps its colons
    result = resolve_vars(load_config(), cli)
    assert result.values["TOKEN"] == "visible" and result.secrets == frozenset()
    with pytest.raises(SettingsError, match="expected KEY:VALUE"):
        parse_var_options(["NOCOLON"])


def test_env_specific_dev_vars_file_wins(project: Path) -> None:
    (project / ".dev.vars").write_text("A=plain\n")
    (project / ".dev.vars.staging").write_text("A=staged\n")
    assert resolve_vars(load_config(env="staging")).values["A"] == "staged"
    assert resolve_vars(load_config()).values["A"] == "plain"


def test_a_bad_dev_vars_line_is_named_without_echoing_it(project: Path) -> None:
    (project / ".dev.vars").write_text("GOOD=1\nthis is s3cret nonsense\n")
    with pytest.raises(ConfigValueError) as caught:
        resolve_vars(load_config())
    assert "line 2: not KEY=VALUE" in str(caught.value) and "s3cret" not in str(caught.value)


def test_a_var_may_not_shadow_a_binding(project: Path) -> None:
    with pytest.raises(ConfigValueError, match="COUNTER is both"):
        resolve_vars(load_config(), {"COUNTER": "x"})


def test_empty_persist_to_is_refused(project: Path) -> None:
    """Before: the CLI turned '' into Path('.') and persisted into the project folder."""
    with pytest.raises(SettingsError, match="persist into the current folder"):
        resolve_settings({"persist_to": ""}, {}, None)


def test_persist_to_a_file_is_not_a_directory(project: Path) -> None:
    with pytest.raises(SettingsError, match=r"not a directory \(wrangler.toml is a file\)"):
        resolve_settings({"persist_to": "wrangler.toml"}, {}, None)
    with pytest.raises(SettingsError, match=r"DOEMU_PERSIST_TO='wrangler\.toml': not a directory"):
        resolve_settings({}, {"DOEMU_PERSIST_TO": "wrangler.toml"}, None)


def test_clock_setting(project: Path) -> None:
    assert resolve_settings({}, {}, None).clock == "real"
    assert resolve_settings({"clock": "manual"}, {}, None).clock == "manual"
    assert resolve_settings({}, {"DOEMU_CLOCK": "manual"}, None).clock == "manual"
    with pytest.raises(SettingsError, match="expected real or manual"):
        resolve_settings({"clock": "fast"}, {}, None)
