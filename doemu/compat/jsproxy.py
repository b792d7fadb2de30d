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

__all__ = [
    "JsBuffer",
    "JsException",
    "JsProxy",
    "as_js_buffer",
    "create_once_callable",
    "create_proxy",
    "destroy_proxies",
    "to_js",
]


class JsProxy:
    """The type of JavaScript values seen from Python.

    No JavaScript exists in doemu, so ``isinstance(x, JsProxy)`` is false for every ordinary
    value; code written as ``if isinstance(x, JsProxy): x = x.to_py()`` takes the Python path.
    (:class:`JsBuffer` is the exception: it stands for a JS buffer and is a ``JsProxy``.)
    """

    __slots__ = ()


class JsBuffer(JsProxy, bytes):
    """Binary data as a JS ``ArrayBuffer`` proxy would present it, and also plain ``bytes``."""

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


class JsException(Exception):
    """A JavaScript error raised into Python. doemu raises Python exceptions instead."""

    @property
    def name(self) -> str:
        return type(self).__name__

    @property
    def message(self) -> str:
        return str(self)


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
    """Identity: there is no JS side to convert to (Pyodide's keywords are accepted, unused)."""
    return obj


class _Proxy:
    """What :func:`create_proxy` returns for a callable: callable, with ``destroy()``."""

    __slots__ = ("_destroyed", "_obj")

    def __init__(self, obj: Callable[..., Any]) -> None:
        self._obj = obj
        self._destroyed = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._destroyed:
            raise RuntimeError("This proxy was destroyed (create_proxy(...).destroy() was called)")
        return self._obj(*args, **kwargs)

    def destroy(self) -> None:
        self._destroyed = True

    def copy(self) -> _Proxy:
        return _Proxy(self._obj)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._obj, name)

    def __repr__(self) -> str:
        return f"<proxy of {self._obj!r}>"


def create_proxy(obj: Any, /, *, capture_this: bool = False, roundtrip: bool = True) -> Any:
    """A long-lived proxy of ``obj``: callables get a wrapper with ``destroy()``; others as is."""
    if callable(obj) and not isinstance(obj, type):
        return _Proxy(obj)
    return obj


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
