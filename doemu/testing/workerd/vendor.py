"""Which files a Python Worker's ``python_modules/`` holds, as ``pywrangler`` vendors them.

On Cloudflare (and on workerd from compatibility date 2026-04-21) the ``workers`` SDK and every
pure-Python dependency are modules of the Worker named ``python_modules/<path in the wheel>``.
This module lists them, as :class:`Module` entries (the module's name in the Worker and the file
it comes from), without copying anything:

* :func:`sdk_modules`: every file of the unpacked ``workers-runtime-sdk`` (its ``.py`` files as
  Python modules, the rest — ``.pth``, ``py.typed``, ``workflows.js`` — as data, as pywrangler
  ships them), no ``.dist-info``, ``.pyi`` or ``__pycache__``;
* :func:`distribution_modules`: the ``.py`` files of an installed distribution, found through
  :mod:`importlib.metadata` (its ``RECORD``), or of an importable package when no distribution
  of that name lists its files (``agents`` is part of the editable ``doemu`` install, whose
  record lists only a ``.pth``). A distribution with compiled extensions is refused: Pyodide
  cannot load a CPython ``.so``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .locate import WorkerdError

__all__ = [
    "PYTHON_MODULES",
    "Module",
    "VendorError",
    "distribution_modules",
    "sdk_modules",
    "vendored_modules",
]

#: Where vendored packages live among a Worker's modules.
PYTHON_MODULES = "python_modules"

_NATIVE_SUFFIXES = (".so", ".pyd", ".dylib", ".dll")


class VendorError(WorkerdError):
    """A package cannot be vendored: not installed, or not pure Python."""

    def __init__(self, message: str, *, name: str) -> None:
        super().__init__(message)
        self.name = name


@dataclass(frozen=True)
class Module:
    """One module of the Worker: ``name`` in workerd's module registry, ``source`` on disk,
    ``python`` false for a data module."""

    name: str
    source: Path
    python: bool = True


def _skipped(parts: tuple[str, ...]) -> bool:
    return any(part == "__pycache__" or part.endswith(".dist-info") for part in parts)


def sdk_modules(sdk: Path) -> list[Module]:
    """The unpacked SDK (``HOME/sdk/py``) as ``python_modules/…`` modules."""
    modules: list[Module] = []
    for path in sorted(sdk.rglob("*")):
        rel = path.relative_to(sdk)
        if not path.is_file() or _skipped(rel.parts) or path.suffix in (".pyc", ".pyi"):
            continue
        name = str(PurePosixPath(PYTHON_MODULES, *rel.parts))
        modules.append(Module(name, path, python=path.suffix == ".py"))
    return modules


def _from_record(dist: importlib.metadata.Distribution, name: str) -> list[Module]:
    modules: list[Module] = []
    for file in dist.files or ():
        parts = PurePosixPath(str(file)).parts
        if parts and parts[0] == "..":  # scripts and data outside site-packages
            continue
        if file.suffix in _NATIVE_SUFFIXES:
            raise VendorError(
                f"{name!r} is not pure Python ({file} is a compiled extension); "
                "Python Workers can only vendor pure-Python packages",
                name=name,
            )
        if file.suffix != ".py" or _skipped(parts):
            continue
        source = Path(str(dist.locate_file(file)))
        modules.append(Module(str(PurePosixPath(PYTHON_MODULES, *parts)), source))
    return modules


def _from_package(name: str) -> list[Module]:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None or (spec.origin is None and not spec.submodule_search_locations):
        raise VendorError(
            f"cannot vendor {name!r}: no installed distribution and no importable package "
            "of that name",
            name=name,
        )
    if not spec.submodule_search_locations:  # a single-file module
        origin = Path(str(spec.origin))
        if origin.suffix != ".py":
            raise VendorError(f"{name!r} is not a pure-Python module ({origin})", name=name)
        return [Module(f"{PYTHON_MODULES}/{name}.py", origin)]
    modules: list[Module] = []
    for location in spec.submodule_search_locations:
        root = Path(location)
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if not path.is_file() or _skipped(rel.parts):
                continue
            if path.suffix in _NATIVE_SUFFIXES:
                raise VendorError(f"{name!r} is not pure Python ({path})", name=name)
            if path.suffix == ".py":
                target = PurePosixPath(PYTHON_MODULES, *name.split("."), *rel.parts)
                modules.append(Module(str(target), path))
    return modules


def distribution_modules(name: str) -> list[Module]:
    """The ``.py`` files of the installed distribution (or importable package) ``name``."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        modules = _from_record(dist, name)
        if modules:
            return modules
    return _from_package(name)


def vendored_modules(sdk: Path | None, names: Iterable[str]) -> list[Module]:
    """The SDK's modules and those of every distribution in ``names``, each name once (the
    first source of a module name wins, so the SDK cannot be shadowed)."""
    seen: set[str] = set()
    result: list[Module] = []

    def add(modules: Iterator[Module] | list[Module]) -> None:
        for module in modules:
            if module.name not in seen:
                seen.add(module.name)
                result.append(module)

    if sdk is not None:
        add(sdk_modules(sdk))
    for name in names:
        add(distribution_modules(name))
    return result
