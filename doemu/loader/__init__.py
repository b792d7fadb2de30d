"""Importing the Worker's ``main`` module and finding its Durable Object classes.

:func:`load_worker` installs doemu's Cloudflare shims (``workers``, ``js``, ``pyodide.ffi``),
imports ``main`` and collects:

* the public (no leading ``_``) subclasses of ``workers.DurableObject`` that ``main`` defines or
  imports (base classes of the ``workers``, ``doemu`` and ``agents`` packages only when a binding
  names them), and
* the entry point: a class ``Default`` subclassing ``workers.WorkerEntrypoint`` (optional).

A binding's ``class_name`` is looked up in ``main`` first and then in the entry-point group
``doemu.durable_objects`` (entry-point name → ``"module:Class"``), which is how an installed
package ships agent classes::

    [project.entry-points."doemu.durable_objects"]
    Researcher = "mypkg.agents:Researcher"

Import failures are reported as uvicorn's importer reports them, prefixed with the config file
and line the reference came from: a malformed ``module:attr``, a module that does not exist, an
attribute that does not. When a module exists but raises ``ImportError`` /
``ModuleNotFoundError`` / ``SyntaxError`` itself, that original exception propagates unchanged, so
the traceback points into the user's own file.

**Importing twice.** By default (``reload=True``) each call first forgets the user modules the
previous call imported (``sys.modules`` entries whose files live in the previous project's
directories) and the ``sys.path`` entries it added, then imports everything afresh: sibling
modules of a new project can never be served stale from an old one. Installed packages
(plugins, libraries) are never dropped. Only one worker is "current" per process; the classes of
an earlier load keep working, but their project's modules are no longer importable by name.
``reload=False`` reuses modules already imported (a second load of the same main is then cheap).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from ..config import ClassInfo, DurableObjectBinding, WorkerConfig
from ..errors import LoaderError
from .entropy import HINT as ENTROPY_HINT
from .entropy import entropy_refused, is_entropy_refusal
from .importer import (
    AttributeNotFoundError,
    ImportStringError,
    ModuleImportError,
    import_from_string,
)
from .modules import (
    FRAMEWORK_PACKAGES,
    MainNotFoundError,
    ModuleNameConflictError,
    add_paths,
    import_main,
    record_user_modules,
    unload_user_modules,
)
from .plugins import (
    ENTRY_POINT_GROUP,
    ClassNotFoundError,
    dist_label,
    find_entry_point,
    load_entry_point,
)
from .report import user_traceback

__all__ = [
    "ENTROPY_HINT",
    "ENTRY_POINT_GROUP",
    "AttributeNotFoundError",
    "ClassNotFoundError",
    "EntrypointError",
    "ImportStringError",
    "LoadedClass",
    "LoadedWorker",
    "MainNotFoundError",
    "ModuleImportError",
    "ModuleNameConflictError",
    "NotADurableObjectError",
    "describe_classes",
    "import_from_string",
    "is_entropy_refusal",
    "load_worker",
    "unload_user_modules",
    "user_traceback",
]

# --------------------------------------------------------------------------------------- errors


class NotADurableObjectError(LoaderError, TypeError):
    """The object a binding names is not a subclass of ``workers.DurableObject``."""


class EntrypointError(LoaderError, TypeError):
    """``Default`` exists in ``main`` but is not a ``workers.WorkerEntrypoint`` subclass."""


# ---------------------------------------------------------------------------------- dataclasses


@dataclass(frozen=True)
class LoadedClass:
    """A Durable Object class ready to run.

    ``origin`` says where it came from: ``"main module src/entry.py"`` or
    ``"plugin mypkg 1.2.0 (mypkg.agents:Researcher)"``. ``bindings`` are the ``env`` names bound
    to it (empty for a class only exported by ``main``).
    """

    name: str
    cls: type
    origin: str
    sql: bool
    bindings: tuple[str, ...] = ()


@dataclass(frozen=True)
class LoadedWorker:
    """The imported Worker: its main module, entry class and Durable Object classes."""

    config: WorkerConfig
    module: ModuleType
    entry: type | None
    classes: dict[str, LoadedClass] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def class_for(self, binding: DurableObjectBinding | str) -> LoadedClass:
        """The class behind a binding (or binding name)."""
        if isinstance(binding, str):
            binding = self.config.binding(binding)
        return self.classes[binding.class_name]


def describe_classes(loaded: LoadedWorker) -> list[dict[str, Any]]:
    """One row per class for ``doemu classes``: name, bindings, origin, sql, unique_key."""
    return [
        {
            "name": item.name,
            "bindings": list(item.bindings),
            "origin": item.origin,
            "sql": item.sql,
            "unique_key": loaded.config.unique_key(item.name),
        }
        for item in sorted(loaded.classes.values(), key=lambda c: c.name)
    ]


# ------------------------------------------------------------------------------------- loading


def load_worker(config: WorkerConfig, *, reload: bool = True) -> LoadedWorker:
    """Import ``config.main`` and resolve every Durable Object binding to a class.

    See the module docstring for what ``reload`` does and for the errors raised.
    """
    from doemu.compat import install_modules
    from doemu.compat.boundary import is_strict

    install_modules()
    workers = sys.modules["workers"]
    durable_object: type = workers.DurableObject
    worker_entrypoint: type = workers.WorkerEntrypoint

    if reload:
        unload_user_modules()
    main_path = config.main_path
    user_dirs = [config.base_dir]
    if main_path is not None and main_path.parent != config.base_dir:
        user_dirs.insert(0, main_path.parent)
    roots = add_paths(user_dirs)
    before = set(sys.modules)
    try:
        with entropy_refused(is_strict()):
            module = import_main(config, reuse=not reload)
    finally:
        record_user_modules(before, roots, config.main_module)

    main_label = _main_label(config)
    found: dict[str, type] = {}
    for attr, obj in vars(module).items():
        if attr.startswith("_") or not isinstance(obj, type) or obj is durable_object:
            continue
        if issubclass(obj, durable_object) and not _is_framework_class(obj):
            found[attr] = obj
    classes: dict[str, LoadedClass] = {
        name: _loaded(config, name, cls, f"main module {main_label}") for name, cls in found.items()
    }

    entry = vars(module).get("Default")
    if entry is not None and not (isinstance(entry, type) and issubclass(entry, worker_entrypoint)):
        raise EntrypointError(
            f"{config.where(config.main_line)}: Default in {main_label} must be a subclass of "
            f"workers.WorkerEntrypoint, got {_describe(entry)}"
        )

    warnings: list[str] = []
    for binding in config.bindings:
        if binding.class_name not in classes:
            with entropy_refused(is_strict()):  # a plugin's modules load at global scope too
                classes[binding.class_name] = _resolve_binding(
                    config, binding, module, durable_object, main_label
                )
    for name, info in config.classes.items():
        if name not in classes:
            warnings.append(_unexported_warning(config, info, main_label))

    bound: dict[str, list[str]] = {}
    for binding in config.bindings:
        bound.setdefault(binding.class_name, []).append(binding.name)
    classes = {
        name: LoadedClass(item.name, item.cls, item.origin, item.sql, tuple(bound.get(name, ())))
        for name, item in classes.items()
    }
    return LoadedWorker(config, module, entry, classes, tuple(warnings))


def _main_label(config: WorkerConfig) -> str:
    if config.main_path is None:
        return config.main
    return Path(os.path.normpath(config.main)).as_posix()


def _is_framework_class(cls: type) -> bool:
    top = cls.__module__.partition(".")[0]
    return top in FRAMEWORK_PACKAGES


def _loaded(config: WorkerConfig, name: str, cls: type, origin: str) -> LoadedClass:
    return LoadedClass(name, cls, origin, config.sql_enabled(name))


def _describe(obj: object) -> str:
    if isinstance(obj, type):
        return f"class {obj.__module__}.{obj.__qualname__}"
    qualname = getattr(obj, "__qualname__", None)
    if callable(obj) and isinstance(qualname, str):
        return f"{type(obj).__name__} {getattr(obj, '__module__', '?')}.{qualname}"
    return f"{type(obj).__name__} {obj!r}"[:120]


def _resolve_binding(
    config: WorkerConfig,
    binding: DurableObjectBinding,
    module: ModuleType,
    durable_object: type,
    main_label: str,
) -> LoadedClass:
    """A binding's class from ``main`` (any name, even private) or from an installed plugin."""
    where = f'{config.where(binding.line)}: {binding.key} class_name "{binding.class_name}"'
    if binding.class_name in vars(module):
        obj = vars(module)[binding.class_name]
        _require_durable_object(obj, durable_object, f"{where} in {main_label}")
        return _loaded(config, binding.class_name, obj, f"main module {main_label}")

    candidates = [n for n, v in vars(module).items() if isinstance(v, type)]
    ep = find_entry_point(binding.class_name, where, main_label, candidates)
    obj, value, context = load_entry_point(ep, where)
    cls = _require_durable_object(obj, durable_object, f"{context}: {value}")
    return _loaded(config, binding.class_name, cls, f"plugin {dist_label(ep)} ({value})")


def _require_durable_object(obj: object, durable_object: type, where: str) -> type:
    """``obj`` itself when it is a Durable Object class; refused otherwise."""
    if isinstance(obj, type) and issubclass(obj, durable_object):
        return obj
    raise NotADurableObjectError(
        f"{where} is {_describe(obj)}, not a subclass of workers.DurableObject"
    )


def _unexported_warning(config: WorkerConfig, info: ClassInfo, main_label: str) -> str:
    declared = f"migration {info.tag!r}" if info.tag else "exports"
    return (
        f"{config.source_name}: {declared} declares Durable Object class {info.name}, but "
        f"{main_label} does not export it (wrangler deploy would fail)"
    )
