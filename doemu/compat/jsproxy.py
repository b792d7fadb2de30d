"""What ``pyodide.ffi`` offers, for code that runs on doemu: the JS/Python boundary does not exist.

On Cloudflare, Python talks to JavaScript through Pyodide's FFI: ``to_js`` converts a Python value
for a JS API, ``create_proxy`` keeps a Python callable alive for JS, and JS values arrive as
``JsProxy`` objects. In doemu every "JS" API is already Python, so the conversions are identities
and no value is ever a real ``JsProxy``. The names exist so the same source imports and runs.

Binary data is the one place where the difference shows: on Cloudflare a binary WebSocket message
is a ``JsProxy`` of an ``ArrayBuffer``, read with ``.to_bytes()``. :class:`JsBuffer` is a ``bytes``
that also has those methods; the runtime hands binary messages over as ``JsBuffer`` (see
``as_js_buffer``) so both ``message.to_bytes()`` and plain ``bytes`` use work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..jsboundary import JsException
from .jsvalues import JsArray, JsMap, JsNull, JsObject, JsProxy, jsnull

__all__ = [
    "JsArray",
    "JsBuffer",
    "JsException",
    "JsMap",
    "JsNull",
    "JsObject",
    "JsProxy",
    "as_js_buffer",
    "create_once_callable",
    "create_proxy",
    "destroy_proxies",
    "jsnull",
    "to_js",
]


class JsBuffer(JsProxy, bytes):
    """Binary data as a JS ``ArrayBuffer`` proxy would present it, and also plain ``bytes``."""

    js_constructor = "Uint8Array"

    @property
    def byteLength(self) -> int:
        return len(self)

    def to_bytes(self) -> bytes:
        return bytes(self)

    def to_memoryview(self) -> memoryview:
        return memoryview(bytes(self))

    def to_py(self, **_kwargs: Any) -> memoryview:
        return self.to_memoryview()

    def to_string(self, encoding: str | None = None) -> str:
        return bytes(self).decode(encoding or "utf-8")


def as_js_buffer(data: bytes | bytearray | memoryview) -> JsBuffer:
    """Wrap binary data the way a JS ``ArrayBuffer`` reaches Python code (doemu-internal)."""
    return data if isinstance(data, JsBuffer) else JsBuffer(data)


def to_js(
    obj: Any,
    /,
    *,
    depth: int = -1,
    pyproxies: Any = None,
    create_pyproxies: bool = True,
    dict_converter: Callable[..., Any] | None = None,
    default_converter: Callable[..., Any] | None = None,
    eager_converter: Callable[..., Any] | None = None,
) -> Any:
    """``obj`` as a JavaScript value, by Pyodide's rules (what doemu's JS APIs accept).

    Primitives and JS values are unchanged; a list or tuple becomes a ``JsArray``, a dict a plain
    ``JsObject`` (or whatever ``dict_converter`` makes of its ``[key, value]`` pairs), binary
    data a ``JsBuffer``, nested values likewise down to ``depth``; anything else a proxy of the
    Python object (as ``create_proxy``), unless a converter says otherwise.
    """

    def convert(value: Any, level: int) -> Any:
        if value is None or value is jsnull or isinstance(value, str | int | float | JsProxy):
            return value
        if eager_converter is not None:
            return eager_converter(value, lambda v: convert(v, level), _no_cache)
        if level == 0:
            return _proxy_of(value, create_pyproxies)
        inner = level - 1
        if isinstance(value, list | tuple):
            return JsArray([convert(item, inner) for item in value])
        if isinstance(value, dict):
            if dict_converter is None:
                return JsObject({key: convert(item, inner) for key, item in value.items()})
            return dict_converter(
                JsArray([JsArray([key, convert(item, inner)]) for key, item in value.items()])
            )
        if isinstance(value, bytes | bytearray | memoryview):
            return JsBuffer(bytes(value))
        if default_converter is not None:
            return default_converter(value, lambda v: convert(v, level), _no_cache)
        return _proxy_of(value, create_pyproxies)

    return convert(obj, depth)


def _no_cache(_value: Any, _converted: Any) -> None:
    """The ``cache`` argument of Pyodide's converters: doemu converts without cycles."""


def _proxy_of(value: Any, allowed: bool) -> Any:
    if not allowed:
        raise TypeError(
            f"to_js: no conversion for {type(value).__name__} and create_pyproxies=False"
        )
    return _Proxy(value)


class _Proxy(JsProxy):
    """What :func:`create_proxy` returns (Pyodide's ``JsDoubleProxy``): a JS handle on a Python
    object, with ``destroy()`` and ``unwrap()``; calling it calls the object."""

    __slots__ = ("_destroyed", "_obj")

    def __init__(self, obj: Any) -> None:
        self._obj = obj
        self._destroyed = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._destroyed:
            raise RuntimeError("This proxy was destroyed (create_proxy(...).destroy() was called)")
        return self._obj(*args, **kwargs)

    def destroy(self) -> None:
        self._destroyed = True

    def unwrap(self) -> Any:
        """The Python object behind the proxy."""
        if self._destroyed:
            raise RuntimeError("This proxy was destroyed (create_proxy(...).destroy() was called)")
        return self._obj

    def copy(self) -> _Proxy:
        return _Proxy(self._obj)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._obj, name)

    def __repr__(self) -> str:
        return f"<proxy of {self._obj!r}>"


def create_proxy(obj: Any, /, *, capture_this: bool = False, roundtrip: bool = True) -> Any:
    """A long-lived JS handle on ``obj``, destroyed with ``destroy()`` (``unwrap()`` gives
    ``obj`` back). A handle on an awaitable is what ``ctx.waitUntil`` accepts."""
    return _Proxy(obj)


class _OnceCallable(_Proxy):
    """What :func:`create_once_callable` returns: destroyed by its first call, as in Pyodide."""

    __slots__ = ()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._destroyed:
            raise RuntimeError("This function was created with create_once_callable: called twice")
        self._destroyed = True
        return self._obj(*args, **kwargs)


def create_once_callable(obj: Callable[..., Any], /, *, _may_syncify: bool = False) -> Any:
    """A callable that may be called once (a second call raises), with ``destroy()``."""
    return _OnceCallable(obj)


def destroy_proxies(_proxies: Iterable[Any], /) -> None:
    """Destroy every :func:`create_proxy` wrapper in ``_proxies`` (anything else is ignored)."""
    for proxy in _proxies:
        if isinstance(proxy, _Proxy):
            proxy.destroy()
