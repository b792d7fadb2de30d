"""The switch and the two base types of doemu's JavaScript boundary, for every layer to use.

On Cloudflare, Python reaches every JavaScript API through Pyodide's FFI, and the boundary has
rules CPython does not (see :mod:`doemu.compat.boundary` for the whole list). doemu applies them
by default; ``doemu dev --lenient`` relaxes them. This module sits at the bottom of the runtime
so that storage (integer bindings), errors (``JsException``) and the compat surface share one
switch and one ``JsException`` type:

* :func:`set_strict` / :func:`is_strict`: whether the rules apply (the runtime sets it).
* :class:`JsProxy`: the type of JavaScript values seen from Python (``pyodide.ffi.JsProxy``).
* :class:`JsException`: a JavaScript error raised into Python (``pyodide.ffi.JsException``):
  *not* a ``TypeError``/``ValueError`` whatever the JavaScript error's name, so ``except
  TypeError:`` behaves as on Cloudflare; ``str()`` is JavaScript's ``"Name: message"``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

__all__ = ["JsException", "JsProxy", "is_strict", "set_strict"]

_strict = True


def set_strict(strict: bool) -> None:
    """Apply (``True``, the default) or relax (``False``: ``--lenient``) the boundary's rules."""
    global _strict
    _strict = strict


def is_strict() -> bool:
    """Whether the boundary's rules apply (see :func:`set_strict`)."""
    return _strict


class JsProxy:
    """The type of JavaScript values seen from Python (``pyodide.ffi.JsProxy``).

    Plain Python data is never a ``JsProxy``: ``isinstance(x, JsProxy)`` tells a value that came
    from a JS API (and must be converted with ``to_py()``) from one that did not.
    """

    __slots__ = ()

    @property
    def typeof(self) -> str:
        return "object"

    def to_py(self, *, depth: int = -1, default_converter: Callable[..., Any] | None = None) -> Any:
        """The value as Python data (Pyodide's deep conversion)."""
        return self


class JsException(JsProxy, Exception):
    """A JavaScript error raised into Python (``pyodide.ffi.JsException``).

    Subclasses name their JavaScript error in ``js_name`` (``TypeError``, ``RangeError``,
    ``DataCloneError``, ``Error``); an instance may override it with ``name=``. ``message`` is the
    error's text without the name, ``str()`` is ``"Name: message"``, as Pyodide prints it.
    """

    js_name: ClassVar[str] = "Error"

    def __init__(self, *args: Any, name: str | None = None) -> None:
        stack = ""
        if type(self) is JsException and name is None and args:
            # JsException(name, message="", stack=""), as Pyodide builds one.
            name, message, stack = (*args, "", "")[:3]
            args = (message,)
        super().__init__(*args)
        self.name: str = name if name is not None else self.js_name
        self.stack: str = stack

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    def __str__(self) -> str:
        return f"{self.name}: {self.message}"
