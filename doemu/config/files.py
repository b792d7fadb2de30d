"""Finding and reading the wrangler config file: wrangler's search order, TOML / JSON(C) decoding.

The file-system side of the Worker configuration lives here: which file wrangler would use (and
the ``pyproject.toml`` next to it), reading it as UTF-8 and decoding it with syntax errors that
name line and column. The decoded data goes to :func:`~doemu.config.validate.parse_config`, so
the same rules apply to all three formats.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path
from typing import Any

from .environments import select_environment
from .jsonc import parse_jsonc
from .model import ConfigNotFoundError, ConfigSyntaxError, WorkerConfig, display_path
from .validate import parse_config

__all__ = ["CONFIG_FILE_NAMES", "find_config", "find_pyproject", "load_config"]


#: wrangler's own search order (``findWranglerConfig`` in workers-sdk).
CONFIG_FILE_NAMES: tuple[str, ...] = ("wrangler.json", "wrangler.jsonc", "wrangler.toml")


def find_config(start: Path | str | None = None) -> Path | None:
    """The nearest wrangler config file at or above ``start`` (default: the cwd), or ``None``.

    Inside one directory wrangler's precedence applies: ``wrangler.json`` > ``wrangler.jsonc`` >
    ``wrangler.toml``. (wrangler searches upward for each name separately, so a ``wrangler.json``
    in a parent beats a ``wrangler.toml`` next to you; doemu lets the nearest directory win.)
    """
    directory = Path(start if start is not None else Path.cwd()).absolute()
    if directory.is_file():
        directory = directory.parent
    for candidate_dir in (directory, *directory.parents):
        for name in CONFIG_FILE_NAMES:
            candidate = candidate_dir / name
            if candidate.is_file():
                return candidate
    return None


def find_pyproject(config: WorkerConfig | Path) -> Path | None:
    """The ``pyproject.toml`` next to the config file (where ``[tool.doemu]`` lives), if any."""
    directory = config.base_dir if isinstance(config, WorkerConfig) else config
    if directory.is_file():
        directory = directory.parent
    candidate = directory / "pyproject.toml"
    return candidate if candidate.is_file() else None


def load_config(
    path: Path | str | None = None, *, cwd: Path | str | None = None, env: str | None = None
) -> WorkerConfig:
    """Read and validate a wrangler config file.

    ``path`` may be a file, a directory to search (that directory only) or ``None`` to search
    from ``cwd`` (default: the process cwd) upward. ``env`` selects an ``[env.NAME]`` section
    (see :mod:`~doemu.config.environments`); the config's :attr:`~WorkerConfig.env` names it.
    """
    start = Path(cwd) if cwd is not None else Path.cwd()
    if path is None:
        found = find_config(start)
        if found is None:
            raise ConfigNotFoundError(
                f"no {_names_sentence()} found in {start.absolute()} or any parent directory; "
                "run `doemu init` to create a project here (or `doemu init DIR`), or cd into "
                "one, or pass --config PATH",
                start=start,
            )
        source = found
    else:
        source = Path(path)
        if not source.is_absolute():
            source = start / source
        if source.is_dir():
            in_dir = [source / name for name in CONFIG_FILE_NAMES if (source / name).is_file()]
            if not in_dir:
                raise ConfigNotFoundError(
                    f"no {_names_sentence()} in {source.absolute()}", start=source
                )
            source = in_dir[0]
        elif not source.is_file():
            raise ConfigNotFoundError(f"{display_path(source)}: no such file", start=source)
    source = source.absolute()
    where = display_path(source)
    try:
        text = source.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigSyntaxError(
            f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})",
            path=source,
            line=None,
            column=None,
        ) from None
    text = text.removeprefix("\ufeff")
    raw: Any
    if source.suffix == ".toml":
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            line, column = _toml_error_position(str(exc))
            raise ConfigSyntaxError(
                f"{where}: invalid TOML: {exc}", path=source, line=line, column=column
            ) from None
    elif source.suffix in (".json", ".jsonc"):
        # wrangler parses both .json and .jsonc as JSON with comments (parseJSONC).
        raw = parse_jsonc(text, source=source)
    else:
        raise ConfigNotFoundError(
            f"{where}: a wrangler config file must end in .toml, .json or .jsonc", start=source
        )
    if env is None:
        return parse_config(raw, source=source, text=text)
    if not isinstance(raw, dict):
        return parse_config(raw, source=source, text=text)  # refused there, as without --env
    merged, notes = select_environment(raw, env, where)
    # No text: line positions are found for the top-level bindings only, and would name the
    # wrong lines for an environment's.
    config = parse_config(merged, source=source)
    return dataclasses.replace(config, env=env, warnings=(*notes, *config.warnings))


def _names_sentence() -> str:
    return ", ".join(CONFIG_FILE_NAMES[:-1]) + f" or {CONFIG_FILE_NAMES[-1]}"


def _toml_error_position(message: str) -> tuple[int | None, int | None]:
    match = re.search(r"at line (\d+), column (\d+)", message)
    if match is None:
        return None, None
    return int(match.group(1)), int(match.group(2))
