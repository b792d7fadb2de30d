"""doemu's own settings: CLI flags > ``DOEMU_*`` variables > ``[tool.doemu]`` > defaults.

They say how doemu runs (address, persistence, durability, idle eviction, limits), not what
the Worker is, so they never come from the wrangler file and are resolved apart from
:class:`~doemu.config.model.WorkerConfig`, with their own error
(:class:`~doemu.config.model.SettingsError`) naming the flag, variable or key at fault.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from .ai import AiSettings, parse_ai_settings
from .checker import show
from .model import SettingsError, display_path

__all__ = [
    "CLOCKS",
    "DURABILITY_LEVELS",
    "LOOPS",
    "ClockKind",
    "DoemuSettings",
    "Durability",
    "Limits",
    "Loop",
    "parse_idle_timeout",
    "read_ai_settings",
    "resolve_settings",
]


Limits = Literal["local", "production"]
#: The event loop ``doemu dev`` runs on: ``auto`` is uvloop when it can be imported, else asyncio.
Loop = Literal["auto", "asyncio", "uvloop"]
LOOPS: tuple[Loop, ...] = ("auto", "asyncio", "uvloop")
#: What a commit survives before its output leaves the object: the process being killed, or a
#: power loss (see :mod:`doemu.storage.durability`; spelled out here so settings import nothing).
Durability = Literal["process", "power"]
DURABILITY_LEVELS: tuple[Durability, ...] = ("process", "power")
#: The runtime's clock: ``real`` time, or a ``manual`` one that only moves when told to
#: (``POST /__doemu/api/clock``), so alarms can be stepped through by hand.
ClockKind = Literal["real", "manual"]
CLOCKS: tuple[ClockKind, ...] = ("real", "manual")


@dataclass(frozen=True)
class DoemuSettings:
    """doemu-only settings. :func:`resolve_settings` returns ``persist_to`` as an absolute path."""

    host: str = "127.0.0.1"
    port: int = 8787
    persist_to: Path = Path(".doemu/state")
    persist: bool = True
    #: ``power`` by default: an acknowledged write survives a power cut, as on workerd.
    durability: Durability = "power"
    idle_timeout: tuple[float, float] = (70.0, 140.0)
    reload: bool = False
    log_level: str = "info"
    admin_token: str | None = None
    limits: Limits = "local"
    max_live_objects: int | None = None
    loop: Loop = "auto"
    clock: ClockKind = "real"
    #: Relax the JavaScript boundary's rules (see :mod:`doemu.compat.boundary`): accept what
    #: Cloudflare's Python runtime refuses. Off by default, so a mistake shows locally.
    lenient: bool = False
    #: ``[tool.doemu.ai]``: the endpoint that serves ``env.AI`` (see :mod:`doemu.config.ai`).
    ai: AiSettings | None = None


_SETTING_NAMES = (
    "host", "port", "persist_to", "persist", "durability", "idle_timeout", "reload", "log_level",
    "admin_token", "limits", "max_live_objects", "loop", "clock", "lenient",
)  # fmt: skip
_LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)"
_IDLE = re.compile(rf"\s*{_NUMBER}\s*(?:-\s*{_NUMBER}\s*)?")


def parse_idle_timeout(value: Any) -> tuple[float, float] | None:
    """``"70-140"`` → ``(70.0, 140.0)``, ``"5"`` or ``5`` → ``(5.0, 5.0)``; ``None`` if invalid.

    ``[tool.doemu]`` may also give a two-number array. Bounds must be finite, ``low <= high``.
    """
    low: float
    high: float
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        low = high = float(value)
    elif isinstance(value, list | tuple) and len(value) == 2:
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
            return None
        low, high = float(value[0]), float(value[1])
    elif isinstance(value, str):
        match = _IDLE.fullmatch(value)
        if match is None:
            return None
        low = float(match.group(1))
        high = float(match.group(2)) if match.group(2) is not None else low
    else:
        return None
    if not (math.isfinite(low) and math.isfinite(high)) or low < 0 or low > high:
        return None
    return (low, high)


def _bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
    return None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _parse_setting(name: str, value: Any, label: str, relative_to: Path) -> Any:
    """Parse one setting or raise :class:`SettingsError` saying what was expected."""
    result: Any = None
    expected: str
    if name == "host":
        expected = "a host name or IP address"
        if isinstance(value, str) and value.strip():
            result = value.strip()
    elif name == "port":
        expected = "a port number 0-65535 (0 picks a free port)"
        number = _int(value)
        if number is not None and 0 <= number <= 65535:
            result = number
    elif name == "persist_to":
        # An empty path would be the current folder: object files strewn among the sources.
        expected = "a directory path (an empty one would persist into the current folder)"
        if isinstance(value, str | Path) and str(value).strip():
            path = Path(str(value).strip()).expanduser()
            result = path if path.is_absolute() else (relative_to / path)
            if result.exists() and not result.is_dir():
                raise SettingsError(
                    f"{label}={str(value)!r}: not a directory ({display_path(result)} is a file)",
                    source=label,
                )
    elif name in ("persist", "reload", "lenient"):
        expected = "true or false (also 1/0, yes/no, on/off)"
        result = _bool(value)
    elif name == "durability":
        expected = "process or power"
        if isinstance(value, str) and value.strip().lower() in DURABILITY_LEVELS:
            result = value.strip().lower()
    elif name == "idle_timeout":
        expected = "seconds like 70-140 or 5"
        result = parse_idle_timeout(value)
    elif name == "log_level":
        expected = "one of " + ", ".join(_LOG_LEVELS)
        if isinstance(value, str) and value.strip().lower() in _LOG_LEVELS:
            result = value.strip().lower()
    elif name == "admin_token":
        expected = "a string"
        if isinstance(value, str):
            result = value
    elif name == "limits":
        expected = "local or production"
        if isinstance(value, str) and value.strip().lower() in ("local", "production"):
            result = value.strip().lower()
    elif name == "max_live_objects":
        expected = "a positive integer"
        number = _int(value)
        if number is not None and number > 0:
            result = number
    elif name == "clock":
        expected = "real or manual"
        if isinstance(value, str) and value.strip().lower() in CLOCKS:
            result = value.strip().lower()
    elif name == "loop":
        expected = "auto, asyncio or uvloop"
        if isinstance(value, str) and value.strip().lower() in LOOPS:
            result = value.strip().lower()
        if result == "uvloop" and importlib.util.find_spec("uvloop") is None:
            # Said here, where the source is known, rather than when ``doemu dev`` starts the
            # loop; find_spec only looks the package up, it does not import it.
            raise SettingsError(
                f"{label}={value!r}: uvloop is not installed (pip install uvloop; it does not "
                "support Windows); use auto or asyncio",
                source=label,
            )
    else:  # pragma: no cover - names are checked by the callers
        raise AssertionError(name)
    if result is None:
        shown = repr(value) if isinstance(value, str) else show(value)
        raise SettingsError(f"{label}={shown}: expected {expected}", source=label)
    return result


def _read_tool_doemu(pyproject: Path) -> dict[str, Any]:
    where = display_path(pyproject)
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{where}: invalid TOML: {exc}", source=where) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{where}: cannot read: {exc}", source=where) from None
    tool = data.get("tool", {})
    section = tool.get("doemu", {}) if isinstance(tool, dict) else {}
    if not isinstance(section, dict):
        raise SettingsError(
            f"{where}: [tool.doemu] must be a table, got {show(section)}", source=where
        )
    return section


def read_ai_settings(pyproject: Path | None) -> AiSettings | None:
    """``[tool.doemu.ai]`` of ``pyproject`` alone (what the in-process harness reads from a
    project; ``doemu dev`` gets it with the other settings from :func:`resolve_settings`)."""
    if pyproject is None or not pyproject.is_file():
        return None
    section = _read_tool_doemu(pyproject)
    if "ai" not in section:
        return None
    return parse_ai_settings(section["ai"], display_path(pyproject))


def resolve_settings(
    cli: Mapping[str, Any],
    env: Mapping[str, str],
    pyproject: Path | None,
    *,
    base_dir: Path | None = None,
) -> DoemuSettings:
    """Resolve doemu settings: CLI flags > ``DOEMU_*`` variables > ``[tool.doemu]`` > defaults.

    ``cli`` maps setting names (``persist_to`` or ``persist-to``) to values; ``None`` means "not
    given", and unrelated keys (e.g. ``config``) are ignored, so a click ``params`` dict can be
    passed as is. Empty ``DOEMU_*`` variables count as unset. Relative ``persist_to`` paths are
    resolved against the cwd (CLI, env) or the pyproject's directory; the default
    ``.doemu/state`` against ``base_dir`` (else the pyproject's directory, else the cwd).
    """
    cwd = Path.cwd()
    project_dir = base_dir or (pyproject.parent if pyproject is not None else None) or cwd
    values: dict[str, Any] = {"persist_to": (project_dir / ".doemu" / "state").absolute()}

    if pyproject is not None and pyproject.is_file():
        where = display_path(pyproject)
        for key, value in _read_tool_doemu(pyproject).items():
            name = key.replace("-", "_")
            if name == "ai":  # a table of its own, only in pyproject.toml
                values["ai"] = parse_ai_settings(value, where)
                continue
            if name not in _SETTING_NAMES:
                raise SettingsError(
                    f"{where}: [tool.doemu] has unknown key {key!r}; expected one of "
                    + ", ".join((*_SETTING_NAMES, "ai")),
                    source=where,
                )
            label = f"{where} [tool.doemu] {key}"
            values[name] = _parse_setting(name, value, label, pyproject.parent.absolute())

    for name in _SETTING_NAMES:
        var = f"DOEMU_{name.upper()}"
        raw = env.get(var)
        if raw is not None and raw != "":
            values[name] = _parse_setting(name, raw, var, cwd)

    for key, value in cli.items():
        name = key.replace("-", "_")
        if name not in _SETTING_NAMES or value is None:
            continue
        values[name] = _parse_setting(name, value, "--" + name.replace("_", "-"), cwd)

    values["persist_to"] = Path(os.path.normpath(values["persist_to"]))
    if "limits" in values:
        values["limits"] = cast(Limits, values["limits"])
    if "loop" in values:
        values["loop"] = cast(Loop, values["loop"])
    if "clock" in values:
        values["clock"] = cast(ClockKind, values["clock"])
    if "durability" in values:
        values["durability"] = cast(Durability, values["durability"])
    return DoemuSettings(**values)
