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
* :func:`hinted`: an error with Cloudflare's exact text, and doemu's advice as a note.
* :func:`check_rpc_value` / :func:`from_rpc_result`: the Python SDK's conversions of values that
  cross to JavaScript and back (RPC, ``ctx.storage``), with :class:`JsDict`.
"""

from __future__ import annotations

import datetime as _dt
import inspect
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

__all__ = [
    "JsDict",
    "JsException",
    "JsProxy",
    "check_rpc_value",
    "from_rpc_result",
    "hinted",
    "is_strict",
    "set_strict",
]

_strict = True


def set_strict(strict: bool) -> None:
    """Apply (``True``, the default) or relax (``False``: ``--lenient``) the boundary's rules."""
    global _strict
    _strict = strict


def is_strict() -> bool:
    """Whether the boundary's rules apply (see :func:`set_strict`)."""
    return _strict


E = TypeVar("E", bound=BaseException)


def hinted(exc: E, hint: str) -> E:
    """``exc`` with doemu's advice attached as a note (PEP 678), not in its text.

    ``str(exc)`` stays Cloudflare's exact text, so code that reads or matches it behaves the same
    on both; the note ("doemu: …", the cause and the fix) is printed under the traceback.
    """
    exc.add_note(f"doemu: {hint}")
    return exc


class JsProxy:
    """The type of JavaScript values seen from Python (``pyodide.ffi.JsProxy``).

    Plain Python data is never a ``JsProxy``: ``isinstance(x, JsProxy)`` tells a value that came
    from a JS API (and must be converted with ``to_py()``) from one that did not.
    """

    __slots__ = ()

    #: The JavaScript constructor's name (``value.constructor.name``).
    js_constructor: ClassVar[str] = "Object"

    @property
    def typeof(self) -> str:
        return "object"

    @property
    def constructor(self) -> Any:
        """``value.constructor``: what code checks as ``value.constructor.name == "Array"``."""
        return _Constructor(self.js_constructor)

    def to_py(self, *, depth: int = -1, default_converter: Callable[..., Any] | None = None) -> Any:
        """The value as Python data (Pyodide's deep conversion)."""
        return self


class _Constructor:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"function {self.name}() {{ [native code] }}"


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


class JsDict(dict[str, Any]):
    """A JS object come back through the Python SDK: a dict whose keys also read as attributes
    (the SDK's ``workers.rpc.JsDict``)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _refuse_for_rpc(value: Any) -> None:
    if isinstance(value, tuple | bytearray):
        raise TypeError(f"{type(value)} cannot be sent over RPC.")
    if inspect.isawaitable(value):
        raise TypeError(f"Awaitable {type(value)} cannot be sent over RPC.")


def check_rpc_value(value: Any) -> None:
    """Refuse what the Python SDK refuses to hand to JavaScript (RPC, ``ctx.storage``), anywhere
    inside ``value``: a ``tuple``, a ``bytearray``, an awaitable, with the SDK's ``TypeError``."""
    _refuse_for_rpc(value)
    if isinstance(value, dict):
        for item in value.values():
            check_rpc_value(item)
    elif isinstance(value, list | set | frozenset):
        for item in value:
            check_rpc_value(item)


def from_rpc_result(value: Any) -> Any:
    """A value come back from JavaScript as the SDK gives it to Python (observed on workerd):
    objects as :class:`JsDict` (nested too), ArrayBuffers as ``memoryview``, a number that holds
    an integer as ``int``, an aware ``datetime`` as a naive local one (a JS ``Date``)."""
    if isinstance(value, bytes):
        return memoryview(value)
    if isinstance(value, dict):
        return JsDict({str(k): from_rpc_result(v) for k, v in value.items()})
    if isinstance(value, list):
        return [from_rpc_result(item) for item in value]
    if type(value) is float and value.is_integer():
        return int(value)
    if isinstance(value, _dt.datetime) and value.tzinfo is not None:
        return value.astimezone().replace(tzinfo=None)
    return value
