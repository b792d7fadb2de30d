"""Structured clone of JavaScript values: what ``ws.serializeAttachment`` keeps and gives back.

On Cloudflare an attachment is a JavaScript value cloned by V8. What Python hands to it must be a
JS value already: a string, number, boolean, ``None`` (``undefined``), ``jsnull``, or what
``to_js`` made (an Array, a plain Object, a Map, a typed array). A Python dict or list reaches
JavaScript as a proxy of the Python object, which cannot be cloned: ``DataCloneError: [object
Object] could not be cloned.`` What comes back is a JS value again: an Object as a ``JsObject``
(read by attribute, ``.to_py()`` for a dict), an Array as a ``JsArray``.

:func:`encode_js` / :func:`decode_js` do the same on :mod:`doemu.clone`'s msgpack format, keeping
which values were Objects, Maps and nulls in extension types of their own. Under ``--lenient``
(:func:`~doemu.jsboundary.is_strict` false) Python data is accepted and given back as Python data,
as doemu always did.
"""

from __future__ import annotations

from typing import Any

import msgpack

from .. import clone
from ..errors import DataCloneError
from ..jsboundary import hinted, is_strict
from .jsproxy import JsBuffer, _Proxy
from .jsvalues import JsArray, JsMap, JsObject, jsnull

__all__ = ["decode_js", "encode_js"]

_OBJECT = clone.FIRST_CALLER_EXT
_MAP = clone.FIRST_CALLER_EXT + 1
_NULL = clone.FIRST_CALLER_EXT + 2
_ARRAY = clone.FIRST_CALLER_EXT + 3
_NOT_CLONABLE = "[object Object] could not be cloned."


def _packable(value: Any) -> Any:
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if value is jsnull:
        return msgpack.ExtType(_NULL, b"")
    if isinstance(value, JsBuffer):
        return bytes(value)
    if isinstance(value, JsObject):
        props = object.__getattribute__(value, "_props")
        return msgpack.ExtType(_OBJECT, clone.encode({k: _packable(v) for k, v in props.items()}))
    if isinstance(value, JsArray):
        return msgpack.ExtType(_ARRAY, clone.encode([_packable(v) for v in value]))
    if isinstance(value, JsMap):
        return msgpack.ExtType(
            _MAP, clone.encode([[_packable(k), _packable(v)] for k, v in value.items()])
        )
    if isinstance(value, _Proxy):
        raise DataCloneError(_NOT_CLONABLE)  # a proxy of a Python object, as on Cloudflare
    raise hinted(DataCloneError(_NOT_CLONABLE), _hint(value))


def _hint(value: Any) -> str:
    return (
        f"a Python {type(value).__name__} reaches JavaScript as a proxy, which cannot be "
        "cloned on Cloudflare; pass to_js(value, dict_converter=Object.fromEntries), or a string "
        "such as json.dumps(value)"
    )


def encode_js(value: Any) -> bytes:
    """``value`` cloned as V8 would clone it (see the module docstring)."""
    if not is_strict():
        return clone.encode(value)
    return clone.encode(_packable(value))


def _extension(code: int, data: bytes) -> Any:
    if code == _NULL:
        return jsnull
    if code == _OBJECT:
        return JsObject(clone.decode(data, extensions=_extension))
    if code == _ARRAY:
        return JsArray(clone.decode(data, extensions=_extension))
    if code == _MAP:
        return JsMap({k: v for k, v in clone.decode(data, extensions=_extension)})
    raise DataCloneError(f"Could not deserialize value: unknown msgpack extension type {code}")


def decode_js(data: bytes) -> Any:
    """A fresh copy of what :func:`encode_js` kept, as JavaScript values."""
    return clone.decode(data, extensions=_extension)
