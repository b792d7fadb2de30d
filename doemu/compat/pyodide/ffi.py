"""``pyodide.ffi`` as Python Workers code imports it (``to_js``, ``create_proxy``, ``JsProxy``…).

In doemu every "JS" API is already Python, so the conversions are identities; see
:mod:`doemu.compat.jsproxy`. This module holds exactly the names user code may import.
"""

from doemu.compat.jsproxy import (
    JsArray,
    JsBuffer,
    JsException,
    JsMap,
    JsNull,
    JsProxy,
    create_once_callable,
    create_proxy,
    destroy_proxies,
    jsnull,
    to_js,
)

__all__ = [
    "JsArray",
    "JsBuffer",
    "JsException",
    "JsMap",
    "JsNull",
    "JsProxy",
    "create_once_callable",
    "create_proxy",
    "destroy_proxies",
    "jsnull",
    "to_js",
]
