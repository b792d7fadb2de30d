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

import importlib
import importlib.util
import os
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .config import ClassInfo, DurableObjectBinding, WorkerConfig
from .errors import LoaderError

# Entry points are only consulted for a binding whose class ``main`` does not define, so
# importlib.metadata (several milliseconds) is imported there and not on every start-up.
if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = [
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
    "load_worker",
    "unload_user_modules",
]

ENTRY_POINT_GROUP = "doemu.durable_objects"

# Packages whose Durable Object subclasses are frameworks, not the user's classes.
_FRAMEWORK_PACKAGES = ("workers", "doemu", "agents")
# Module names the main file may not take (they would replace doemu's shims).
_RESERVED_MODULES = frozenset({"workers", "js", "pyodide", "doemu", "agents"})


# --------------------------------------------------------------------------------------- errors


class ImportStringError(LoaderError):
    """An import string is not ``"<module>:<attribute>"``."""


class ModuleImportError(LoaderError):
    """The requested module itself does not exist (a nested failure is re-raised as is)."""


class AttributeNotFoundError(LoaderError):
    """The module exists but has no such attribute."""


class ClassNotFoundError(LoaderError):
    """A binding's ``class_name`` is neither in ``main`` nor provided by an installed package."""


class NotADurableObjectError(LoaderError, TypeError):
    """The object a binding names is not a subclass of ``workers.DurableObject``."""


class MainNotFoundError(LoaderError):
    """The ``main`` file does not exist."""


class ModuleNameConflictError(LoaderError):
    """The main file's module name is taken by another module (stdlib, doemu's shims, …)."""


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


# --------------------------------------------------------------------------- importing strings


def _is_requested(exc: ModuleNotFoundError, module_name: str) -> bool:
    """Whether ``exc`` says ``module_name`` (or a package on its path) is what is missing."""
    missing = exc.name or ""
    return missing == module_name or module_name.startswith(missing + ".")


def import_from_string(import_str: str, *, context: str = "") -> Any:
    """Import ``"module:attr"`` (``attr`` may be dotted) with uvicorn's three precise errors.

    ``context`` (e.g. ``"wrangler.toml:14: …"``) prefixes every message. A module that exists
    but fails to import re-raises its own exception unchanged.
    """
    prefix = f"{context}: " if context else ""
    module_str, _, attrs_str = import_str.partition(":")
    if not module_str or not attrs_str:
        raise ImportStringError(
            f'{prefix}Import string "{import_str}" must be in format "<module>:<attribute>".'
        )
    try:
        module = importlib.import_module(module_str)
    except ModuleNotFoundError as exc:
        if not _is_requested(exc, module_str):
            raise
        raise ModuleImportError(f'{prefix}Could not import module "{module_str}".') from None
    instance: Any = module
    try:
        for attr in attrs_str.split("."):
            instance = getattr(instance, attr)
    except AttributeError:
        raise AttributeNotFoundError(
            f'{prefix}Attribute "{attrs_str}" not found in module "{module_str}".'
        ) from None
    return instance


# -------------------------------------------------------------------- user-module bookkeeping


class _UserCode:
    """What the last load added to the interpreter, so the next load can take it back.

    A plain class, not a dataclass: it has one instance and is never compared or printed, and
    building a dataclass costs most of a millisecond of every start-up.
    """

    __slots__ = ("modules", "paths")

    def __init__(self) -> None:
        self.modules: set[str] = set()
        self.paths: list[str] = []


_STATE = _UserCode()


def _library_dirs() -> list[str]:
    dirs = {sysconfig.get_path(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs.add(os.path.dirname(os.path.abspath(__file__)))  # doemu itself
    return [os.path.normcase(os.path.abspath(d)) + os.sep for d in dirs if d]


def _is_user_module(
    name: str, filename: str | None, roots: Sequence[str], libraries: Sequence[str]
) -> bool:
    if not filename or name.partition(".")[0] in _FRAMEWORK_PACKAGES:
        return False
    path = os.path.normcase(os.path.abspath(filename))
    if any(path.startswith(lib) for lib in libraries):
        return False
    return any(path.startswith(root) for root in roots)


def unload_user_modules() -> None:
    """Forget the user modules and ``sys.path`` entries the previous :func:`load_worker` added."""
    for name in _STATE.modules:
        sys.modules.pop(name, None)
    for entry in _STATE.paths:
        while entry in sys.path:
            sys.path.remove(entry)
    _STATE.modules.clear()
    _STATE.paths.clear()
    importlib.invalidate_caches()


def _add_paths(dirs: Sequence[Path]) -> list[str]:
    added = [str(d) for d in dirs]
    for entry in reversed(added):
        if entry in sys.path:
            sys.path.remove(entry)
        sys.path.insert(0, entry)
    for entry in added:
        if entry not in _STATE.paths:
            _STATE.paths.append(entry)
    importlib.invalidate_caches()
    return [os.path.normcase(entry) + os.sep for entry in added]


# ------------------------------------------------------------------------------------- loading


def load_worker(config: WorkerConfig, *, reload: bool = True) -> LoadedWorker:
    """Import ``config.main`` and resolve every Durable Object binding to a class.

    See the module docstring for what ``reload`` does and for the errors raised.
    """
    from doemu.compat import install_modules

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
    roots = _add_paths(user_dirs)

    libraries = _library_dirs()
    before = set(sys.modules)
    try:
        module = _import_main(config, reuse=not reload)
    finally:
        _STATE.modules.update(
            name
            for name in set(sys.modules) - before
            if _is_user_module(
                name, getattr(sys.modules.get(name), "__file__", None), roots, libraries
            )
        )
        if config.main_module in sys.modules and config.main_module not in before:
            _STATE.modules.add(config.main_module)

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
    return top in _FRAMEWORK_PACKAGES


def _loaded(config: WorkerConfig, name: str, cls: type, origin: str) -> LoadedClass:
    return LoadedClass(name, cls, origin, config.sql_enabled(name))


def _describe(obj: object) -> str:
    if isinstance(obj, type):
        return f"class {obj.__module__}.{obj.__qualname__}"
    qualname = getattr(obj, "__qualname__", None)
    if callable(obj) and isinstance(qualname, str):
        return f"{type(obj).__name__} {getattr(obj, '__module__', '?')}.{qualname}"
    return f"{type(obj).__name__} {obj!r}"[:120]


def _import_main(config: WorkerConfig, *, reuse: bool) -> ModuleType:
    where = config.where(config.main_line)
    path = config.main_path
    name = config.main_module
    if path is None:
        if reuse and name in sys.modules:
            return sys.modules[name]
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if not _is_requested(exc, name):
                raise
            raise ModuleImportError(
                f'{where}: Could not import module "{name}" (main = "{config.main}"; '
                f"searched {config.base_dir} and the installed packages)."
            ) from None

    if not path.is_file():
        raise MainNotFoundError(
            f'{where}: main = "{config.main}" was not found (looked for {path})'
        )
    existing = sys.modules.get(name)
    if existing is not None:
        existing_file = getattr(existing, "__file__", None)
        if existing_file and Path(existing_file).absolute() == path:
            if reuse:
                return existing
        elif name not in _STATE.modules:
            raise ModuleNameConflictError(
                f'{where}: main = "{config.main}" would be imported as module "{name}", which is '
                f"already {existing_file or 'a built-in module'}; rename the file"
            )
    if name in _RESERVED_MODULES or name in sys.stdlib_module_names:
        raise ModuleNameConflictError(
            f'{where}: main = "{config.main}" would be imported as module "{name}", which '
            "would shadow a module of the same name; rename the file"
        )
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py path always has a loader
        raise ModuleImportError(f'{where}: Could not import module "{name}" from {path}.')
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


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

    entry_points = _entry_points(binding.class_name)
    if not entry_points:
        import difflib
        import importlib.metadata

        candidates = [n for n, v in vars(module).items() if isinstance(v, type)]
        candidates += [ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)]
        close = difflib.get_close_matches(binding.class_name, candidates, n=1)
        hint = f' (did you mean "{close[0]}"?)' if close else ""
        raise ClassNotFoundError(
            f"{where} is not exported by {main_label} and no installed package provides it in "
            f'entry-point group "{ENTRY_POINT_GROUP}"{hint}'
        )
    if len(entry_points) > 1:
        listed = "; ".join(f"{_dist_label(ep)} ({ep.value})" for ep in entry_points)
        raise ClassNotFoundError(
            f'{where}: several installed packages provide it in entry-point group "'
            f'{ENTRY_POINT_GROUP}": {listed}; uninstall all but one'
        )
    ep = entry_points[0]
    value = ep.value.partition("[")[0].strip()  # drop a trailing "[extras]"
    context = f"{where}: entry point {ep.name} = {ep.value!r} of {_dist_label(ep)}"
    obj = import_from_string(value, context=context)
    _require_durable_object(obj, durable_object, f"{context}: {value}")
    return _loaded(config, binding.class_name, obj, f"plugin {_dist_label(ep)} ({value})")


def _entry_points(name: str) -> list[EntryPoint]:
    """Entry points called ``name`` in the group, one per (distribution, value)."""
    import importlib.metadata

    unique: dict[tuple[str, str], EntryPoint] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP).select(name=name):
        dist = ep.dist.name.lower().replace("_", "-") if ep.dist is not None else ""
        unique.setdefault((dist, ep.value), ep)
    return list(unique.values())


def _dist_label(ep: EntryPoint) -> str:
    if ep.dist is None:
        return "an unknown distribution"
    return f"{ep.dist.name} {ep.dist.version}"


def _require_durable_object(obj: object, durable_object: type, where: str) -> None:
    if isinstance(obj, type) and issubclass(obj, durable_object):
        return
    raise NotADurableObjectError(
        f"{where} is {_describe(obj)}, not a subclass of workers.DurableObject"
    )


def _unexported_warning(config: WorkerConfig, info: ClassInfo, main_label: str) -> str:
    declared = f"migration {info.tag!r}" if info.tag else "exports"
    return (
        f"{config.source_name}: {declared} declares Durable Object class {info.name}, but "
        f"{main_label} does not export it (wrangler deploy would fail)"
    )
