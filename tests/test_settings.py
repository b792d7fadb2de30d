"""doemu's own settings: CLI flags over DOEMU_* environment over [tool.doemu] over defaults."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from doemu.config import (
    DoemuSettings,
    SettingsError,
    parse_idle_timeout,
    resolve_settings,
)


def write(tmp_path: Path, text: str, name: str = "pyproject.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


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


def test_durability_setting_defaults_to_power_and_comes_from_every_source(
    tmp_path: Path,
) -> None:
    pyproject = write(tmp_path, '[tool.doemu]\ndurability = "process"\n', "pyproject.toml")
    assert resolve_settings({}, {}, None).durability == "power"
    assert resolve_settings({}, {}, pyproject).durability == "process"
    assert resolve_settings({}, {"DOEMU_DURABILITY": " POWER "}, pyproject).durability == "power"
    cli = {"durability": "process"}
    assert resolve_settings(cli, {"DOEMU_DURABILITY": "power"}, None).durability == "process"
    with pytest.raises(SettingsError, match="DOEMU_DURABILITY='disk': expected process or power"):
        resolve_settings({}, {"DOEMU_DURABILITY": "disk"}, None)


def test_loop_setting_comes_from_every_source_in_order(tmp_path: Path) -> None:
    pyproject = write(tmp_path, '[tool.doemu]\nloop = "asyncio"\n', "pyproject.toml")
    assert resolve_settings({}, {}, None).loop == "auto"
    assert resolve_settings({}, {}, pyproject).loop == "asyncio"
    assert resolve_settings({}, {"DOEMU_LOOP": " AUTO "}, pyproject).loop == "auto"
    cli = {"loop": "asyncio"}
    assert resolve_settings(cli, {"DOEMU_LOOP": "auto"}, pyproject).loop == "asyncio"
    assert resolve_settings({"loop": None}, {"DOEMU_LOOP": ""}, None).loop == "auto"

    write(tmp_path, "[tool.doemu]\nloop = 1\n", "pyproject.toml")
    with pytest.raises(SettingsError) as info:
        resolve_settings({}, {}, pyproject)
    assert str(info.value).endswith(
        "pyproject.toml [tool.doemu] loop=1: expected auto, asyncio or uvloop"
    )


def test_loop_uvloop_is_accepted_where_uvloop_is_installed(tmp_path: Path) -> None:
    pytest.importorskip("uvloop", reason="uvloop is not installed")
    pyproject = write(tmp_path, '[tool.doemu]\nloop = "asyncio"\n', "pyproject.toml")
    assert resolve_settings({}, {"DOEMU_LOOP": " UVloop "}, pyproject).loop == "uvloop"
    assert resolve_settings({"loop": "asyncio"}, {"DOEMU_LOOP": "uvloop"}, None).loop == "asyncio"


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
