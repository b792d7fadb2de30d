"""Importing the Worker's ``main`` module, and forgetting it again before the next load.

Each load first forgets the user modules the previous load imported (``sys.modules`` entries whose
files live in the previous project's directories) and the ``sys.path`` entries it added, so
sibling modules of a new project can never be served stale from an old one. Installed packages
(plugins, libraries) are never dropped.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from ..config import WorkerConfig
from ..errors import LoaderError
from .importer import ModuleImportError, is_requested

__all__ = [
    "FRAMEWORK_PACKAGES",
    "MainNotFoundError",
    "ModuleNameConflictError",
    "add_paths",
    "import_main",
    "is_user_module",
    "library_dirs",
    "record_user_modules",
    "unload_user_modules",
]

# Packages whose Durable Object subclasses are frameworks, not the user's classes.
FRAMEWORK_PACKAGES = ("workers", "doemu", "agents")
# Module names the main file may not take (they would replace doemu's shims).
_RESERVED_MODULES = frozenset({"workers", "js", "pyodide", "doemu", "agents"})
# doemu's own directory (this file is doemu/loader/modules.py): its modules are never the user's.
_DOEMU_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class MainNotFoundError(LoaderError):
    """The ``main`` file does not exist."""


class ModuleNameConflictError(LoaderError):
    """The main file's module name is taken by another module (stdlib, doemu's shims, …)."""


class _UserCode:
    """What the last load added to the interpreter, so the next load can take it back.

    A plain class, not a dataclass: it has one instance and is never compared or printed, and
    building a dataclass costs most of a millisecond of every start-up.

    Which new modules are the user's is decided in two steps. At load time only what is cheap
    (the module's file is under the project, and not in a framework package); whether that
    file is in fact inside an installed library (a project's own ``.venv``) is checked when
    :attr:`modules` is first read, by the next load or a name conflict: the check reads
    sysconfig's paths, about a millisecond that a start-up would otherwise spend for nothing.
    """

    __slots__ = ("_modules", "_unchecked", "paths")

    def __init__(self) -> None:
        self._modules: set[str] = set()
        self._unchecked: list[tuple[str, str]] = []  # (module name, normalised file path)
        self.paths: list[str] = []

    @property
    def modules(self) -> set[str]:
        """The user modules imported by the loads since the last :meth:`forget`."""
        if self._unchecked:
            libraries = library_dirs()
            self._modules.update(
                name for name, path in self._unchecked if not _under(path, libraries)
            )
            self._unchecked.clear()
        return self._modules

    def add(self, name: str, filename: str | None, roots: Sequence[str]) -> None:
        """Note module ``name`` (file ``filename``) if it may be the user's (see above)."""
        if not filename or name.partition(".")[0] in FRAMEWORK_PACKAGES:
            return
        path = os.path.normcase(os.path.abspath(filename))
        if _under(path, roots):
            self._unchecked.append((name, path))

    def add_main(self, name: str) -> None:
        """The main module is the user's wherever its file is."""
        self._modules.add(name)

    def forget(self) -> None:
        self._modules.clear()
        self._unchecked.clear()
        self.paths.clear()


_STATE = _UserCode()


def _under(path: str, dirs: Sequence[str]) -> bool:
    return any(path.startswith(d) for d in dirs)


def library_dirs() -> list[str]:
    import sysconfig  # a millisecond (it reads the build's config data): only when needed

    dirs = {sysconfig.get_path(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs.add(_DOEMU_DIR)
    return [os.path.normcase(os.path.abspath(d)) + os.sep for d in dirs if d]


def is_user_module(
    name: str, filename: str | None, roots: Sequence[str], libraries: Sequence[str]
) -> bool:
    if not filename or name.partition(".")[0] in FRAMEWORK_PACKAGES:
        return False
    path = os.path.normcase(os.path.abspath(filename))
    return not _under(path, libraries) and _under(path, roots)


def unload_user_modules() -> None:
    """Forget the user modules and ``sys.path`` entries the previous :func:`load_worker` added."""
    for name in _STATE.modules:
        sys.modules.pop(name, None)
    for entry in _STATE.paths:
        while entry in sys.path:
            sys.path.remove(entry)
    _STATE.forget()
    importlib.invalidate_caches()


def add_paths(dirs: Sequence[Path]) -> list[str]:
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


def import_main(config: WorkerConfig, *, reuse: bool) -> ModuleType:
    where = config.where(config.main_line)
    path = config.main_path
    name = config.main_module
    if path is None:
        if reuse and name in sys.modules:
            return sys.modules[name]
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if not is_requested(exc, name):
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


def record_user_modules(before: set[str], roots: Sequence[str], main_module: str) -> None:
    """Remember the modules imported since ``before`` that are the user's (see the docstring)."""
    for name in set(sys.modules) - before:
        _STATE.add(name, getattr(sys.modules.get(name), "__file__", None), roots)
    if main_module in sys.modules and main_module not in before:
        _STATE.add_main(main_module)
