"""Named callbacks: how schedule and queue rows refer to, store, and call a method of the agent.

The SDK persists a callback as the *name* of an agent method (a function cannot be stored), so a
row outlives the process and is resolved again on the next activation. Python callers may also
pass the bound method itself; only its name is kept, after checking that the name leads back to
the same method. The SDK calls a callback with extra context — ``(payload, schedule)``,
``(payload, item)``, ``(attempt)`` — which a JavaScript function ignores by declaring fewer
parameters; :func:`call_with_optional_args` gives Python callbacks the same freedom.

Such rows (``cf_agents_schedules``, ``cf_agents_queues``) also share their id format
(:func:`new_id`, the SDK's ``nanoid(9)``) and payload spelling (:func:`to_json`, as
``JSON.stringify`` writes it, so identical payloads compare equal in SQL).
"""

from __future__ import annotations

import inspect
import json
import secrets
from collections.abc import Callable
from typing import Any

__all__ = ["call_with_optional_args", "callback_name", "find_callback", "new_id", "to_json"]

_ID_ALPHABET = "useandom-26T198340PX75pxJACKVERYMINDBUSHWOLF_GQZbfghjklqvwyzrict"


def new_id(size: int = 9) -> str:
    """A nanoid-style id (the SDK uses ``nanoid(9)`` for schedule and queue rows)."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(size))


def to_json(value: Any) -> str:
    """``JSON.stringify`` spelling (no spaces), so identical payloads compare equal in SQL."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def callback_name(agent: object, callback: str | Callable[..., Any]) -> str | None:
    """The method name to persist for ``callback``, or None if it is not a method of ``agent``."""
    if isinstance(callback, str):
        return callback if find_callback(agent, callback) is not None else None
    if not inspect.ismethod(callback) or callback.__self__ is not agent:
        return None
    name = callback.__name__
    found = find_callback(agent, name)
    if not inspect.ismethod(found) or found.__func__ is not callback.__func__:
        return None  # renamed or wrapped: the stored name would call something else
    return name


def find_callback(agent: object, name: str) -> Callable[..., Any] | None:
    """The callable attribute ``name`` of ``agent`` (dunder names never qualify)."""
    if not name or name.startswith("__"):
        return None
    value = getattr(agent, name, None)
    return value if callable(value) else None


async def call_with_optional_args(fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn`` with as many leading ``args`` as it accepts; await the result if needed."""
    result = fn(*args[: _positional_capacity(fn, len(args))])
    if inspect.isawaitable(result):
        result = await result
    return result


def _positional_capacity(fn: Callable[..., Any], available: int) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # no introspectable signature: pass everything
        return available
    count = 0
    for param in params:
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            return available
        if param.kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            count += 1
    return min(count, available)
