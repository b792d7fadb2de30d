"""``"module:attr"`` import strings, with uvicorn's three precise errors.

A malformed string, a module that does not exist, an attribute that does not: each is a
:class:`~doemu.errors.LoaderError` naming what was wrong. A module that exists but raises
``ImportError`` itself re-raises that original exception, so the traceback points into the user's
own file.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import LoaderError

__all__ = [
    "AttributeNotFoundError",
    "ImportStringError",
    "ModuleImportError",
    "import_from_string",
    "is_requested",
]


class ImportStringError(LoaderError):
    """An import string is not ``"<module>:<attribute>"``."""


class ModuleImportError(LoaderError):
    """The requested module itself does not exist (a nested failure is re-raised as is)."""


class AttributeNotFoundError(LoaderError):
    """The module exists but has no such attribute."""


def is_requested(exc: ModuleNotFoundError, module_name: str) -> bool:
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
        if not is_requested(exc, module_str):
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
