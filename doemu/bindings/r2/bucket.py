"""``env.BUCKET``: an R2 bucket as Cloudflare's Python Workers API presents it.

``head(key)``, ``get(key, onlyIf=…, range=…)``, ``put(key, value, httpMetadata=…,
customMetadata=…, md5=…/sha1=…/sha256=…/sha384=…/sha512=…, onlyIf=…, storageClass=…)``,
``delete(key or [keys])``, ``list(prefix=…, delimiter=…, cursor=…, startAfter=…, limit=…,
include=[…])``, ``createMultipartUpload(key, …)`` and ``resumeMultipartUpload(key, uploadId)``,
with R2's limits and texts (``put: The specified object name is not valid. (10020)``): keys at
most 1024 bytes, custom metadata at most 2048 bytes, objects at most 5 GiB minus 5 MiB, listings
at most 1000 (100 with ``include``), multipart parts at least 5 MiB (all but the last, all of one
size). A missing object is ``None``; a ``get`` whose ``onlyIf`` fails is the object without a
body, a ``put`` whose ``onlyIf`` fails is ``None``.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime as dt
import hashlib
import json
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ...compat.blob import Blob
from ...compat.jsproxy import JsBuffer
from ...compat.readable import ReadableStream, core_of
from ...compat.rpc import JsDict
from ..boundary import after, call, js_arguments, js_string, option
from ..errors import BindingError, BindingTypeError
from .conditions import InvalidRange, conditional, read_range
from .objects import HTTP_FIELDS, R2Object, R2ObjectBody
from .store import HASHES, IN_PROGRESS, ObjectRow, R2Store, WrittenBlob

__all__ = ["R2_LIMITS", "R2Bucket", "R2Error", "R2MultipartUpload"]

#: R2's limits (bytes, counts).
R2_LIMITS = {
    "key_bytes": 1024,
    "object_bytes": 5 * 1024**3 - 5 * 1024**2,
    "metadata_bytes": 2048,
    "list_limit": 1000,
    "list_limit_with_include": 100,
    "min_part_bytes": 5 * 1024**2,
    "max_part_number": 10000,
}

#: R2's error texts by code.
_TEXTS = {
    10001: "We encountered an internal error. Please try again.",
    10011: "Your proposed upload is smaller than the minimum allowed object size.",
    10012: "Your metadata headers exceed the maximum allowed metadata size.",
    10020: "The specified object name is not valid.",
    10022: "MaxKeys params must be positive integer <= 1000.",
    10024: "The specified multipart upload does not exist.",
    10025: "One or more of the specified parts could not be found.",
    10039: "The requested range is not satisfiable",
    10048: "There was a problem with the multipart upload.",
    100100: "Your proposed upload exceeds the maximum allowed object size.",
}
_HASH_NAMES = {"md5": "MD5", "sha1": "SHA-1", "sha256": "SHA-256", "sha384": "SHA-384",
               "sha512": "SHA-512"}  # fmt: skip


class R2Error(BindingError):
    """``<method>: <text> (<code>)``: R2 refused the operation."""

    def __init__(self, method: str, code: int, text: str | None = None) -> None:
        super().__init__(f"{method}: {text or _TEXTS[code]} ({code})")
        self.method = method
        self.code = code


def _key(method: str, raw: Any) -> str:
    key = js_string(raw)
    if len(key.encode()) > R2_LIMITS["key_bytes"]:
        raise R2Error(method, 10020)
    return key


def _http_metadata(value: Any) -> dict[str, Any]:
    """``httpMetadata`` (an object or a ``Headers``) as stored: set fields only."""
    if value is None:
        return {}
    items = getattr(value, "items", None)
    if items is not None and not isinstance(value, Mapping):
        headers = {str(k).lower(): str(v) for k, v in items()}
        stored: dict[str, Any] = {
            field: headers[name]
            for field, name in (
                ("contentType", "content-type"),
                ("contentLanguage", "content-language"),
                ("contentDisposition", "content-disposition"),
                ("contentEncoding", "content-encoding"),
                ("cacheControl", "cache-control"),
            )
            if name in headers
        }
        if "expires" in headers:
            from email.utils import parsedate_to_datetime

            try:
                stored["cacheExpiry"] = parsedate_to_datetime(headers["expires"]).timestamp() * 1000
            except (TypeError, ValueError):
                pass
        return stored
    if not isinstance(value, Mapping):
        raise BindingTypeError("httpMetadata must be an object or a Headers")
    stored = {}
    for field in HTTP_FIELDS:
        item = value.get(field)
        if item is None:
            continue
        if field == "cacheExpiry":
            if isinstance(item, dt.datetime):
                item = (item if item.tzinfo else item.astimezone()).timestamp() * 1000
            stored[field] = float(item)
        else:
            stored[field] = js_string(item)
    return stored


def _custom_metadata(method: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BindingTypeError("customMetadata must be an object of strings")
    custom = {js_string(k): js_string(v) for k, v in value.items()}
    size = sum(_serialised(k) + _serialised(v) for k, v in custom.items())
    if size > R2_LIMITS["metadata_bytes"]:
        raise R2Error(method, 10012)
    return custom


def _serialised(text: str) -> int:
    """R2's measure of a metadata string (Miniflare's: UTF-16 code units, twice for non-Latin-1)."""
    return len(text) * 2 if any(ord(c) >= 256 for c in text) else len(text)


def _digest(value: Any) -> str | None:
    """A checksum given as a hex string or as bytes, as hex."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return bytes.fromhex(value).hex()
        except ValueError:
            raise BindingTypeError(f"a checksum must be hex or bytes, got {value!r}") from None
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    raise BindingTypeError(f"a checksum must be hex or bytes, got {type(value).__name__}")


def _storage_class(value: Any) -> str:
    if value is None:
        return "Standard"
    text = js_string(value)
    if text not in ("Standard", "InfrequentAccess"):
        raise BindingTypeError(
            f'storageClass must be "Standard" or "InfrequentAccess", got {text!r}'
        )
    return text


def _options(values: list[Any], index: int) -> Mapping[str, Any]:
    options = values[index] if index < len(values) else None
    return options if isinstance(options, Mapping) else {}


async def _body_bytes(value: Any) -> bytes | ReadableStream:
    """A put's value as bytes, or the stream to read it from (strings, buffers, Blobs, None)."""
    if value is None:
        return b""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, JsBuffer | bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, Blob):
        return await value.bytes()
    if isinstance(value, ReadableStream):
        return value
    raise BindingTypeError(
        "R2 put() accepts a ReadableStream, ArrayBuffer, ArrayBufferView, string, Blob or null"
    )


class R2Bucket:
    """One R2 bucket bound as ``env.<binding>`` (see the module docstring)."""

    __slots__ = ("_binding", "_open")

    def __init__(self, binding: str, open_store: Callable[[], R2Store]) -> None:
        self._binding = binding
        self._open = open_store

    def __repr__(self) -> str:
        return f"<R2Bucket {self._binding}>"

    # -- reads ----------------------------------------------------------------------------------
    def head(self, *args: Any, **kwargs: Any) -> Awaitable[R2Object | None]:
        values = js_arguments(args, kwargs)

        async def work() -> R2Object | None:
            key = _key("head", values[0] if values else None)
            row = self._open().head(key)
            whole = None if row is None else JsDict(offset=0, length=row.size, suffix=None)
            return None if row is None else R2Object(row, whole)

        return call(work)

    def get(self, *args: Any, **kwargs: Any) -> Awaitable[R2Object | None]:
        values = js_arguments(args, kwargs)

        async def work() -> R2Object | None:
            store = self._open()
            key = _key("get", values[0] if values else None)
            options = _options(values, 1)
            row = store.head(key)
            if row is None:
                return None
            condition = conditional(options.get("onlyIf"))
            if condition is not None and not condition.holds(row.etag, row.uploaded):
                # A failed precondition: the metadata, without a body.
                return R2Object(row, JsDict(offset=0, length=row.size, suffix=None))
            try:
                wanted = read_range(options.get("range"), row.size)
            except InvalidRange:
                raise R2Error("get", 10039) from None
            offset, length = (0, row.size) if wanted is None else (wanted.offset, wanted.length)
            read = JsDict(offset=offset, length=length, suffix=None)
            chunks = await store.read(row, offset, length)
            return R2ObjectBody(row, read, chunks)

        return call(work)

    def list(self, *args: Any, **kwargs: Any) -> Awaitable[JsDict]:
        values = js_arguments(args, kwargs)

        def work() -> Awaitable[JsDict]:
            options = _options(values, 0)
            include = options.get("include") or []
            limit = options.get("limit")
            if limit is not None:
                limit = int(limit)
                if limit < 1 or limit > R2_LIMITS["list_limit"]:
                    raise R2Error("list", 10022)
            else:
                limit = R2_LIMITS["list_limit"]
            if include:
                limit = min(limit, R2_LIMITS["list_limit_with_include"])
            prefix = js_string(options.get("prefix") or "")
            start_after = options.get("startAfter")
            start_after = None if start_after is None else js_string(start_after)
            cursor = options.get("cursor")
            if cursor:
                after_cursor = _decode_cursor(js_string(cursor))
                if start_after is None or after_cursor > start_after:
                    start_after = after_cursor
            delimiter = options.get("delimiter")
            rows, prefixes, last = self._open().list(
                prefix, start_after, limit, js_string(delimiter) if delimiter else None
            )
            objects = [_listed(row, include) for row in rows]
            next_cursor = None if last is None else base64.b64encode(last.encode()).decode()
            return after(
                None,
                JsDict(
                    objects=objects,
                    truncated=next_cursor is not None,
                    cursor=next_cursor,
                    delimitedPrefixes=prefixes,
                ),
            )

        return call(work)

    # -- writes -------------------------------------------------------------------------------
    def put(self, *args: Any, **kwargs: Any) -> Awaitable[R2Object | None]:
        values = js_arguments(args, kwargs)

        async def work() -> R2Object | None:
            store = self._open()
            key = _key("put", values[0] if values else None)
            options = _options(values, 2)
            http = json.dumps(_http_metadata(options.get("httpMetadata")))
            custom = json.dumps(_custom_metadata("put", options.get("customMetadata")))
            storage_class = _storage_class(options.get("storageClass"))
            wanted = {name: _digest(options.get(name)) for name in HASHES}
            algorithms = [name for name, value in wanted.items() if value is not None]
            condition = conditional(options.get("onlyIf"))
            blob = await _write(store, await _body_bytes(values[1] if len(values) > 1 else None),
                                algorithms)  # fmt: skip
            try:
                if blob.size > R2_LIMITS["object_bytes"]:
                    raise R2Error("put", 100100)
                checksums = {}
                for name in algorithms:
                    if wanted[name] != blob.digests[name]:
                        label = _HASH_NAMES[name]
                        raise R2Error(
                            "put",
                            10037,
                            f"The {label} checksum you specified did not match what we "
                            f"received.\nYou provided a {label} checksum with value: "
                            f"{wanted[name]}\nActual {label} was: {blob.digests[name]}",
                        )
                    checksums[name] = blob.digests[name]
                row = ObjectRow(
                    key, blob.blob_id, secrets.token_hex(16), blob.size, blob.digests["md5"],
                    int(store.clock.now()), json.dumps(checksums), http, custom, storage_class,
                )  # fmt: skip
                check = None
                if condition is not None:
                    check = lambda old: condition.holds(  # noqa: E731
                        None if old is None else old.etag, None if old is None else old.uploaded
                    )
                stored, durable = store.put(row, check)
            except BaseException:
                store._remove_blobs([blob.blob_id])
                raise
            if not stored:
                store._remove_blobs([blob.blob_id])
                return None
            if durable is not None:
                await durable
            return R2Object(row)

        return call(work)

    def delete(self, *args: Any, **kwargs: Any) -> Awaitable[None]:
        values = js_arguments(args, kwargs)

        def work() -> Awaitable[None]:
            raw = values[0] if values else None
            keys = [_key("delete", k) for k in (raw if isinstance(raw, list) else [raw])]
            return after(self._open().delete(keys), None)

        return call(work)

    # -- multipart ----------------------------------------------------------------------------
    def createMultipartUpload(self, *args: Any, **kwargs: Any) -> Awaitable[R2MultipartUpload]:
        values = js_arguments(args, kwargs)

        def work() -> Awaitable[R2MultipartUpload]:
            key = _key("createMultipartUpload", values[0] if values else None)
            options = _options(values, 1)
            http = json.dumps(_http_metadata(options.get("httpMetadata")))
            custom = json.dumps(
                _custom_metadata("createMultipartUpload", options.get("customMetadata"))
            )
            upload_id = base64.urlsafe_b64encode(secrets.token_bytes(96)).decode().rstrip("=")
            durable = self._open().create_upload(
                upload_id, key, http, custom, _storage_class(options.get("storageClass"))
            )
            return after(durable, R2MultipartUpload(self, key, upload_id))

        return call(work)

    def resumeMultipartUpload(self, *args: Any, **kwargs: Any) -> R2MultipartUpload:
        values = js_arguments(args, kwargs)
        key = _key("resumeMultipartUpload", values[0] if values else None)
        return R2MultipartUpload(self, key, js_string(values[1] if len(values) > 1 else None))


class R2MultipartUpload:
    """An upload in progress: ``uploadPart(n, value)``, ``complete(parts)``, ``abort()``."""

    __slots__ = ("_bucket", "key", "uploadId")

    def __init__(self, bucket: R2Bucket, key: str, upload_id: str) -> None:
        self._bucket = bucket
        self.key = key
        self.uploadId = upload_id

    def __repr__(self) -> str:
        return f"<R2MultipartUpload {self.key!r}>"

    def uploadPart(self, *args: Any, **kwargs: Any) -> Awaitable[JsDict]:
        """Store part ``partNumber`` (1–10000); ``{partNumber, etag}`` to pass to complete()."""
        values = js_arguments(args, kwargs)

        async def work() -> JsDict:
            store = self._bucket._open()
            number = int(values[0]) if values and values[0] is not None else 0
            if not 1 <= number <= R2_LIMITS["max_part_number"]:
                raise BindingTypeError(
                    f"Part number must be between 1 and {R2_LIMITS['max_part_number']}"
                )
            upload = store.upload(self.uploadId, self.key)
            if upload is None or upload[3] != IN_PROGRESS:
                raise R2Error("uploadPart", 10024)
            blob = await _write(store, await _body_bytes(values[1] if len(values) > 1 else None))
            etag = base64.urlsafe_b64encode(secrets.token_bytes(96)).decode().rstrip("=")
            stored, durable = store.put_part(self.uploadId, self.key, number, blob, etag)
            if not stored:
                store._remove_blobs([blob.blob_id])
                raise R2Error("uploadPart", 10024)
            if durable is not None:
                await durable
            return JsDict(partNumber=number, etag=etag)

        return call(work)

    def abort(self, *args: Any, **kwargs: Any) -> Awaitable[None]:
        js_arguments(args, kwargs)

        def work() -> Awaitable[None]:
            store = self._bucket._open()
            if store.upload(self.uploadId, self.key) is None:
                raise R2Error("abortMultipartUpload", 10001)
            return after(store.abort(self.uploadId), None)

        return call(work)

    def complete(self, *args: Any, **kwargs: Any) -> Awaitable[R2Object]:
        """The object made of ``parts`` (``[{partNumber, etag}, …]``), in part-number order."""
        values = js_arguments(args, kwargs)

        def work() -> Awaitable[R2Object]:
            store = self._bucket._open()
            method = "completeMultipartUpload"
            upload = store.upload(self.uploadId, self.key)
            if upload is None:
                raise R2Error(method, 10001)
            http, custom, storage_class, state = upload
            if state != IN_PROGRESS:
                raise R2Error(method, 10024)
            chosen = values[0] if values and isinstance(values[0], list) else []
            uploaded = store.parts(self.uploadId)
            numbers: list[int] = []
            for item in chosen:
                number = int(option(item, "partNumber") or 0)
                if number in numbers:
                    raise R2Error(method, 10001)
                part = uploaded.get(number)
                if part is None or part.etag != option(item, "etag"):
                    raise R2Error(method, 10025)
                numbers.append(number)
            parts = [uploaded[n] for n in numbers]
            minimum = R2_LIMITS["min_part_bytes"]
            if any(p.size < minimum for p in parts[:-1]):
                raise R2Error(method, 10011)
            parts.sort(key=lambda p: p.part_number)
            sizes = {p.size for p in parts[:-1]}
            if len(sizes) > 1 or (sizes and parts[-1].size > next(iter(sizes))):
                raise R2Error(method, 10048)
            md5 = hashlib.md5(b"".join(bytes.fromhex(p.md5) for p in parts)).hexdigest()
            row = ObjectRow(
                self.key, None, secrets.token_hex(16), sum(p.size for p in parts),
                f"{md5}-{len(parts)}", int(store.clock.now()), "{}", http, custom, storage_class,
            )  # fmt: skip
            durable = store.complete(self.uploadId, row, [p.part_number for p in parts])
            return after(durable, R2Object(row))

        return call(work)


async def _write(
    store: R2Store, body: bytes | ReadableStream, algorithms: list[str] | None = None
) -> WrittenBlob:
    """Write a body (bytes at once, a stream chunk by chunk) as a whole blob file."""
    if isinstance(body, bytes):
        return await store.write_blob(body, algorithms or ())
    writer = store.writer(algorithms or ())
    core = core_of(body)
    core.locked = True
    try:
        while (chunk := await core.read()) is not None:
            await writer.write(chunk)
        return await writer.finish()
    except BaseException:
        await writer.discard()
        raise


def _listed(row: ObjectRow, include: Any) -> R2Object:
    """A listed object: metadata only where ``include`` asks for it (as R2 lists them)."""
    fields = {js_string(i) for i in include} if isinstance(include, list) else set()
    http = row.http_metadata if "httpMetadata" in fields else "{}"
    custom = row.custom_metadata if "customMetadata" in fields else "{}"
    return R2Object(dataclasses.replace(row, http_metadata=http, custom_metadata=custom))


def _decode_cursor(cursor: str) -> str:
    try:
        return base64.b64decode(cursor + "=" * (-len(cursor) % 4)).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return cursor
