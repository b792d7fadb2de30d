"""The types a wrangler config file turns into, and the errors reading one raises.

Every other module of :mod:`doemu.config` produces these (files, validation, migrations) and the
loader and the CLI consume them, so they live in a module that imports no other module of the
package. :func:`display_path` and :func:`main_is_path` sit here because :class:`WorkerConfig`
itself needs them (to name its file in messages, to tell a ``.py`` main from a dotted module).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .bindings import WorkerResources

__all__ = [
    "ClassInfo",
    "ConfigNotFoundError",
    "ConfigSyntaxError",
    "ConfigValueError",
    "DurableObjectBinding",
    "MigrationError",
    "SettingsError",
    "WorkerConfig",
    "display_path",
    "main_is_path",
]


# ------------------------------------------------------------------------------------------- errors


class ConfigNotFoundError(ConfigError):
    """No configuration file was found (or the given path does not exist)."""

    def __init__(self, message: str, *, start: Path) -> None:
        super().__init__(message)
        self.start = start


class ConfigSyntaxError(ConfigError):
    """The file is not valid TOML / JSON(C)."""

    def __init__(self, message: str, *, path: Path, line: int | None, column: int | None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line
        self.column = column


class ConfigValueError(ConfigError):
    """One or more keys hold invalid values. ``problems`` lists them without the file prefix."""

    def __init__(self, where: str, problems: Sequence[str]) -> None:
        super().__init__("\n".join(f"{where}: {problem}" for problem in problems))
        self.where = where
        self.problems = tuple(problems)


class MigrationError(ConfigValueError):
    """``[[migrations]]`` cannot be replayed (wrangler's ``Cannot apply … migration`` errors)."""


class SettingsError(ConfigError):
    """A doemu setting (CLI flag, ``DOEMU_*`` variable or ``[tool.doemu]`` key) is invalid."""

    def __init__(self, message: str, *, source: str) -> None:
        super().__init__(message)
        self.source = source


# -------------------------------------------------------------------------------------- dataclasses


@dataclass(frozen=True)
class DurableObjectBinding:
    """One ``[[durable_objects.bindings]]`` entry: ``env.<name>`` is a namespace of ``class_name``.

    ``line`` is the 1-based line of the entry's ``class_name`` in the config file (``None`` when it
    could not be found cheaply), so import errors can point at it. ``index`` is the position in
    ``durable_objects.bindings``.
    """

    name: str
    class_name: str
    line: int | None = None
    index: int = 0
    script_name: str | None = None

    @property
    def key(self) -> str:
        """The config key of this entry, e.g. ``durable_objects.bindings[1]``."""
        return f"durable_objects.bindings[{self.index}]"


@dataclass(frozen=True)
class ClassInfo:
    """A Durable Object class as the migrations (or ``exports``) leave it.

    ``sql`` is true only for classes created by ``new_sqlite_classes`` (or ``storage = "sqlite"``
    exports); a rename keeps the storage kind. ``tag`` is the migration that created it,
    ``renamed_from`` its earlier names, oldest first (Cloudflare keeps the data across a rename).
    """

    name: str
    sql: bool
    tag: str | None = None
    renamed_from: tuple[str, ...] = ()
    transferred: bool = False


@dataclass(frozen=True)
class WorkerConfig:
    """The Worker as described by its wrangler configuration file."""

    name: str
    main: str
    base_dir: Path
    compatibility_date: str | None = None
    compatibility_flags: tuple[str, ...] = ()
    bindings: tuple[DurableObjectBinding, ...] = ()
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    vars: dict[str, Any] = field(default_factory=dict)
    source: Path | None = None
    warnings: tuple[str, ...] = ()
    main_line: int | None = None
    external_bindings: tuple[DurableObjectBinding, ...] = ()
    migration_tags: tuple[str, ...] = ()
    #: The ``[env.NAME]`` section selected with ``--env`` (``None``: the top level).
    env: str | None = None
    #: KV, D1, R2, services, crons and assets (see :mod:`doemu.config.bindings`).
    resources: WorkerResources = field(default_factory=WorkerResources)

    @property
    def main_is_file(self) -> bool:
        """True when ``main`` names a ``.py`` file (else it is a dotted module name)."""
        return main_is_path(self.main)

    @property
    def main_path(self) -> Path | None:
        """The absolute path of the main file, or ``None`` for a dotted module ``main``."""
        if not self.main_is_file:
            return None
        return Path(os.path.normpath(self.base_dir / self.main))

    @property
    def main_module(self) -> str:
        """The module name the main code is imported under (``entry`` for ``src/entry.py``)."""
        path = self.main_path
        return path.stem if path is not None else self.main

    @property
    def source_name(self) -> str:
        """How messages name the config file (relative to the cwd when below it)."""
        return display_path(self.source) if self.source is not None else "<config>"

    def where(self, line: int | None = None) -> str:
        """``wrangler.toml`` or ``wrangler.toml:14``: the prefix of messages about this config."""
        return self.source_name if line is None else f"{self.source_name}:{line}"

    def unique_key(self, binding: DurableObjectBinding | str) -> str:
        """workerd's namespace key ``f"{name}-{ClassName}"`` for a binding or a class name."""
        class_name = binding.class_name if isinstance(binding, DurableObjectBinding) else binding
        return f"{self.name}-{class_name}"

    def binding(self, name: str) -> DurableObjectBinding:
        """The local binding called ``name`` (``KeyError`` when there is none)."""
        for binding in self.bindings:
            if binding.name == name:
                return binding
        raise KeyError(name)

    def sql_enabled(self, class_name: str) -> bool:
        """Whether objects of ``class_name`` get ``storage.sql`` (``new_sqlite_classes`` only)."""
        info = self.classes.get(class_name)
        return info is not None and info.sql


# ------------------------------------------------------------------------------------------- naming


def display_path(path: Path) -> str:
    """``path`` relative to the cwd when it is below it, else absolute (for messages)."""
    absolute = path.absolute()
    try:
        return absolute.relative_to(Path.cwd().absolute()).as_posix()
    except ValueError:
        return str(absolute)


def main_is_path(main: str) -> bool:
    """Whether ``main`` is a file path (``.py`` or a separator), not a dotted module name."""
    return main.endswith(".py") or "/" in main or "\\" in main
