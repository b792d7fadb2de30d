"""JavaScript values as Python code on Cloudflare sees them, for doemu's JS APIs to hand out.

On Cloudflare, Python runs in Pyodide and every JavaScript API is reached through its FFI. What a
JS API gives back is a JS value, not Python data: ``null`` arrives as ``pyodide.ffi.jsnull`` (not
``None``), an object as a ``JsProxy`` that reads by attribute and cannot be subscripted until
``.to_py()`` converts it, an Array as a ``JsArray`` (a sequence, but not a ``list``), a Map as a
``JsMap``. What a JS API is given must be a JS value too: ``to_js`` makes one (a list becomes an
Array; a dict a Map, or a plain Object with ``dict_converter=Object.fromEntries``).

doemu has no JavaScript, so these classes *are* the JS values of its JS APIs: they behave as the
Pyodide proxies do where user code can tell (subscripting, ``len``, iteration, ``to_py()``,
``bool``, identity with ``jsnull``), so code that works here works there. The runtime unwraps
them with :func:`to_python` where it needs plain data.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, MutableSequence
from collections.abc import Mapping as MappingABC
from typing import Any, Final, NoReturn

from ..jsboundary import JsProxy

__all__ = [
    "JsArray",
    "JsMap",
    "JsNull",
    "JsObject",
    "JsProxy",
    "is_js_value",
    "jsnull",
    "to_python",
]


class JsNull:
    """JavaScript's ``null`` (``pyodide.ffi.jsnull``): falsy, not ``None``, not a ``JsProxy``."""

    __slots__ = ()
    _instance: JsNull | None = None

    def __new__(cls) -> JsNull:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "jsnull"

    @property
    def typeof(self) -> str:
        return "object"


#: JavaScript ``null``, as Pyodide presents it.
jsnull: Final = JsNull()


def _encode_jsnull_as_null() -> None:
    """``json.dumps(jsnull)`` is ``"null"``, as in Pyodide (whose ``json`` knows ``jsnull``).

    The standard encoder calls ``default`` for a value it cannot encode; answering ``None`` for
    ``jsnull`` makes it ``null`` in any position a value may take (not as a dict key, which
    Pyodide also accepts). Only ``jsnull`` reaches the new branch: other values fail as before.
    """
    original = json.JSONEncoder.default
    if getattr(original, "_doemu_jsnull", False):
        return

    def default(self: json.JSONEncoder, o: Any) -> Any:
        if o is jsnull:
            return None
        return original(self, o)

    default._doemu_jsnull = True  # type: ignore[attr-defined]
    json.JSONEncoder.default = default  # type: ignore[method-assign]


_encode_jsnull_as_null()


def _not_subscriptable() -> NoReturn:
    # Pyodide's text: every JavaScript object is a ``pyodide.ffi.JsProxy`` to Python.
    raise TypeError("'pyodide.ffi.JsProxy' object is not subscriptable")


class JsObject(JsProxy):
    """A plain JavaScript object: properties read as attributes; not subscriptable, not
    iterable, no ``len`` (as a ``JsProxy`` of an Object); ``to_py()`` gives a ``dict``."""

    __slots__ = ("_props",)

    def __init__(self, props: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_props", dict(props))

    def __getattr__(self, name: str) -> Any:
        try:
            return object.__getattribute__(self, "_props")[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self._props[name] = value

    def __getitem__(self, key: Any) -> NoReturn:
        _not_subscriptable()

    def __dir__(self) -> list[str]:
        return sorted(self._props)

    def __repr__(self) -> str:
        return "[object Object]"

    def object_keys(self) -> JsArray:
        return JsArray(list(self._props))

    def object_values(self) -> JsArray:
        return JsArray(list(self._props.values()))

    def object_entries(self) -> JsArray:
        return JsArray([JsArray([k, v]) for k, v in self._props.items()])

    def as_object_map(self) -> JsMap:
        """A mapping view of the object's properties (Pyodide's ``as_object_map()``)."""
        return JsMap(self._props)

    def to_py(self, *, depth: int = -1, default_converter: Callable[..., Any] | None = None) -> Any:
        return {k: to_python(v) for k, v in self._props.items()}


class JsArray(JsProxy, MutableSequence[Any]):
    """A JavaScript Array: a sequence (index, ``len``, iterate) but not a ``list``."""

    __slots__ = ("_items",)
    js_constructor = "Array"

    def __init__(self, items: list[Any]) -> None:
        self._items = items

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return JsArray(self._items[index])
        return self._items[index]

    def __setitem__(self, index: Any, value: Any) -> None:
        self._items[index] = value

    def __delitem__(self, index: Any) -> None:
        del self._items[index]

    def insert(self, index: int, value: Any) -> None:
        self._items.insert(index, value)

    def push(self, value: Any) -> None:
        self._items.append(value)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)

    def __contains__(self, value: object) -> bool:
        return value in self._items

    def __repr__(self) -> str:
        return ",".join("" if v is None or v is jsnull else str(v) for v in self._items)

    @property
    def length(self) -> int:
        return len(self._items)

    def append(self, value: Any) -> None:
        self._items.append(value)

    def extend(self, values: Any) -> None:
        self._items.extend(values)

    def pop(self, index: int = -1) -> Any:
        return self._items.pop(index)

    def to_py(self, *, depth: int = -1, default_converter: Callable[..., Any] | None = None) -> Any:
        return [to_python(v) for v in self._items]


class JsMap(JsProxy, MappingABC[Any, Any]):
    """A JavaScript Map: a mapping (subscript, ``len``, iterate keys, ``get``)."""

    __slots__ = ("_entries",)
    js_constructor = "Map"

    def __init__(self, entries: Mapping[Any, Any]) -> None:
        self._entries = dict(entries)

    def __getitem__(self, key: Any) -> Any:
        return self._entries[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._entries[key] = value

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __repr__(self) -> str:
        return "[object Map]"

    @property
    def size(self) -> int:
        return len(self._entries)

    def to_py(self, *, depth: int = -1, default_converter: Callable[..., Any] | None = None) -> Any:
        return {to_python(k): to_python(v) for k, v in self._entries.items()}


def is_js_value(value: object) -> bool:
    """Whether ``value`` may be handed to a JS API as is (a JS value or a JS primitive)."""
    return value is None or value is jsnull or isinstance(value, str | int | float | bool | JsProxy)


def to_python(value: Any) -> Any:
    """``value`` as plain Python data: JS values converted deeply, ``jsnull`` → ``None``;
    anything else unchanged (the runtime's view of what a JS API was given)."""
    if value is jsnull:
        return None
    if isinstance(value, JsProxy) and not isinstance(value, bytes):
        return value.to_py()
    return value
