"""``env.KV``: a KV namespace as Cloudflare's Python Workers API presents it.

Methods take what the JS ``KVNamespace`` takes, as the SDK's binding wrapper passes it (see
:mod:`doemu.bindings.boundary`): ``get(key, type)`` or ``get(key, type="json", cacheTtl=60)``,
``get([k1, k2])`` for several keys at once, ``getWithMetadata``, ``put(key, value,
expirationTtl=…, expiration=…, metadata=…)``, ``delete(key)`` and ``list(prefix=…, limit=…,
cursor=…)``. Results come back as they do there: ``str`` / ``None`` / ``memoryview`` /
``ReadableStream`` values, ``JsDict`` objects (``result.keys``, ``result.list_complete``).

Cloudflare's limits apply always, with its texts: keys at most 512 UTF-8 bytes (not empty, not
``.`` or ``..``), values at most 25 MiB, metadata at most 1024 bytes of JSON, ``expirationTtl``
at least 60 s, ``expiration`` at least 60 s ahead, ``cacheTtl`` at least 30 s (accepted and
otherwise ignored: there is no edge cache locally), ``limit`` at most 1000, 100 keys per bulk
get. An option spelled otherwise (``expiration_ttl``) is ignored, as the JS binding ignores it;
doemu logs a warning the first time, because silently ignored TTLs are a classic bug.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ...compat.bodies import read_all
from ...compat.jsproxy import JsBuffer
from ...compat.readable import ReadableStream, stream_of
from ...compat.rpc import JsDict
from ..boundary import after, call, js_arguments, js_json_parse, js_string, settled, to_python
from ..errors import BindingError, BindingTypeError
from .store import KvStore

__all__ = ["KV_LIMITS", "KVNamespace", "KvError"]

_log = logging.getLogger("doemu.bindings.kv")

#: Cloudflare's KV limits (bytes, seconds, counts).
KV_LIMITS = {
    "key_bytes": 512,
    "value_bytes": 25 * 1024 * 1024,
    "metadata_bytes": 1024,
    "min_expiration_ttl": 60,
    "min_cache_ttl": 30,
    "list_limit": 1000,
    "bulk_keys": 100,
}

#: A call's JS arguments (an alias: ``list`` is a method name in the class below).
_Args = list[Any]

_TYPES = ("text", "arrayBuffer", "json", "stream")
_GET_OPTIONS = frozenset({"type", "cacheTtl"})
_PUT_OPTIONS = frozenset({"expiration", "expirationTtl", "metadata"})
_LIST_OPTIONS = frozenset({"prefix", "limit", "cursor"})
_warned: set[str] = set()


class KvError(BindingError):
    """``KV <OP> failed: <status> <text>``: the KV service refused the operation."""

    def __init__(self, op: str, status: int, text: str) -> None:
        super().__init__(f"KV {op} failed: {status} {text}")
        self.op = op
        self.status = status


class KVNamespace:
    """One KV namespace bound as ``env.<binding>`` (see the module docstring)."""

    __slots__ = ("_binding", "_open")

    def __init__(self, binding: str, open_store: Callable[[], KvStore]) -> None:
        self._binding = binding
        #: The namespace's store, opened on first use (a cached lookup after that).
        self._open = open_store

    def __repr__(self) -> str:
        return f"<KVNamespace {self._binding}>"

    # -- reads --------------------------------------------------------------------------------
    def get(self, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        """``get(key, type | {type, cacheTtl})``; a list of keys reads them all at once."""
        values = js_arguments(args, kwargs)
        return call(lambda: settled(self._get(values, with_metadata=False)))

    def getWithMetadata(self, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        """``{value, metadata, cacheStatus}`` (``value`` and ``metadata`` ``None`` if absent)."""
        values = js_arguments(args, kwargs)
        return call(lambda: settled(self._get(values, with_metadata=True)))

    def _get(self, values: _Args, *, with_metadata: bool) -> Any:
        key, options = _arg(values, 0), _arg(values, 1)
        kind, cache_ttl = "text", None
        if isinstance(options, str):
            kind = options
        elif isinstance(options, dict):
            _check_options(self._binding, "get", options, _GET_OPTIONS)
            kind = options.get("type") or "text"
            cache_ttl = options.get("cacheTtl")
        elif options is not None:
            kind = js_string(options)
        if isinstance(key, list):
            return self._get_bulk(key, kind, cache_ttl, with_metadata)
        if kind not in _TYPES:
            raise BindingTypeError(
                'Unknown response type. Possible types are "text", "arrayBuffer", "json", '
                'and "stream".'
            )
        name = _key(key, "GET")
        _check_cache_ttl(cache_ttl, "GET")
        entry = self._open().get(name)
        if entry is None:
            value: Any = None
            metadata: Any = None
        else:
            value = _decode(entry.value, kind)
            metadata = None if entry.metadata is None else json.loads(entry.metadata)
        if not with_metadata:
            return value
        return JsDict(value=value, metadata=to_python(metadata), cacheStatus=None)

    def _get_bulk(self, keys: _Args, kind: Any, cache_ttl: Any, with_metadata: bool) -> Any:
        if kind not in ("text", "json"):
            raise KvError("GET_BULK", 400, f'"{js_string(kind)}" is not a valid type. Use "json" '
                          'or "text"')  # fmt: skip
        if len(keys) > KV_LIMITS["bulk_keys"]:
            raise KvError(
                "GET_BULK", 400, f"You can request a maximum of {KV_LIMITS['bulk_keys']} keys"
            )
        if not keys:
            raise KvError("GET_BULK", 400, "You must request a minimum of 1 key")
        result = JsDict()
        for raw in keys:
            name = _key(raw, "GET_BULK")
            _check_cache_ttl(cache_ttl, "GET_BULK")
            entry = self._open().get(name)
            if entry is None:
                result[name] = None
                continue
            text = entry.value.decode("utf-8", "replace")
            if kind == "json":
                try:
                    value: Any = to_python(json.loads(text))
                except json.JSONDecodeError:
                    raise KvError(
                        "GET_BULK",
                        400,
                        "At least one of the requested keys corresponds to a non-json value",
                    ) from None
            else:
                value = text
            if with_metadata:
                metadata = None if entry.metadata is None else to_python(json.loads(entry.metadata))
                result[name] = JsDict(value=value, metadata=metadata)
            else:
                result[name] = value
        return result

    def list(self, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        """``{keys: [{name, expiration?, metadata?}], list_complete, cursor?, cacheStatus}``."""
        values = js_arguments(args, kwargs)
        return call(lambda: settled(self._list(_arg(values, 0))))

    def _list(self, options: Any) -> JsDict:
        options = options if isinstance(options, dict) else {}
        _check_options(self._binding, "list", options, _LIST_OPTIONS)
        prefix = options.get("prefix")
        prefix = "" if prefix is None else js_string(prefix)
        limit = _list_limit(options.get("limit"))
        cursor = options.get("cursor")
        if len(prefix.encode()) > KV_LIMITS["key_bytes"]:
            raise KvError(
                "GET", 414, f"UTF-8 encoded length of {len(prefix.encode())} exceeds key length "
                f"limit of {KV_LIMITS['key_bytes']}."
            )  # fmt: skip
        page = self._open().list(prefix, limit, None if cursor is None else js_string(cursor))
        keys = []
        for name, expiration, metadata in page.keys:
            item = JsDict(name=name)
            if expiration is not None:
                item["expiration"] = expiration
            if metadata is not None:
                item["metadata"] = to_python(json.loads(metadata))
            keys.append(item)
        result = JsDict(keys=keys, list_complete=page.cursor is None)
        if page.cursor is not None:
            result["cursor"] = page.cursor
        result["cacheStatus"] = None
        return result

    # -- writes -------------------------------------------------------------------------------
    def put(self, *args: Any, **kwargs: Any) -> Awaitable[None]:
        """``put(key, value, {expiration, expirationTtl, metadata})``; resolves once stored
        (and, at power durability, fsynced)."""
        values = js_arguments(args, kwargs)
        value = _arg(values, 1)
        if isinstance(value, ReadableStream):
            return self._put_stream(values, value)
        return call(lambda: self._put(values, _value_bytes(value)))

    def _put_stream(self, values: _Args, stream: ReadableStream) -> Awaitable[None]:
        async def work() -> None:
            await self._put(values, await read_all(stream))

        return call(work)

    def _put(self, values: _Args, data: bytes) -> Awaitable[None]:
        key, options = _arg(values, 0), _arg(values, 2)
        options = options if isinstance(options, dict) else {}
        _check_options(self._binding, "put", options, _PUT_OPTIONS)
        name = _key(key, "PUT")
        now = int(self._open().now())
        expiration = _expiration(options, now)
        metadata = options.get("metadata")
        metadata_json = None
        if metadata is not None:
            metadata_json = json.dumps(metadata, separators=(",", ":"), ensure_ascii=False)
            size = len(metadata_json.encode())
            if size > KV_LIMITS["metadata_bytes"]:
                raise KvError(
                    "PUT", 413, f"Metadata length of {size} exceeds limit of "
                    f"{KV_LIMITS['metadata_bytes']}."
                )  # fmt: skip
        if len(data) > KV_LIMITS["value_bytes"]:
            raise KvError(
                "PUT", 413, f"Value length of {len(data)} exceeds limit of "
                f"{KV_LIMITS['value_bytes']}."
            )  # fmt: skip
        return after(self._open().put(name, data, expiration, metadata_json), None)

    def delete(self, *args: Any, **kwargs: Any) -> Awaitable[None]:
        """Remove a key (nothing happens if it is absent)."""
        values = js_arguments(args, kwargs)

        def work() -> Awaitable[None]:
            name = _key(_arg(values, 0), "DELETE")
            return after(self._open().delete(name), None)

        return call(work)


def _arg(values: list[Any], index: int) -> Any:
    return values[index] if index < len(values) else None


def _key(raw: Any, op: str) -> str:
    """The key as the JS binding sees it (``String(key)``), checked as it checks it."""
    if raw is None and op != "PUT":
        raw = "null"
    key = js_string(raw)
    if key == "":
        raise BindingTypeError("Key name cannot be empty.")
    if key in (".", ".."):
        raise BindingTypeError(f'"{key}" is not allowed as a key name.')
    size = len(key.encode())
    if size > KV_LIMITS["key_bytes"]:
        raise KvError(
            op, 414, f"UTF-8 encoded length of {size} exceeds key length limit of "
            f"{KV_LIMITS['key_bytes']}."
        )  # fmt: skip
    return key


def _value_bytes(value: Any) -> bytes:
    """A value to store, as the JS binding converts it (strings, buffers; primitives become
    their string, objects are refused)."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, JsBuffer):
        return bytes(value)
    if isinstance(value, bytes | memoryview):
        return bytes(value)
    if value is None or isinstance(value, bool | int | float):
        return js_string(value).encode()
    raise BindingTypeError(
        "KV put() accepts only strings, ArrayBuffers, ArrayBufferViews, and ReadableStreams as "
        "values."
    )


def _decode(value: bytes, kind: str) -> Any:
    if kind == "arrayBuffer":
        return memoryview(value)
    if kind == "stream":
        return stream_of(value)
    text = value.decode("utf-8", "replace")
    if kind == "json":
        return to_python(js_json_parse(text))
    return text


def _js_int(value: Any) -> int | None:
    """JavaScript's ``parseInt(String(value))`` (``None`` for NaN)."""
    text = js_string(value).strip()
    digits = ""
    for index, char in enumerate(text):
        if char.isdigit() or (index == 0 and char in "+-"):
            digits += char
        else:
            break
    try:
        return int(digits)
    except ValueError:
        return None


def _expiration(options: dict[str, Any], now: int) -> int | None:
    """The absolute expiration (seconds) the options ask for; ``expirationTtl`` wins."""
    ttl_raw, at_raw = options.get("expirationTtl"), options.get("expiration")
    if ttl_raw is not None:
        ttl = _js_int(ttl_raw)
        shown = js_string(ttl_raw)
        if ttl is None or ttl <= 0:
            raise KvError(
                "PUT", 400, f"Invalid expiration_ttl of {shown}. Please specify integer greater "
                "than 0."
            )  # fmt: skip
        if ttl < KV_LIMITS["min_expiration_ttl"]:
            raise KvError(
                "PUT", 400, f"Invalid expiration_ttl of {shown}. Expiration TTL must be at "
                f"least {KV_LIMITS['min_expiration_ttl']}."
            )  # fmt: skip
        return now + ttl
    if at_raw is not None:
        at = _js_int(at_raw)
        shown = js_string(at_raw)
        if at is None or at <= now:
            raise KvError(
                "PUT", 400, f"Invalid expiration of {shown}. Please specify integer greater "
                "than the current number of seconds since the UNIX epoch."
            )  # fmt: skip
        if at < now + KV_LIMITS["min_expiration_ttl"]:
            raise KvError(
                "PUT", 400, f"Invalid expiration of {shown}. Expiration times must be at least "
                f"{KV_LIMITS['min_expiration_ttl']} seconds in the future."
            )  # fmt: skip
        return at
    return None


def _check_cache_ttl(value: Any, op: str) -> None:
    if value is None:
        return
    ttl = _js_int(value)
    if ttl is None or ttl < KV_LIMITS["min_cache_ttl"]:
        raise KvError(
            op, 400, f"Invalid cache_ttl of {js_string(value)}. Cache TTL must be at least "
            f"{KV_LIMITS['min_cache_ttl']}."
        )  # fmt: skip


def _list_limit(value: Any) -> int:
    """The page size: the default for a missing, zero or negative limit (the JS binding sends
    none then, as Miniflare shows), else at most 1000."""
    limit = None if value is None else _js_int(value)
    if limit is None or limit < 1:
        return KV_LIMITS["list_limit"]
    if limit > KV_LIMITS["list_limit"]:
        raise KvError(
            "GET", 400, f"Invalid key_count_limit of {js_string(value)}. Please specify an "
            f"integer less than {KV_LIMITS['list_limit']}."
        )  # fmt: skip
    return limit


def _check_options(
    binding: str, method: str, options: dict[str, Any], known: frozenset[str]
) -> None:
    """Unknown options are ignored, as by the JS binding; the first time, say so in the log."""
    for name in options:
        if name not in known and f"{method}.{name}" not in _warned:
            _warned.add(f"{method}.{name}")
            _log.warning(
                "env.%s.%s(): option %r is not a KV option and is ignored (known: %s)",
                binding, method, name, ", ".join(sorted(known)),
            )  # fmt: skip
