"""Errors a binding raises into user code: JavaScript errors, as Pyodide presents them.

On Cloudflare a binding is a JavaScript object; when it rejects a call (a key too long, bad SQL,
an unsatisfiable range) Python code receives a ``pyodide.ffi.JsException`` whose ``name`` is the
JS error's (``Error``, ``TypeError``), whose ``message`` is its text, and whose ``str()`` is
``"<name>: <message>"``. :class:`BindingError` is that shape (a ``JsException``, so ``except
JsException`` works as on Cloudflare) and a :class:`~doemu.errors.DoemuError`; the ``TypeError``
flavour is also a Python ``TypeError``, the house rule for JS type errors.
"""

from __future__ import annotations

from ..compat.jsproxy import JsException
from ..errors import DoemuError

__all__ = ["BindingError", "BindingSyntaxError", "BindingTypeError", "ServiceError"]


class BindingError(DoemuError, JsException):
    """A JS ``Error`` raised by a binding (KV, D1, R2…): ``name``, ``message``, ``str()``."""

    js_name = "Error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self._message = message

    @property
    def name(self) -> str:
        return self.js_name

    @property
    def message(self) -> str:
        return self._message

    def __str__(self) -> str:
        return f"{self.js_name}: {self._message}"


class BindingTypeError(BindingError, TypeError):
    """A JS ``TypeError`` raised by a binding (a value or option of the wrong kind)."""

    js_name = "TypeError"


class BindingSyntaxError(BindingError, ValueError):
    """A JS ``SyntaxError``: a value read as JSON is not JSON."""

    js_name = "SyntaxError"


class ServiceError(BindingError):
    """A service binding cannot make the call (another Worker, a missing method)."""
