"""install_modules() and the pyodide / pyodide.ffi stand-ins."""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Iterator

import pytest

import doemu.compat as compat
from doemu.compat import install_modules, uninstall_modules
from doemu.compat.pyodide import ffi

NAMES = ("workers", "js", "pyodide", "pyodide.ffi")


@pytest.fixture
def clean_modules() -> Iterator[None]:
    """Run with none of the four names imported; restore whatever was there afterwards."""
    saved = {name: sys.modules.pop(name) for name in NAMES if name in sys.modules}
    try:
        yield
    finally:
        for name in NAMES:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


def test_install_makes_cloudflare_imports_work(clean_modules: None) -> None:
    install_modules()
    code = (
        "from workers import DurableObject, Response, WorkerEntrypoint\n"
        "from js import WebSocketPair, Date\n"
        "from pyodide.ffi import to_js, create_proxy\n"
        "import pyodide.ffi\n"
        "from pyodide import ffi as ffi_again\n"
        "import workers, js\n"
    )
    namespace: dict[str, object] = {}
    exec(code, namespace)
    assert namespace["DurableObject"] is compat.workers.DurableObject
    assert namespace["Response"] is compat.workers.Response
    assert namespace["WebSocketPair"] is compat.js.WebSocketPair
    assert namespace["Date"] is compat.js.Date
    assert namespace["to_js"] is ffi.to_js
    assert namespace["ffi_again"] is ffi
    assert namespace["workers"] is compat.workers
    assert importlib.import_module("pyodide.ffi") is ffi


def test_install_is_idempotent(clean_modules: None, recwarn: pytest.WarningsRecorder) -> None:
    install_modules()
    install_modules()
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
    for name in NAMES:
        assert sys.modules[name] is compat.MODULES[name]


def test_install_replaces_a_different_module_with_a_warning(clean_modules: None) -> None:
    impostor = types.ModuleType("workers")
    sys.modules["workers"] = impostor
    with pytest.warns(RuntimeWarning, match="replaces the already-imported module 'workers'"):
        install_modules()
    assert sys.modules["workers"] is compat.workers


def test_uninstall_removes_only_doemu_modules(clean_modules: None) -> None:
    install_modules()
    other = types.ModuleType("js")
    sys.modules["js"] = other
    uninstall_modules()
    assert "workers" not in sys.modules
    assert "pyodide.ffi" not in sys.modules
    assert sys.modules["js"] is other


def test_user_class_subclasses_the_installed_base(clean_modules: None) -> None:
    install_modules()
    namespace: dict[str, object] = {}
    exec(
        "from workers import DurableObject\n"
        "class Counter(DurableObject):\n"
        "    async def fetch(self, request):\n"
        "        return None\n",
        namespace,
    )
    counter_cls = namespace["Counter"]
    assert isinstance(counter_cls, type)
    instance = counter_cls("ctx", "env")
    assert isinstance(instance, compat.workers.DurableObject)
    assert (instance.ctx, instance.env) == ("ctx", "env")


# -- pyodide.ffi ---------------------------------------------------------------------------------


def test_to_js_converts_as_pyodide_does() -> None:
    """Observed on workerd (Pyodide 314): a dict becomes a plain Object, a list an Array."""
    value = {"a": [1, 2], "b": None, "c": b"x", "d": "s"}
    js = ffi.to_js(value)
    assert isinstance(js, ffi.JsProxy) and repr(js) == "[object Object]"
    assert isinstance(js.a, ffi.JsArray) and not isinstance(js.a, list) and list(js.a) == [1, 2]
    assert js.b is None and js.c.to_bytes() == b"x" and js.d == "s"
    assert js.to_py() == {"a": [1, 2], "b": None, "c": b"x", "d": "s"}
    assert ffi.to_js(5) == 5 and ffi.to_js("s") == "s" and ffi.to_js(None) is None
    assert ffi.to_js(js) is js  # a JS value is already converted
    shallow = ffi.to_js(value, depth=1)
    assert not isinstance(shallow.a, ffi.JsArray)  # depth 1: the list stays a proxied object
    entries = ffi.to_js({"k": 1}, dict_converter=compat.js.Object.fromEntries)
    assert entries.k == 1
    proxied = ffi.to_js([object()])
    assert isinstance(proxied[0], ffi.JsProxy)  # no conversion: a proxy of the Python object


def test_create_proxy_wraps_callables_with_destroy() -> None:
    calls: list[int] = []

    def fn(x: int) -> int:
        calls.append(x)
        return x * 2

    proxy = ffi.create_proxy(fn)
    assert proxy(2) == 4
    assert proxy.__name__ == "fn"
    assert "proxy of" in repr(proxy)
    copy = proxy.copy()
    proxy.destroy()
    with pytest.raises(RuntimeError, match="destroyed"):
        proxy(1)
    assert copy(3) == 6
    ffi.destroy_proxies([copy, "not a proxy"])
    with pytest.raises(RuntimeError):
        copy(1)
    data = {"k": 1}
    held = ffi.create_proxy(data)  # a JS handle on any object, as Pyodide's JsDoubleProxy
    assert isinstance(held, ffi.JsProxy) and held.unwrap() is data
    held.destroy()
    with pytest.raises(RuntimeError, match="destroyed"):
        held.unwrap()


def test_create_once_callable_may_be_called_once() -> None:
    calls: list[int] = []
    once = ffi.create_once_callable(lambda n: calls.append(n))
    once(1)
    with pytest.raises(RuntimeError, match="called twice"):
        once(2)
    assert calls == [1]


def test_ffi_functions_take_pyodides_keywords_only() -> None:
    assert ffi.to_js({"a": 1}, dict_converter=dict, depth=1, create_pyproxies=False) == {"a": 1}
    with pytest.raises(TypeError):
        ffi.to_js({}, made_up=True)  # type: ignore[call-arg]
    proxy = ffi.create_proxy(print, capture_this=False, roundtrip=True)
    with pytest.raises(TypeError):
        ffi.create_proxy(print, unknown=1)  # type: ignore[call-arg]
    proxy.destroy()


def test_jsproxy_matches_no_python_value() -> None:
    for value in (1, "s", b"b", [1], {"a": 1}, None, object()):
        assert not isinstance(value, ffi.JsProxy)


def test_js_buffer() -> None:
    buf = compat.as_js_buffer(b"abc")
    assert isinstance(buf, ffi.JsBuffer)
    assert isinstance(buf, ffi.JsProxy)
    assert isinstance(buf, bytes)
    assert buf == b"abc"
    assert buf.to_bytes() == b"abc" and type(buf.to_bytes()) is bytes
    assert buf.to_memoryview().tobytes() == b"abc"
    assert bytes(buf.to_py()) == b"abc"
    assert buf.to_string() == "abc"
    assert buf.byteLength == 3
    assert compat.as_js_buffer(buf) is buf
    assert compat.as_js_buffer(bytearray(b"x")) == b"x"


def test_js_exception() -> None:
    exc = ffi.JsException("TypeError", "bad thing")  # (name, message), as Pyodide's
    assert exc.message == "bad thing"
    assert exc.name == "TypeError"
    assert str(exc) == "TypeError: bad thing"
    assert isinstance(exc, Exception) and isinstance(exc, ffi.JsProxy)
    assert not isinstance(exc, TypeError)  # except TypeError: does not catch it on Cloudflare


def test_all_lists_are_explicit_and_resolve() -> None:
    import doemu.compat.fetch_api as fetch_api
    import doemu.compat.pyodide as pyodide_pkg
    import doemu.compat.relaxed as relaxed
    import doemu.compat.websocket as websocket

    for module in (compat, ffi, fetch_api, pyodide_pkg, relaxed, websocket):
        assert module.__all__, module
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"
