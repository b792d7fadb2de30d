"""The Worker's ``env`` variables in ``doemu dev``: ``[vars]`` < ``.dev.vars`` < ``--var``.

As in ``wrangler dev``:

* ``[vars]`` (of the selected ``[env.NAME]`` when ``--env`` is given) are plain variables;
* ``.dev.vars`` next to the config file, dotenv format, holds local *secrets*: its values
  override ``[vars]`` and are never printed (the banner lists their names with a hidden value).
  With ``--env NAME``, ``.dev.vars.NAME`` is read instead when it exists;
* ``--var KEY:VALUE`` (repeatable) overrides both, as a plain variable.

Parsing uses python-dotenv's parser (already installed with ``uvicorn[standard]``), imported
only when a ``.dev.vars`` exists, so ``doemu dev`` start-up pays nothing without one. Variable
references (``${OTHER}``) are not expanded, as wrangler's ``.dev.vars`` parser does not expand them.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .model import ConfigValueError, SettingsError, WorkerConfig, display_path

__all__ = [
    "DEV_VARS_FILE",
    "DevVars",
    "dev_vars_file",
    "parse_var_options",
    "read_dev_vars",
    "resolve_vars",
]

#: wrangler's local secrets file, beside the config file.
DEV_VARS_FILE = ".dev.vars"


@dataclass(frozen=True)
class DevVars:
    """The variables a Worker's ``env`` gets, and which of them are secrets.

    ``values`` is what the runtime binds; ``secrets`` names the values that came from
    ``source`` (a ``.dev.vars`` file) and must never be shown.
    """

    values: dict[str, Any]
    secrets: frozenset[str] = frozenset()
    source: Path | None = None

    def shown(self) -> dict[str, str]:
        """Each variable as the banner prints it: secrets hidden, others as short JSON-ish text."""
        result: dict[str, str] = {}
        for key, value in self.values.items():
            if key in self.secrets:
                result[key] = "(hidden)"
            else:
                text = repr(value) if isinstance(value, str) else str(value)
                result[key] = text if len(text) <= 60 else text[:57] + "..."
        return result


def dev_vars_file(config: WorkerConfig) -> Path | None:
    """``.dev.vars.<env>`` (with ``--env``, when it exists), else ``.dev.vars``, else ``None``."""
    directory = config.source.parent if config.source is not None else config.base_dir
    if config.env is not None:
        specific = directory / f"{DEV_VARS_FILE}.{config.env}"
        if specific.is_file():
            return specific
    plain = directory / DEV_VARS_FILE
    return plain if plain.is_file() else None


def read_dev_vars(path: Path) -> dict[str, str]:
    """A dotenv file's ``KEY=VALUE`` pairs; a line that is not one is an error naming the line."""
    from dotenv.parser import parse_stream

    where = display_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigValueError(where, [f"cannot read: {exc}"]) from None
    values: dict[str, str] = {}
    problems: list[str] = []
    for binding in parse_stream(io.StringIO(text)):
        if binding.error:
            # Never echo the line itself: it may hold a secret.
            problems.append(f"line {binding.original.line}: not KEY=VALUE")
        elif binding.key is not None:
            values[binding.key] = binding.value or ""
    if problems:
        raise ConfigValueError(where, problems)
    return values


def parse_var_options(items: Sequence[str]) -> dict[str, str]:
    """``--var KEY:VALUE`` options as a dict (the value may itself hold colons)."""
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition(":")
        if not sep or not key.strip():
            raise SettingsError(f"--var {item!r}: expected KEY:VALUE", source="--var")
        result[key.strip()] = value
    return result


def resolve_vars(
    config: WorkerConfig,
    cli_vars: Mapping[str, str] | None = None,
    env_files: Sequence[Path] = (),
) -> DevVars:
    """``[vars]`` < ``.dev.vars`` (secrets) < ``--var``, as ``wrangler dev`` layers them.

    ``env_files`` (``--env-file``, repeatable, as wrangler's) are read instead of ``.dev.vars``,
    each overriding the ones before it; their values are secrets too.
    """
    values: dict[str, Any] = dict(config.vars)
    secrets: set[str] = set()
    files = list(env_files)
    if not files:
        default = dev_vars_file(config)
        files = [default] if default is not None else []
    for path in files:
        if not path.is_file():
            raise SettingsError(
                f"--env-file {display_path(path)}: no such file", source="--env-file"
            )
        for key, value in read_dev_vars(path).items():
            values[key] = value
            secrets.add(key)
    source = files[-1] if files else None
    for key, value in (cli_vars or {}).items():
        values[key] = value
        secrets.discard(key)
    bound = {b.name for b in (*config.bindings, *config.external_bindings)}
    clash = sorted(bound & set(values))
    if clash:
        raise ConfigValueError(
            config.source_name,
            [f"{name} is both a Durable Object binding and a variable" for name in clash],
        )
    return DevVars(values, frozenset(secrets), source)
