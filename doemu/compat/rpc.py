"""``python_to_rpc`` / ``python_from_rpc``: values across Workers RPC, as the SDK converts them.

On Cloudflare these turn Python values into JavaScript ones and back (dicts become plain JS
objects; ``datetime`` a ``Date``; objects with ``js_object`` their JS object; JS objects come
back as ``JsDict``, a dict whose keys also read as attributes). doemu has no JavaScript side, so
the conversions keep Python values, but refuse what the SDK refuses (``tuple``, ``bytearray``,
awaitables) and give ``JsDict`` back, so code written against them behaves the same.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from ..jsboundary import JsDict, _refuse_for_rpc, check_rpc_value, from_rpc_result

__all__ = ["JsDict", "check_rpc_value", "from_rpc_result", "python_from_rpc", "python_to_rpc"]


def _check(value: Any) -> None:
    _refuse_for_rpc(value)


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
