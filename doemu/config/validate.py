"""Validating decoded wrangler data into a :class:`~doemu.config.model.WorkerConfig`.

:func:`parse_config` takes the plain data of any of the three file formats (or a dict built in
code) and applies wrangler's rules, and its error texts where it has them, key by key; what fails
and what only warns follows wrangler. The ``[[migrations]]`` / ``exports`` history is checked
and replayed by :mod:`doemu.config.migrations`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .bindings import EMULATED_KEYS, WorkerResources, check_resources
from .checker import Checker, show, unexpected
from .migrations import check_exports, check_migrations, replay_migrations, warn_unmigrated
from .model import (
    ClassInfo,
    ConfigValueError,
    DurableObjectBinding,
    WorkerConfig,
    display_path,
    main_is_path,
)
from .positions import json_positions, toml_positions

__all__ = ["parse_config"]


# wrangler's rule for Worker names (``isValidName`` in workers-sdk validation-helpers.ts).
_WORKER_NAME = re.compile(r"[a-z0-9_][a-z0-9\-_]*")
_DOTTED_MODULE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


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
    check = Checker()
    if not isinstance(raw, dict):
        raise ConfigValueError(
            where, [f"the top level must be a table (an object), got {show(raw)}"]
        )

    name = _check_name(check, raw.get("name"))
    main = _check_main(check, raw.get("main"))
    compatibility_date = _check_compatibility_date(check, raw.get("compatibility_date"))
    flags = check.strings(raw.get("compatibility_flags"), "compatibility_flags")
    if main is not None and main_is_path(main) and flags is not None:
        if "python_workers" not in flags:
            check.warnings.append(
                "The `python_workers` compatibility flag is required to use Python. "
                "(wrangler refuses to deploy a .py main without it; doemu runs anyway)"
            )
    bindings, external = _check_bindings(check, raw.get("durable_objects"), name)
    vars_ = _check_vars(check, raw.get("vars"))
    resources = check_resources(check, raw, base_dir=base_dir, worker_name=name)
    _check_unique_binding_names(check, bindings + external, vars_, resources)

    if "migrations" in raw and "exports" in raw:
        check.errors.append(
            "exports and migrations cannot both be set: they are mutually exclusive "
            "(move the migrations history to exports, or remove exports)"
        )
    tags: list[str] = []
    classes: dict[str, ClassInfo] = {}
    migrations = check_migrations(check, raw.get("migrations"))
    if not check.errors:
        if migrations:
            tags, classes = replay_migrations(where, check, migrations)
        elif "exports" in raw:
            classes = check_exports(check, raw["exports"])

    _warn_about_keys(check, raw)
    if check.errors:
        raise ConfigValueError(where, check.errors)

    has_history = bool(migrations) or "exports" in raw
    warn_unmigrated(check, bindings, classes, has_history=has_history, file_label=file_label)

    # Cheap positions: the loader names the config line of a class_name in import errors.
    main_line: int | None = None
    if text is not None:
        is_toml = source is None or source.suffix == ".toml"
        positions, main_line = toml_positions(text) if is_toml else json_positions(text)
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
        resources=resources,
    )


def _with_line(binding: DurableObjectBinding, line: int | None) -> DurableObjectBinding:
    return dataclasses.replace(binding, line=line)


def _check_name(check: Checker, value: Any) -> str | None:
    if value is None or value == "":
        check.errors.append(
            'name is required (the Worker name; Durable Object ids derive from "<name>-<Class>")'
        )
        return None
    if not isinstance(value, str) or _WORKER_NAME.fullmatch(value) is None:
        # wrangler's text (isValidName).
        check.errors.append(
            'Expected "name" to be of type string, alphanumeric and lowercase with dashes only '
            f"but got {show(value)}."
        )
        return None
    return value


def _check_main(check: Checker, value: Any) -> str | None:
    main = check.string(value, "main")
    if value is None:
        check.errors.append(
            'main is required: the entry module, e.g. main = "src/entry.py" (relative to the '
            "config file) or a dotted module name"
        )
        return None
    if main is None:
        return None
    if main_is_path(main):
        path = Path(main)
        if path.suffix != ".py":
            check.errors.append(f"main must be a .py file or a dotted module, got {show(main)}")
            return None
        if not path.stem.isidentifier():
            check.errors.append(
                f"main {show(main)}: {path.stem!r} is not a valid Python module name "
                "(use letters, digits and underscores)"
            )
            return None
        return main
    if ":" in main:
        check.errors.append(
            f"main {show(main)} must be a module, not '<module>:<attribute>': the entry point "
            "is always the class named Default in it"
        )
        return None
    if _DOTTED_MODULE.fullmatch(main) is None:
        check.errors.append(f"main must be a .py file or a dotted module, got {show(main)}")
        return None
    return main


def _check_compatibility_date(check: Checker, value: Any) -> str | None:
    if value is None:
        check.warnings.append(
            "no compatibility_date is set; wrangler requires one to deploy "
            '(add e.g. compatibility_date = "2025-01-01")'
        )
        return None
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = value.isoformat()  # an unquoted TOML date
    if not isinstance(value, str) or _DATE.fullmatch(value) is None:
        check.errors.append(f'compatibility_date must be a "YYYY-MM-DD" string, got {show(value)}')
        return None
    try:
        day = dt.date.fromisoformat(value)
    except ValueError:
        check.errors.append(f"compatibility_date {show(value)} is not a calendar date")
        return None
    # "today" where it is latest (UTC+14), so no timezone is told its own date is in the future.
    latest_today = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=14)).date()
    if day > latest_today:
        check.errors.append(f'Compatibility date "{value}" is in the future and unsupported')
        return None
    return value


def _check_bindings(
    check: Checker, value: Any, worker_name: str | None
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
    warning = unexpected("durable_objects", table, ("bindings",))
    if warning:
        check.warnings.append(warning)
    entries = check.array_of_tables(table["bindings"], "durable_objects.bindings")
    for index, entry in enumerate(entries or []):
        key = f"durable_objects.bindings[{index}]"
        item = check.table(entry, key)
        if item is None:
            continue
        warning = unexpected(key, item, _BINDING_KEYS)
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
                f"{key}.class_name must be a Python class name, got {show(class_name)}"
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


def _check_vars(check: Checker, value: Any) -> dict[str, Any]:
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
        return None if math.isfinite(value) else show(value)
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
    return show(value)


def _check_unique_binding_names(
    check: Checker,
    bindings: Sequence[DurableObjectBinding],
    vars_: Mapping[str, Any],
    resources: WorkerResources,
) -> None:
    # wrangler's texts (validateBindingsHaveUniqueNames).
    kinds: dict[str, list[str]] = {}
    for binding in bindings:
        kinds.setdefault(binding.name, []).append("Durable Object")
    for name, kind in resources.names():
        kinds.setdefault(name, []).append(kind)
    for name in vars_:
        if name in kinds:
            kinds[name].append("Environment Variable")
    for name, found in kinds.items():
        distinct = list(dict.fromkeys(found))
        if len(distinct) > 1:
            listed = ", ".join(distinct[:-1]) + f" and {distinct[-1]}"
            check.errors.append(f"{name} assigned to {listed} bindings.")
        elif len(found) > 1:
            check.errors.append(f"{name} assigned to multiple {distinct[0]} bindings.")


def _warn_about_keys(check: Checker, raw: Mapping[str, Any]) -> None:
    unknown = [key for key in raw if key not in _KNOWN_KEYS | _IGNORED_KEYS | _UNSUPPORTED_KEYS]
    if unknown:
        warning = unexpected("top-level", unknown, (), _KNOWN_KEYS | _UNSUPPORTED_KEYS)
        assert warning is not None
        check.warnings.append(warning)
    for key in raw:
        if key in _UNSUPPORTED_KEYS and key not in EMULATED_KEYS:
            check.warnings.append(f'"{key}" is not emulated by doemu and is ignored')
    if "env" in raw:
        check.warnings.append(
            "[env.*] sections are defined but no --env was given: the top-level configuration "
            "is used (doemu dev --env NAME selects one)"
        )
