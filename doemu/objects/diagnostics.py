"""Mistakes in a Durable Object class that Python reports far from where they were made.

A constructor that forgets ``super().__init__(ctx, env)`` leaves ``self.ctx`` and ``self.env``
unset, exactly as on Cloudflare; the mistake then surfaces in some later handler as ``'Counter'
object has no attribute 'ctx'``, which does not say what to do. :func:`check_constructed` looks
right after construction and logs, once per class, the constructor's file and line and the fix;
:func:`explain` adds the same sentence to that ``AttributeError`` when it is raised. Nothing is
set on the user's behalf: code that works here must work when deployed.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from ..tracebacks import RemoteTraceback, user_traceback

__all__ = ["check_constructed", "explain", "forgot_await", "remote_cause"]

_log = logging.getLogger("doemu.objects")
_warned: set[type] = set()
_ATTRIBUTES = ("ctx", "env")


def _where(cls: type) -> str:
    """``src/entry.py:8`` for ``cls.__init__`` (best effort)."""
    init = cls.__dict__.get("__init__") or getattr(cls, "__init__", None)
    try:
        file = inspect.getsourcefile(init) if init is not None else None
        line = inspect.getsourcelines(init)[1] if init is not None else None
    except (OSError, TypeError):
        return cls.__qualname__
    return f"{file}:{line}" if file else cls.__qualname__


def _advice(cls: type) -> str:
    return (
        f"{cls.__qualname__}.__init__ ({_where(cls)}) does not call super().__init__(ctx, env), "
        "so self.ctx and self.env are never set (as on Cloudflare); call it first in __init__"
    )


def _skipped_super(instance: Any) -> bool:
    attributes = getattr(instance, "__dict__", None)
    return attributes is not None and not any(a in attributes for a in _ATTRIBUTES)


def check_constructed(instance: Any) -> None:
    """Log (once per class) when ``instance``'s constructor skipped ``super().__init__``."""
    cls = type(instance)
    if cls not in _warned and _skipped_super(instance):
        _warned.add(cls)
        _log.warning("%s", _advice(cls))


#: The types an awaitable has when it was used as a value: a coroutine (an RPC call, an async
#: function), a storage call's result (``Resolved``), a task or future.
_AWAITABLE_TYPES = ("'coroutine'", "'Resolved'", "'Task'", "'Future'", '"coroutine"', '"Resolved"')


def _add_note(exc: BaseException, note: str) -> None:
    if note not in getattr(exc, "__notes__", ()):
        exc.add_note(note)


def explain(exc: BaseException) -> None:
    """Add advice to an exception doemu recognises as a mistake with a simple fix: an
    ``AttributeError`` for ``ctx``/``env`` after a constructor that skipped ``super().__init__``,
    and a ``TypeError`` (or ``DataCloneError``) about a coroutine or a storage result: an
    ``await`` was forgotten at the line the traceback shows."""
    if (
        isinstance(exc, AttributeError)
        and exc.name in _ATTRIBUTES
        and _skipped_super(getattr(exc, "obj", None))
    ):
        _add_note(exc, _advice(type(exc.obj)))
    elif isinstance(exc, TypeError | AttributeError) or type(exc).__name__ == "DataCloneError":
        if any(name in str(exc) for name in _AWAITABLE_TYPES):
            _add_note(exc, forgot_await())


def forgot_await(where: str | None = None) -> str:
    """The advice for an awaitable used as a value (``where``: the code that produced it)."""
    at = f" in {where}" if where else " at the line above"
    return (
        f"An awaitable was used as a value{at}: did you forget `await` before an RPC call, "
        "a storage call or an async function?"
    )


def method_location(cls: type, method: str) -> str:
    """``Counter.value (src/entry.py:12)``: where an RPC method is defined (best effort)."""
    function = getattr(cls, method, None)
    try:
        file = inspect.getsourcefile(function)  # type: ignore[arg-type]
        line = inspect.getsourcelines(function)[1]  # type: ignore[arg-type]
    except (OSError, TypeError):
        return f"{cls.__qualname__}.{method}"
    return f"{cls.__qualname__}.{method} ({file}:{line})"


def remote_cause(exc: BaseException, class_name: str, method: str) -> RemoteTraceback:
    """The cause an RPC caller's copy of ``exc`` is raised from: the object's own frames.

    The copy keeps the type and message (errors cross by value); without a cause, the caller
    saw only its own line and doemu's stub, never the line of the object that raised.
    """
    explain(exc)
    return RemoteTraceback(
        user_traceback(
            exc,
            headline=f"Traceback of {class_name}.{method}() in the object (most recent call last):",
        )
    )
