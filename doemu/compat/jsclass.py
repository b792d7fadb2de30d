"""``JsClass``: what makes ``X.new(...)`` work on a class and not on its instances.

Through Pyodide, ``js.TransformStream.new()`` calls the JavaScript constructor; a stream itself
has no ``new``. Defining ``new`` on the metaclass gives exactly that: the class answers
``new``, its instances do not (nor does ``dir()`` of an instance list it).
"""

from __future__ import annotations

from typing import Any

__all__ = ["JsClass"]


class JsClass(type):
    """Metaclass of doemu's JavaScript constructors; a class defines ``_new`` to build one."""

    def new(cls, *args: Any, **kwargs: Any) -> Any:
        """``new X(...args)``."""
        return cls._new(*args, **kwargs)  # type: ignore[attr-defined]
