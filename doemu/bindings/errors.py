"""Errors a binding raises into user code: JavaScript errors, as Pyodide presents them.

On Cloudflare a binding is a JavaScript object; when it rejects a call (a key too long, bad SQL,
an unsatisfiable range) Python code receives a ``pyodide.ffi.JsException`` whose ``name`` is the
JS error's (``Error``, ``TypeError``, ``SyntaxError``), whose ``message`` is its text, and whose
``str()`` is ``"<name>: <message>"``. :class:`BindingError` is that exception
(:class:`doemu.jsboundary.JsException`, so ``except JsException`` works as on Cloudflare, and, as
there, a JS ``TypeError`` is not a Python ``TypeError``) and a :class:`~doemu.errors.DoemuError`.
"""

from __future__ import annotations

from ..errors import DoemuError
from ..jsboundary import JsException

__all__ = ["BindingError", "BindingSyntaxError", "BindingTypeError", "ServiceError"]


class BindingError(DoemuError, JsException):
    """A JS ``Error`` raised by a binding (KV, D1, R2…): ``name``, ``message``, ``str()``."""

    js_name = "Error"


class BindingTypeError(BindingError):
    """A JS ``TypeError`` raised by a binding (a value or option of the wrong kind)."""

    js_name = "TypeError"


class BindingSyntaxError(BindingError):
    """A JS ``SyntaxError``: a value read as JSON is not JSON."""

    js_name = "SyntaxError"


class ServiceError(BindingError):
    """A service binding cannot make the call (another Worker, a missing method)."""
