"""Structured-clone rules for values that are stored or cross an object boundary.

Cloudflare copies every value it stores (``storage.put``) or sends between objects (RPC arguments
and results, WebSocket attachments) with the structured-clone algorithm: the receiver gets an
independent deep copy, and values that cannot be copied (functions, class instances, sockets…) are
refused with a ``DataCloneError``. doemu does the same with msgpack, so one object can never hold
a reference into another object's memory, and what survives a restart is exactly what was stored.

What round-trips (Python value → what comes back):

* ``None``, ``bool``, ``int`` of any size, ``float`` (including nan and ±inf), ``str``;
* ``bytes``, ``bytearray`` and ``memoryview`` → ``bytes`` (JavaScript's ``ArrayBuffer``);
* ``list`` and ``tuple`` → ``list`` (JavaScript has one array type);
* ``dict`` → ``dict`` (JavaScript's ``Map``, which Pyodide produces from a dict). Keys may be any
  clonable hashable value; tuple and frozenset keys come back as tuple and frozenset, because a
  list or set cannot be a key;
* ``set`` and ``frozenset`` → ``set``;
* ``datetime.datetime`` (naive or aware; an aware value comes back with a fixed-offset zone) and
  ``datetime.date``.

Subclasses of the built-in containers and scalars (``IntEnum``, ``OrderedDict``…) are copied as
their base type, as structured clone copies an object's data and drops its prototype. Everything
else raises :class:`~doemu.errors.DataCloneError` with workerd's text, naming the type.

Cycles cannot be represented. msgpack's C packer stops at 511 levels of nesting, which turns a
reference cycle into a ``DataCloneError`` instead of endless recursion (and refuses absurdly deep,
but acyclic, values too). This is the hot path of storage and RPC, so the encoder never walks the
value in Python: the C packer does the work and calls back only for the few types above that it
cannot pack natively.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from typing import Any

import msgpack

from doemu.errors import DataCloneError

__all__ = ["FIRST_CALLER_EXT", "clone", "decode", "encode", "unsupported_type_message"]

# msgpack extension type codes. They are part of the on-disk format of stored values: never reuse
# or renumber one.
_EXT_BIGINT = 0
_EXT_SET = 1
_EXT_DATETIME = 2
_EXT_DATE = 3
#: Codes from here up are the callers' own (see :func:`decode`'s ``extensions``).
FIRST_CALLER_EXT = 16


def unsupported_type_message(type_name: str) -> str:
    """workerd's ``DataCloneError`` text for a value of type ``type_name``."""
    return (
        f'Could not serialize object of type "{type_name}". '
        "This type does not support serialization."
    )


def _default(obj: object) -> msgpack.ExtType:
    """Called by the C packer only for values it cannot pack natively."""
    if isinstance(obj, int):  # only reached when outside the 64-bit range msgpack supports
        size = (obj.bit_length() + 8) // 8
        return msgpack.ExtType(_EXT_BIGINT, obj.to_bytes(size, "big", signed=True))
    if isinstance(obj, (set, frozenset)):
        return msgpack.ExtType(_EXT_SET, _pack(list(obj)))
    if isinstance(obj, _dt.datetime):
        return msgpack.ExtType(_EXT_DATETIME, obj.isoformat().encode())
    if isinstance(obj, _dt.date):
        return msgpack.ExtType(_EXT_DATE, obj.isoformat().encode())
    raise DataCloneError(unsupported_type_message(type(obj).__name__))


def _pack(value: Any) -> bytes:
    packed: bytes = msgpack.packb(value, default=_default, use_bin_type=True, datetime=False)
    return packed


def encode(value: Any) -> bytes:
    """Serialize ``value`` under structured-clone rules; raises ``DataCloneError`` if refused."""
    try:
        return _pack(value)
    except DataCloneError:
        raise
    except ValueError as exc:  # msgpack's recursion limit: a reference cycle, or absurd depth
        raise DataCloneError(
            f"Could not serialize value: {exc} A reference cycle (or nesting deeper than 511 "
            "levels) cannot be cloned."
        ) from None
    except (TypeError, OverflowError) as exc:
        raise DataCloneError(f"Could not serialize value: {exc}") from None


def _hashable(value: Any) -> Any:
    """Turn a decoded list/set back into a tuple/frozenset so it can be a dict key or set item."""
    if isinstance(value, list):
        return tuple(_hashable(item) for item in value)
    if isinstance(value, set):
        return frozenset(value)
    return value


def _ext_hook(code: int, data: bytes) -> Any:
    if code == _EXT_BIGINT:
        return int.from_bytes(data, "big", signed=True)
    if code == _EXT_SET:
        items = _unpack(data)
        try:
            return set(items)
        except TypeError:  # tuple/frozenset members decode as list/set: make them hashable again
            return {_hashable(item) for item in items}
    if code == _EXT_DATETIME:
        return _dt.datetime.fromisoformat(data.decode())
    if code == _EXT_DATE:
        return _dt.date.fromisoformat(data.decode())
    raise DataCloneError(f"Could not deserialize value: unknown msgpack extension type {code}")


def _pairs_with_hashable_keys(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    return {_hashable(key): value for key, value in pairs}


def _unpack(data: bytes, ext_hook: Callable[[int, bytes], Any] = _ext_hook) -> Any:
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=ext_hook)
    except TypeError:
        # A tuple or frozenset dict key was packed as an array or set, which cannot be a key when
        # decoded. Rare, so it takes a slower second pass instead of slowing down every decode.
        return msgpack.unpackb(
            data,
            raw=False,
            strict_map_key=False,
            ext_hook=ext_hook,
            object_pairs_hook=_pairs_with_hashable_keys,
        )


def decode(data: bytes, *, extensions: Callable[[int, bytes], Any] | None = None) -> Any:
    """Rebuild a value from :func:`encode`'s output.

    ``extensions(code, data)`` decodes msgpack extension types of codes 16 and up, which a
    caller packed itself as ``msgpack.ExtType`` (the JS values of WebSocket attachments).
    """
    hook = _ext_hook
    if extensions is not None:
        extra = extensions

        def hook(code: int, data: bytes) -> Any:
            return extra(code, data) if code >= FIRST_CALLER_EXT else _ext_hook(code, data)

    try:
        return _unpack(data, hook)
    except DataCloneError:
        raise
    except (ValueError, TypeError) as exc:
        raise DataCloneError(f"Could not deserialize value: {exc}") from None


def clone(value: Any) -> Any:
    """A deep, independent copy of ``value``, refused exactly where :func:`encode` refuses."""
    return decode(encode(value))
