"""``python_to_rpc`` / ``python_from_rpc``: values across Workers RPC, as the SDK converts them.

On Cloudflare these turn Python values into JavaScript ones and back (dicts become plain JS
objects; ``datetime`` a ``Date``; objects with ``js_object`` their JS object; JS objects come
back as ``JsDict``, a dict whose keys also read as attributes). doemu has no JavaScript side, so
the conversions keep Python values, but refuse what the SDK refuses (``tuple``, ``bytearray``,
awaitables) and give ``JsDict`` back, so code written against them behaves the same.
"""

from __future__ import annotations

import datetime as _dt
import inspect
from typing import Any

__all__ = ["JsDict", "check_rpc_value", "from_rpc_result", "python_from_rpc", "python_to_rpc"]


class JsDict(dict[str, Any]):
    """A JS object come back from RPC: a dict whose keys also read as attributes."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _check(value: Any) -> None:
    if isinstance(value, tuple | bytearray):
        raise TypeError(f"{type(value)} cannot be sent over RPC.")
    if inspect.isawaitable(value):
        raise TypeError(f"Awaitable {type(value)} cannot be sent over RPC.")


def check_rpc_value(value: Any) -> None:
    """Refuse what the Python SDK refuses to send over RPC, anywhere inside ``value``: a
    ``tuple``, a ``bytearray``, an awaitable, with the SDK's ``TypeError`` text."""
    _check(value)
    if isinstance(value, dict):
        for item in value.values():
            check_rpc_value(item)
    elif isinstance(value, list | set | frozenset):
        for item in value:
            check_rpc_value(item)


def from_rpc_result(value: Any) -> Any:
    """A value received over RPC as the SDK gives it to Python: objects as :class:`JsDict`
    (nested too), ArrayBuffers as ``memoryview``."""
    if isinstance(value, bytes):
        return memoryview(value)
    if isinstance(value, dict):
        return JsDict({str(k): from_rpc_result(v) for k, v in value.items()})
    if isinstance(value, list):
        return [from_rpc_result(item) for item in value]
    return value


def python_to_rpc(value: Any) -> Any:
    """``value`` as it would cross an RPC boundary from Python (see the module docstring)."""
    _check(value)
    if isinstance(value, dict):
        return {key: python_to_rpc(item) for key, item in value.items()}
    if isinstance(value, list):
        return [python_to_rpc(item) for item in value]
    js_object = getattr(value, "js_object", None)
    return value if js_object is None else js_object


def python_from_rpc(value: Any) -> Any:
    """A value received over RPC, as Python sees it: mappings as :class:`JsDict`."""
    if isinstance(value, dict) and not isinstance(value, JsDict):
        return JsDict({str(k): python_from_rpc(v) for k, v in value.items()})
    if isinstance(value, list):
        return [python_from_rpc(item) for item in value]
    if isinstance(value, _dt.datetime) and value.tzinfo is not None:
        return value.astimezone().replace(tzinfo=None)  # the SDK gives naive local datetimes
    return value
