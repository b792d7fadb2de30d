"""``R2Object`` and ``R2ObjectBody``: what ``head``, ``get``, ``put`` and ``list`` give Python code.

On Cloudflare they are JS objects behind the SDK's binding wrapper, so each attribute reads as
the SDK converts it (checked on workerd-Python): ``key``, ``version``, ``etag`` and
``storageClass`` are ``str``, ``size`` an ``int``, ``httpEtag`` the quoted etag, ``uploaded`` a
naive ``datetime`` in local time (the SDK turns a JS ``Date`` into one), ``httpMetadata`` a
``JsDict`` with all six fields (``None`` where unset), ``customMetadata`` a ``JsDict``, ``range``
a ``JsDict`` (``offset``, ``length``, ``suffix``) on a ``get`` and ``None`` elsewhere,
``checksums`` an object whose fields are ``memoryview``s (or ``None``) and whose ``toJSON()`` is
a ``JsDict`` of hex strings, ``ssecKeyMd5`` ``None``. An ``R2ObjectBody`` adds ``body`` (a
``ReadableStream``), ``bodyUsed``, and the readers ``text()``, ``json()``, ``arrayBuffer()`` (a
``memoryview``), ``bytes()`` and ``blob()``; a body can be read once.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import AsyncIterator
from typing import Any

from ...compat.blob import Blob
from ...compat.bodies import read_all
from ...compat.readable import ReadableStream, stream_from_iterator
from ...compat.rpc import JsDict
from ..boundary import js_json_parse, to_python
from ..errors import BindingTypeError
from .store import ObjectRow

__all__ = ["HTTP_FIELDS", "R2Checksums", "R2Object", "R2ObjectBody"]

#: ``R2HTTPMetadata``'s fields, in the order workerd lists them.
HTTP_FIELDS = (
    "contentType",
    "contentLanguage",
    "contentDisposition",
    "contentEncoding",
    "cacheControl",
    "cacheExpiry",
)
_HEADERS = {
    "contentType": "content-type",
    "contentLanguage": "content-language",
    "contentDisposition": "content-disposition",
    "contentEncoding": "content-encoding",
    "cacheControl": "cache-control",
}
_USED = (
    "Body has already been used. It can only be used once. Use tee() first if you need to "
    "read it twice."
)


class R2Checksums:
    """The checksums R2 keeps for an object: ``md5``, ``sha1``… as ``memoryview`` or ``None``."""

    __slots__ = ("md5", "sha1", "sha256", "sha384", "sha512")

    def __init__(self, hexes: dict[str, str]) -> None:
        for name in self.__slots__:
            value = hexes.get(name)
            setattr(self, name, memoryview(bytes.fromhex(value)) if value else None)

    def toJSON(self) -> JsDict:
        """The checksums as hex strings (``None`` for those not computed)."""
        return JsDict(
            {
                n: None if getattr(self, n) is None else getattr(self, n).hex()
                for n in self.__slots__
            }
        )

    def __repr__(self) -> str:
        return f"R2Checksums({self.toJSON()!r})"


class R2Object:
    """An object's metadata (see the module docstring)."""

    __slots__ = (
        "checksums", "customMetadata", "etag", "httpEtag", "httpMetadata", "key", "range",
        "size", "ssecKeyMd5", "storageClass", "uploaded", "version",
    )  # fmt: skip

    def __init__(self, row: ObjectRow, read: JsDict | None = None) -> None:
        self.key = row.key
        self.version = row.version
        self.size = row.size
        self.etag = row.etag
        self.httpEtag = f'"{row.etag}"'
        hexes = json.loads(row.checksums)
        if len(row.etag) == 32:  # a single-part object's etag is its MD5
            hexes.setdefault("md5", row.etag)
        self.checksums = R2Checksums(hexes)
        self.uploaded = dt.datetime.fromtimestamp(row.uploaded / 1000.0)
        stored = json.loads(row.http_metadata)
        self.httpMetadata = JsDict({name: to_python(stored.get(name)) for name in HTTP_FIELDS})
        if isinstance(self.httpMetadata.get("cacheExpiry"), int | float):
            ms = self.httpMetadata["cacheExpiry"]
            self.httpMetadata["cacheExpiry"] = dt.datetime.fromtimestamp(ms / 1000.0)
        self.customMetadata = JsDict(json.loads(row.custom_metadata))
        self.range = read
        self.storageClass = row.storage_class
        self.ssecKeyMd5: str | None = None

    def writeHttpMetadata(self, headers: Any) -> None:
        """Set the object's HTTP metadata on ``headers`` (a ``Headers``), as R2 does."""
        for field, name in _HEADERS.items():
            value = self.httpMetadata.get(field)
            if value is not None:
                headers.set(name, str(value))
        expiry = self.httpMetadata.get("cacheExpiry")
        if isinstance(expiry, dt.datetime):
            stamp = expiry.astimezone(dt.UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")
            headers.set("expires", stamp)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.key!r} size={self.size} etag={self.etag}>"


class R2ObjectBody(R2Object):
    """An object with its body (see the module docstring)."""

    __slots__ = ("_stream", "_used")

    def __init__(self, row: ObjectRow, read: JsDict, chunks: AsyncIterator[bytes]) -> None:
        super().__init__(row, read)
        self._stream = stream_from_iterator(chunks)
        self._used = False

    @property
    def body(self) -> ReadableStream:
        return self._stream

    @property
    def bodyUsed(self) -> bool:
        return self._used or self._stream.locked

    async def _all(self) -> bytes:
        if self.bodyUsed:
            raise BindingTypeError(_USED)
        self._used = True
        return await read_all(self._stream)

    async def arrayBuffer(self) -> memoryview:
        return memoryview(await self._all())

    async def bytes(self) -> bytes:
        return await self._all()

    async def text(self) -> str:
        return (await self._all()).decode("utf-8", "replace")

    async def json(self) -> Any:
        return to_python(js_json_parse((await self._all()).decode("utf-8", "replace")))

    async def blob(self) -> Blob:
        data = await self._all()
        return Blob([data], self.httpMetadata.get("contentType") or "")
