"""``call_relaxed``: call a user handler with as many positional arguments as it accepts.

The runtime passes every handler Cloudflare's full argument list (``alarm(alarm_info)``,
``webSocketClose(ws, code, reason, wasClean)``), but Python Workers code often declares fewer
(``async def alarm(self)``, ``def webSocketClose(self, ws, code, reason)``). Extra trailing
positional arguments are dropped; a handler with ``*args`` receives them all.

The arity is computed once per function object and cached (handlers are called on hot paths), from
the code object for plain functions and bound methods and with ``inspect.signature`` otherwise
(decorated functions with ``__wrapped__``, ``functools.partial``, callable objects).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from types import FunctionType, MethodType
from typing import Any, TypeVar

__all__ = ["call_relaxed", "max_positional"]

T = TypeVar("T")

#: Unlimited positional arguments (``*args``, or a signature that cannot be inspected).
UNLIMITED = -1
_CACHE_LIMIT = 4096
_cache: dict[Any, int] = {}


def _compute(fn: Any) -> int:
    """Positional arguments ``fn`` accepts (``UNLIMITED`` for ``*args``), ``self`` included."""
    if type(fn) is FunctionType and not hasattr(fn, "__wrapped__"):
        code = fn.__code__
        if code.co_flags & inspect.CO_VARARGS:
            return UNLIMITED
        return code.co_argcount
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return UNLIMITED
    count = 0
    for param in sig.parameters.values():
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            return UNLIMITED
        if param.kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            count += 1
    return count


def _cached(fn: Any) -> int:
    try:
        return _cache[fn]
    except KeyError:
        pass
    except TypeError:  # unhashable callable
        return _compute(fn)
    arity = _compute(fn)
    if len(_cache) >= _CACHE_LIMIT:
        _cache.clear()
    _cache[fn] = arity
    return arity


def max_positional(fn: Callable[..., Any]) -> int:
    """How many positional arguments a call to ``fn`` may pass (``-1``: any number)."""
    if isinstance(fn, MethodType):
        arity = _cached(fn.__func__)
        return arity if arity == UNLIMITED else max(arity - 1, 0)
    if isinstance(fn, FunctionType):
        return _cached(fn)
    if isinstance(fn, functools.partial):
        return _compute(fn)  # partials are usually short-lived: do not cache them
    return _cached(fn)


def call_relaxed(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, dropping trailing positional arguments ``fn`` does not accept."""
    limit = max_positional(fn)
    if limit != UNLIMITED and len(args) > limit:
        args = args[:limit]
    return fn(*args)
