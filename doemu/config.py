"""Reading ``wrangler.toml`` / ``wrangler.jsonc`` as wrangler reads it, plus doemu's own settings.

The worker configuration (:class:`WorkerConfig`) comes from the same file ``wrangler deploy`` uses,
so one file describes the Worker locally and on Cloudflare. It is searched for as wrangler does:
``wrangler.json``, then ``wrangler.jsonc``, then ``wrangler.toml``, in the start directory and then
in each parent (the nearest directory wins; inside one directory wrangler's order decides).

``[[migrations]]`` are replayed in order, with wrangler's own rules and error texts, to learn the
final set of Durable Object classes and which of them are SQLite-backed: only a class created by
``new_sqlite_classes`` gets ``ctx.storage.sql``.

What fails and what only warns follows wrangler: malformed values, duplicate binding names,
duplicate migration tags and a migration that cannot be replayed are errors (:class:`ConfigError`
subclasses, every problem listed, each naming the file and the key). Unknown keys, bindings whose
class has no migration, cross-script bindings and transfers are warnings, returned in
:attr:`WorkerConfig.warnings` for the CLI to print (nothing is sent to :mod:`warnings`).

doemu-only settings (:class:`DoemuSettings`) come from CLI flags, ``DOEMU_*`` environment variables
and ``[tool.doemu]`` in a ``pyproject.toml`` next to the config, in that order of precedence.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from .errors import ConfigError

__all__ = [
    "CONFIG_FILE_NAMES",
    "ClassInfo",
    "ConfigNotFoundError",
    "ConfigSyntaxError",
    "ConfigValueError",
    "DoemuSettings",
    "DurableObjectBinding",
    "MigrationError",
    "SettingsError",
    "WorkerConfig",
    "find_config",
    "find_pyproject",
    "load_config",
    "parse_config",
    "parse_idle_timeout",
    "parse_jsonc",
    "resolve_settings",
    "strip_jsonc",
]

#: wrangler's own search order (``findWranglerConfig`` in workers-sdk).
CONFIG_FILE_NAMES: tuple[str, ...] = ("wrangler.json", "wrangler.jsonc", "wrangler.toml")

# wrangler's rule for Worker names (``isValidName`` in workers-sdk validation-helpers.ts).
_WORKER_NAME = re.compile(r"[a-z0-9_][a-z0-9\-_]*")
_DOTTED_MODULE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


# --------------------------------------------------------------------------------------- errors


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


# ---------------------------------------------------------------------------------- dataclasses


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

    @property
    def main_is_file(self) -> bool:
        """True when ``main`` names a ``.py`` file (else it is a dotted module name)."""
        return _main_is_path(self.main)

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


Limits = Literal["local", "production"]


@dataclass(frozen=True)
class DoemuSettings:
    """doemu-only settings. :func:`resolve_settings` returns ``persist_to`` as an absolute path."""

    host: str = "127.0.0.1"
    port: int = 8787
    persist_to: Path = Path(".doemu/state")
    persist: bool = True
    idle_timeout: tuple[float, float] = (70.0, 140.0)
    reload: bool = False
    log_level: str = "info"
    admin_token: str | None = None
    limits: Limits = "local"
    max_live_objects: int | None = None


# -------------------------------------------------------------------------------- finding files


def display_path(path: Path) -> str:
    """``path`` relative to the cwd when it is below it, else absolute (for messages)."""
    absolute = path.absolute()
    try:
        return absolute.relative_to(Path.cwd().absolute()).as_posix()
    except ValueError:
        return str(absolute)


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


def load_config(path: Path | str | None = None, *, cwd: Path | str | None = None) -> WorkerConfig:
    """Read and validate a wrangler config file.

    ``path`` may be a file, a directory to search (that directory only) or ``None`` to search
    from ``cwd`` (default: the process cwd) upward.
    """
    start = Path(cwd) if cwd is not None else Path.cwd()
    if path is None:
        found = find_config(start)
        if found is None:
            raise ConfigNotFoundError(
                f"no {_names_sentence()} found in {start.absolute()} or any parent directory",
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
    return parse_config(raw, source=source, text=text)


def _names_sentence() -> str:
    return ", ".join(CONFIG_FILE_NAMES[:-1]) + f" or {CONFIG_FILE_NAMES[-1]}"


def _toml_error_position(message: str) -> tuple[int | None, int | None]:
    match = re.search(r"at line (\d+), column (\d+)", message)
    if match is None:
        return None, None
    return int(match.group(1)), int(match.group(2))


# ----------------------------------------------------------------------------------------- JSONC


def strip_jsonc(text: str) -> str:
    """Blank out ``//`` and ``/* */`` comments and trailing commas, respecting strings.

    Every removed character becomes a space (newlines are kept), so offsets, line and column
    numbers in the result are those of ``text``: JSON errors point at the right place.
    An unterminated block comment is left alone for the JSON parser to report.
    """
    out = list(text)
    length = len(text)
    pending_comma: int | None = None
    i = 0
    while i < length:
        char = text[i]
        if char == '"':
            i = _string_end(text, i)
            pending_comma = None
            continue
        if char == "/" and i + 1 < length and text[i + 1] in "/*":
            if text[i + 1] == "/":
                end = text.find("\n", i)
                end = length if end == -1 else end
            else:
                close = text.find("*/", i + 2)
                if close == -1:
                    i += 1
                    pending_comma = None
                    continue
                end = close + 2
            for j in range(i, end):
                if out[j] not in "\r\n":
                    out[j] = " "
            i = end
            continue
        if char == ",":
            pending_comma = i
        elif char in "]}":
            if pending_comma is not None:
                out[pending_comma] = " "
            pending_comma = None
        elif not char.isspace():
            pending_comma = None
        i += 1
    return "".join(out)


def _string_end(text: str, start: int) -> int:
    """Index just past the JSON string opening at ``start`` (``len(text)`` if unterminated)."""
    i = start + 1
    length = len(text)
    while i < length:
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == '"' or char == "\n":
            return i + 1
        i += 1
    return length


def parse_jsonc(text: str, *, source: Path | None = None) -> Any:
    """Parse JSON with comments and trailing commas (wrangler.jsonc). Errors name line:column."""
    try:
        return json.loads(strip_jsonc(text.removeprefix("\ufeff")))
    except json.JSONDecodeError as exc:
        where = display_path(source) if source is not None else "<json>"
        raise ConfigSyntaxError(
            f"{where}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}",
            path=source if source is not None else Path("<json>"),
            line=exc.lineno,
            column=exc.colno,
        ) from None


def _json_top_level_spans(stripped: str) -> dict[str, tuple[int, int, int]]:
    """``key -> (key offset, value start, value end)`` for the top-level object of valid JSON."""
    spans: dict[str, tuple[int, int, int]] = {}
    depth = 0
    last_key: tuple[str, int] | None = None
    current: tuple[str, int, int] | None = None
    i = 0
    length = len(stripped)
    while i < length:
        char = stripped[i]
        if char == '"':
            end = _string_end(stripped, i)
            if depth == 1 and current is None:
                try:
                    last_key = (str(json.loads(stripped[i:end])), i)
                except json.JSONDecodeError:
                    last_key = None
            i = end
            continue
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0 and current is not None:
                spans[current[0]] = (current[1], current[2], i)
                current = None
        elif char == ":" and depth == 1 and current is None and last_key is not None:
            current = (last_key[0], last_key[1], i + 1)
            last_key = None
        elif char == "," and depth == 1 and current is not None:
            spans[current[0]] = (current[1], current[2], i)
            current = None
        i += 1
    return spans


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


# ------------------------------------------------------------------------ cheap line positions

_TOML_HEADER = re.compile(r"""\s*\[\[?\s*([\w.\-"' ]+?)\s*\]\]?\s*(?:#.*)?""")
_TOML_CLASS_NAME = re.compile(r"""(?<![\w"'])["']?class_name["']?\s*=\s*(["'])(.*?)\1""")
_TOML_MAIN = re.compile(r"""\s*["']?main["']?\s*=""")
_JSON_CLASS_NAME = re.compile(r'"class_name"\s*:\s*"((?:[^"\\\n]|\\.)*)"')


def _toml_positions(text: str) -> tuple[list[tuple[int, str]], int | None]:
    """(line, value) of each top-level durable-object ``class_name``, and the ``main`` line."""
    class_lines: list[tuple[int, str]] = []
    main_line: int | None = None
    header: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _TOML_HEADER.fullmatch(line)
        if match is not None:
            header = re.sub(r"""\s|["']""", "", match.group(1))
            continue
        if header is None and main_line is None and _TOML_MAIN.match(line):
            main_line = number
        if header in (None, "durable_objects", "durable_objects.bindings"):
            for found in _TOML_CLASS_NAME.finditer(line):
                class_lines.append((number, found.group(2)))
    return class_lines, main_line


def _json_positions(text: str) -> tuple[list[tuple[int, str]], int | None]:
    stripped = strip_jsonc(text)
    spans = _json_top_level_spans(stripped)
    class_lines: list[tuple[int, str]] = []
    if "durable_objects" in spans:
        _, start, end = spans["durable_objects"]
        for found in _JSON_CLASS_NAME.finditer(stripped, start, end):
            try:
                value = str(json.loads(f'"{found.group(1)}"'))
            except json.JSONDecodeError:
                value = found.group(1)
            class_lines.append((_line_of(stripped, found.start()), value))
    main_line = _line_of(stripped, spans["main"][0]) if "main" in spans else None
    return class_lines, main_line


# ------------------------------------------------------------------------------------ validation


def _show(value: Any) -> str:
    """A short rendering of a config value for messages, spelled as in the file."""
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return f"{value.isoformat()} (a TOML date/time)"
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _main_is_path(main: str) -> bool:
    return main.endswith(".py") or "/" in main or "\\" in main


# Keys wrangler knows that need nothing locally: accepted silently.
_IGNORED_KEYS = frozenset(
    {
        "$schema", "account_id", "alias", "base_dir", "build", "compliance_region", "define",
        "dev", "find_additional_modules", "first_party_worker", "jsx_factory", "jsx_fragment",
        "keep_names", "keep_vars", "legacy_env", "limits", "logpush", "minify", "no_bundle",
        "observability", "placement", "preserve_file_names", "preview_urls", "python_modules",
        "route", "routes", "rules", "send_metrics", "tail_consumers", "tsconfig",
        "upload_source_maps", "usage_model", "workers_dev", "streaming_tail_consumers",
    }
)  # fmt: skip
# Keys wrangler knows whose bindings or features doemu does not emulate: warned about.
_UNSUPPORTED_KEYS = frozenset(
    {
        "ai", "analytics_engine_datasets", "assets", "browser", "cloudchamber", "containers",
        "d1_databases", "data_blobs", "dispatch_namespaces", "hyperdrive", "images",
        "kv_namespaces", "logfwdr", "mtls_certificates", "pages_build_output_dir", "pipelines",
        "queues", "r2_buckets", "ratelimits", "secrets_store_secrets", "send_email", "services",
        "site", "text_blobs", "triggers", "unsafe", "vectorize", "version_metadata",
        "wasm_modules", "worker_loaders", "workflows",
    }
)  # fmt: skip
_KNOWN_KEYS = frozenset(
    {
        "name", "main", "compatibility_date", "compatibility_flags", "durable_objects",
        "migrations", "exports", "vars", "env",
    }
)  # fmt: skip
_BINDING_KEYS = ("class_name", "environment", "name", "script_name")
_MIGRATION_KEYS = (
    "tag", "new_classes", "new_sqlite_classes", "renamed_classes", "deleted_classes",
    "transferred_classes",
)  # fmt: skip
_EXPORT_LIVE_STATES = (None, "created", "expecting-transfer")
_EXPORT_STATES = (*_EXPORT_LIVE_STATES, "deleted", "renamed", "transferred")


def _unexpected(where: str, keys: Iterable[str], known: Iterable[str]) -> str | None:
    """wrangler's ``validateAdditionalProperties`` warning, or ``None`` when all keys are known."""
    extra = [key for key in keys if key not in set(known)]
    if not extra:
        return None
    return f"Unexpected fields found in {where} field: " + ",".join(f'"{key}"' for key in extra)


class _Checker:
    """Collects every problem of one file so the user can fix them in one go."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.warnings: list[str] = []

    def string(self, value: Any, key: str, *, required: bool = False) -> str | None:
        if value is None:
            if required:
                self.errors.append(f"{key} is required")
            return None
        if not isinstance(value, str):
            self.errors.append(f"{key} must be a string, got {_show(value)}")
            return None
        return value

    def strings(self, value: Any, key: str) -> list[str] | None:
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            self.errors.append(f"{key} must be an array of strings, got {_show(value)}")
            return None
        return list(value)

    def table(self, value: Any, key: str) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.errors.append(f"{key} must be a table (an object), got {_show(value)}")
            return None
        return value

    def array_of_tables(self, value: Any, key: str) -> list[Any] | None:
        if value is None:
            return []
        if not isinstance(value, list):
            self.errors.append(f"{key} must be an array of tables, got {_show(value)}")
            return None
        return value


def parse_config(
    raw: Any,
    *,
    source: Path | None = None,
    base_dir: Path | None = None,
    text: str | None = None,
) -> WorkerConfig:
    """Validate already-parsed wrangler configuration data and build a :class:`WorkerConfig`.

    ``base_dir`` defaults to the directory of ``source`` (else the cwd); ``text`` is the file's
    text, used only to find line numbers. Raises :class:`ConfigValueError` listing every problem.
    """
    if base_dir is None:
        base_dir = source.parent if source is not None else Path.cwd()
    base_dir = base_dir.absolute()
    where = display_path(source) if source is not None else "<config>"
    file_label = source.name if source is not None else "wrangler.toml"
    check = _Checker()
    if not isinstance(raw, dict):
        raise ConfigValueError(
            where, [f"the top level must be a table (an object), got {_show(raw)}"]
        )

    name = _check_name(check, raw.get("name"))
    main = _check_main(check, raw.get("main"))
    compatibility_date = _check_compatibility_date(check, raw.get("compatibility_date"))
    flags = check.strings(raw.get("compatibility_flags"), "compatibility_flags")
    if main is not None and _main_is_path(main) and flags is not None:
        if "python_workers" not in flags:
            check.warnings.append(
                "The `python_workers` compatibility flag is required to use Python. "
                "(wrangler refuses to deploy a .py main without it; doemu runs anyway)"
            )
    bindings, external = _check_bindings(check, raw.get("durable_objects"), name)
    vars_ = _check_vars(check, raw.get("vars"))
    _check_unique_binding_names(check, bindings + external, vars_)

    if "migrations" in raw and "exports" in raw:
        check.errors.append(
            "exports and migrations cannot both be set: they are mutually exclusive "
            "(move the migrations history to exports, or remove exports)"
        )
    tags: list[str] = []
    classes: dict[str, ClassInfo] = {}
    migrations = _check_migrations(check, raw.get("migrations"))
    if not check.errors:
        if migrations:
            tags, classes = _replay_migrations(where, check, migrations)
        elif "exports" in raw:
            classes = _check_exports(check, raw["exports"])

    _warn_about_keys(check, raw)
    if check.errors:
        raise ConfigValueError(where, check.errors)

    _warn_unmigrated(check, bindings, classes, has_history=bool(migrations) or "exports" in raw,
                     file_label=file_label)  # fmt: skip

    # Cheap positions: the loader names the config line of a class_name in import errors.
    main_line: int | None = None
    if text is not None:
        is_toml = source is None or source.suffix == ".toml"
        positions, main_line = _toml_positions(text) if is_toml else _json_positions(text)
        all_bindings = sorted(bindings + external, key=lambda b: b.index)
        if len(positions) == len(all_bindings):
            located = {
                b.index: line
                for b, (line, value) in zip(all_bindings, positions, strict=True)
                if value == b.class_name
            }
            bindings = [_with_line(b, located.get(b.index)) for b in bindings]
            external = [_with_line(b, located.get(b.index)) for b in external]

    assert name is not None and main is not None
    return WorkerConfig(
        name=name,
        main=main,
        base_dir=base_dir,
        compatibility_date=compatibility_date,
        compatibility_flags=tuple(flags or ()),
        bindings=tuple(bindings),
        classes=classes,
        vars=vars_,
        source=source,
        warnings=tuple(check.warnings),
        main_line=main_line,
        external_bindings=tuple(external),
        migration_tags=tuple(tags),
    )


def _with_line(binding: DurableObjectBinding, line: int | None) -> DurableObjectBinding:
    return DurableObjectBinding(
        name=binding.name,
        class_name=binding.class_name,
        line=line,
        index=binding.index,
        script_name=binding.script_name,
    )


def _check_name(check: _Checker, value: Any) -> str | None:
    if value is None or value == "":
        check.errors.append(
            'name is required (the Worker name; Durable Object ids derive from "<name>-<Class>")'
        )
        return None
    if not isinstance(value, str) or _WORKER_NAME.fullmatch(value) is None:
        # wrangler's text (isValidName).
        check.errors.append(
            'Expected "name" to be of type string, alphanumeric and lowercase with dashes only '
            f"but got {_show(value)}."
        )
        return None
    return value


def _check_main(check: _Checker, value: Any) -> str | None:
    main = check.string(value, "main")
    if value is None:
        check.errors.append(
            'main is required: the entry module, e.g. main = "src/entry.py" (relative to the '
            "config file) or a dotted module name"
        )
        return None
    if main is None:
        return None
    if _main_is_path(main):
        path = Path(main)
        if path.suffix != ".py":
            check.errors.append(f"main must be a .py file or a dotted module, got {_show(main)}")
            return None
        if not path.stem.isidentifier():
            check.errors.append(
                f"main {_show(main)}: {path.stem!r} is not a valid Python module name "
                "(use letters, digits and underscores)"
            )
            return None
        return main
    if ":" in main:
        check.errors.append(
            f"main {_show(main)} must be a module, not '<module>:<attribute>': the entry point "
            "is always the class named Default in it"
        )
        return None
    if _DOTTED_MODULE.fullmatch(main) is None:
        check.errors.append(f"main must be a .py file or a dotted module, got {_show(main)}")
        return None
    return main


def _check_compatibility_date(check: _Checker, value: Any) -> str | None:
    if value is None:
        check.warnings.append(
            "no compatibility_date is set; wrangler requires one to deploy "
            '(add e.g. compatibility_date = "2025-01-01")'
        )
        return None
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = value.isoformat()  # an unquoted TOML date
    if not isinstance(value, str) or _DATE.fullmatch(value) is None:
        check.errors.append(f'compatibility_date must be a "YYYY-MM-DD" string, got {_show(value)}')
        return None
    try:
        day = dt.date.fromisoformat(value)
    except ValueError:
        check.errors.append(f"compatibility_date {_show(value)} is not a calendar date")
        return None
    # "today" where it is latest (UTC+14), so no timezone is told its own date is in the future.
    latest_today = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=14)).date()
    if day > latest_today:
        check.errors.append(f'Compatibility date "{value}" is in the future and unsupported')
        return None
    return value


def _check_bindings(
    check: _Checker, value: Any, worker_name: str | None
) -> tuple[list[DurableObjectBinding], list[DurableObjectBinding]]:
    local: list[DurableObjectBinding] = []
    external: list[DurableObjectBinding] = []
    if value is None:
        return local, external
    table = check.table(value, "durable_objects")
    if table is None:
        return local, external
    if "bindings" not in table:
        check.errors.append('durable_objects is missing the required "bindings" array')
        return local, external
    warning = _unexpected("durable_objects", table, ("bindings",))
    if warning:
        check.warnings.append(warning)
    entries = check.array_of_tables(table["bindings"], "durable_objects.bindings")
    for index, entry in enumerate(entries or []):
        key = f"durable_objects.bindings[{index}]"
        item = check.table(entry, key)
        if item is None:
            continue
        warning = _unexpected(key, item, _BINDING_KEYS)
        if warning:
            check.warnings.append(warning)
        name = check.string(item.get("name"), f"{key}.name", required=True)
        class_name = check.string(item.get("class_name"), f"{key}.class_name", required=True)
        script_name = check.string(item.get("script_name"), f"{key}.script_name")
        check.string(item.get("environment"), f"{key}.environment")
        if "environment" in item and "script_name" not in item:
            check.errors.append(
                f'{key}: binding should have a "script_name" field if "environment" is present.'
            )
        if name is None or class_name is None:
            continue
        if class_name and not class_name.isidentifier():
            check.errors.append(
                f"{key}.class_name must be a Python class name, got {_show(class_name)}"
            )
            continue
        binding = DurableObjectBinding(name, class_name, None, index, script_name)
        if script_name is not None and script_name != worker_name:
            check.warnings.append(
                f'{key} "{name}" has script_name "{script_name}": bindings to Durable Objects of '
                f"another Worker are not supported locally; env.{name} will not be available"
            )
            external.append(binding)
        else:
            local.append(binding)
    return local, external


def _check_vars(check: _Checker, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    table = check.table(value, "vars")
    if table is None:
        return {}
    result: dict[str, Any] = {}
    for key, item in table.items():
        problem = _json_value_problem(item)
        if problem is not None:
            check.errors.append(
                f"vars.{key} must be a string, number, boolean or JSON object, got {problem}"
            )
            continue
        result[key] = item
    return result


def _json_value_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a JSON binding, or ``None`` when it can."""
    if value is None or isinstance(value, str | bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else _show(value)
    if isinstance(value, list):
        for item in value:
            problem = _json_value_problem(item)
            if problem is not None:
                return problem
        return None
    if isinstance(value, dict):
        for item in value.values():
            problem = _json_value_problem(item)
            if problem is not None:
                return problem
        return None
    return _show(value)


def _check_unique_binding_names(
    check: _Checker, bindings: Sequence[DurableObjectBinding], vars_: Mapping[str, Any]
) -> None:
    # wrangler's texts (validateBindingsHaveUniqueNames).
    seen: dict[str, int] = {}
    for binding in bindings:
        seen[binding.name] = seen.get(binding.name, 0) + 1
    for name, count in seen.items():
        if name in vars_:
            check.errors.append(
                f"{name} assigned to Durable Object and Environment Variable bindings."
            )
        if count > 1:
            check.errors.append(f"{name} assigned to multiple Durable Object bindings.")


@dataclass(frozen=True)
class _Migration:
    index: int
    tag: str
    new_classes: list[str]
    new_sqlite_classes: list[str]
    renamed_classes: list[tuple[str, str]]
    deleted_classes: list[str]
    transferred_classes: list[tuple[str, str, str]]


def _check_migrations(check: _Checker, value: Any) -> list[_Migration]:
    entries = check.array_of_tables(value, "migrations")
    result: list[_Migration] = []
    seen_tags: dict[str, int] = {}
    for index, entry in enumerate(entries or []):
        key = f"migrations[{index}]"
        item = check.table(entry, key)
        if item is None:
            continue
        warning = _unexpected(key, item, _MIGRATION_KEYS)
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
            _Migration(
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
    check: _Checker, value: Any, key: str, fields: tuple[str, ...]
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
            f'Expected "{key}" to be an array of "{shape}" objects but got {_show(value)}.'
        )
        return None
    return [tuple(str(item[name]) for name in fields) for item in value]


def _replay_migrations(
    where: str, check: _Checker, migrations: Sequence[_Migration]
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


def _check_exports(check: _Checker, value: Any) -> dict[str, ClassInfo]:
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
                f"renamed or transferred, got {_show(state)}"
            )
            continue
        if state in _EXPORT_LIVE_STATES:
            classes[name] = ClassInfo(name, item.get("storage") == "sqlite")
    return classes


def _warn_about_keys(check: _Checker, raw: Mapping[str, Any]) -> None:
    unknown = [key for key in raw if key not in _KNOWN_KEYS | _IGNORED_KEYS | _UNSUPPORTED_KEYS]
    if unknown:
        warning = _unexpected("top-level", unknown, ())
        assert warning is not None
        check.warnings.append(warning)
    for key in raw:
        if key in _UNSUPPORTED_KEYS:
            check.warnings.append(f'"{key}" is not emulated by doemu and is ignored')
    if "env" in raw:
        check.warnings.append(
            "[env.*] sections are ignored: doemu always uses the top-level configuration"
        )


def _warn_unmigrated(
    check: _Checker,
    bindings: Sequence[DurableObjectBinding],
    classes: Mapping[str, ClassInfo],
    *,
    has_history: bool,
    file_label: str,
) -> None:
    missing = [b for b in bindings if b.class_name not in classes]
    if not missing:
        return
    if not has_history:
        names = list(dict.fromkeys(b.class_name for b in missing))
        # wrangler's warning (warnIfDurableObjectsHaveNoMigrations), naming the real file.
        check.warnings.append(
            f"In {file_label}, you have configured [durable_objects] exported by this Worker "
            f"({', '.join(names)}), but no [migrations] for them. This may not work as expected "
            f"until you add a [migrations] section to your {file_label}. Add this configuration "
            f'to your {file_label}: [[migrations]] tag = "v1" new_sqlite_classes = '
            f"[{', '.join(json.dumps(n) for n in names)}]. doemu runs them without storage.sql."
        )
        return
    for binding in missing:
        check.warnings.append(
            f'{binding.key} class_name "{binding.class_name}" has no migration: add it to '
            "new_sqlite_classes in a new [[migrations]] entry; until then doemu runs it "
            "without storage.sql (key-value storage only), as wrangler dev does"
        )


# -------------------------------------------------------------------------------------- settings

_SETTING_NAMES = (
    "host", "port", "persist_to", "persist", "idle_timeout", "reload", "log_level",
    "admin_token", "limits", "max_live_objects",
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
        expected = "a directory path"
        if isinstance(value, str | Path) and str(value).strip():
            path = Path(str(value).strip()).expanduser()
            result = path if path.is_absolute() else (relative_to / path)
    elif name in ("persist", "reload"):
        expected = "true or false (also 1/0, yes/no, on/off)"
        result = _bool(value)
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
    else:  # pragma: no cover - names are checked by the callers
        raise AssertionError(name)
    if result is None:
        shown = repr(value) if isinstance(value, str) else _show(value)
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
            f"{where}: [tool.doemu] must be a table, got {_show(section)}", source=where
        )
    return section


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
            if name not in _SETTING_NAMES:
                raise SettingsError(
                    f"{where}: [tool.doemu] has unknown key {key!r}; expected one of "
                    + ", ".join(_SETTING_NAMES),
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
    return DoemuSettings(**values)
