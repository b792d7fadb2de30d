"""What requests and responses share: a body that is bytes or a stream, and can be read once.

A body is held as ``bytes`` when it was given whole (the fast path: a small request, a
``Response("text")``) or as a :class:`~doemu.compat.streams.ReadableStream` when it is produced
over time (``Response(ts.readable)``, an outbound ``fetch``, a large upload). ``.body`` is always
a stream (or ``None``), as on Cloudflare; the readers (``text()``, ``bytes()``, ``json()``,
``buffer()``, ``memoryview()``, ``blob()``, ``form_data()``) take the whole body either way.
``text()`` decodes like the JS ``TextDecoder``: a BOM is dropped, invalid UTF-8 becomes U+FFFD.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .jsproxy import JsBuffer, as_js_buffer
from .readable import ReadableStream, core_of, stream_of

if TYPE_CHECKING:
    from .blob import Blob
    from .formdata import FormData
    from .headers import Headers

__all__ = ["TEXT_PLAIN", "Body", "BodyData", "BodyMixin", "body_data", "read_all"]

#: What a request or response holds: the bytes, a stream, or nothing.
BodyData = bytes | ReadableStream | None
#: What a body may be given as.
Body = Any

#: The content type a ``str`` body gets when none is given (as in JS).
TEXT_PLAIN = "text/plain;charset=UTF-8"


def body_data(body: object, what: str, headers: Headers) -> BodyData:
    """A body as given to a constructor, as stored; sets the content type JS would set."""
    from .blob import Blob
    from .formdata import FormData

    if body is None or isinstance(body, bytes | ReadableStream):
        return body
    if isinstance(body, str):
        if not headers.has("content-type"):
            headers.set("content-type", TEXT_PLAIN)
        return body.encode()
    if isinstance(body, FormData):
        data, content_type = body._encode()
        if not headers.has("content-type"):
            headers.set("content-type", content_type)
        return data
    if isinstance(body, Blob):
        if body.content_type and not headers.has("content-type"):
            headers.set("content-type", body.content_type)
        return body._data
    raise TypeError(f"Unsupported type in {what}: {type(body).__name__}")


async def read_all(data: BodyData) -> bytes:
    """Every byte of a body (a stream is read to its end)."""
    if data is None:
        return b""
    if isinstance(data, bytes):
        return data
    core = core_of(data)
    core.locked = True
    parts: list[bytes] = []
    while (chunk := await core.read()) is not None:
        parts.append(chunk)
    return b"".join(parts)


class BodyMixin:
    """The body half of ``Request`` and ``Response``; see the module docstring."""

    _body: BodyData
    _body_used: bool
    _headers: Headers
    _USED_MESSAGE = "Body already used"

    @property
    def body(self) -> ReadableStream | None:
        """The body as a stream (``None`` without one), read chunk by chunk as it arrives."""
        data = self._body
        if data is None:
            return None
        if isinstance(data, bytes):
            if self._body_used:
                data = self._body = stream_of(b"")
                core_of(data).disturbed = True
            else:
                data = self._body = stream_of(data)
        return data

    @property
    def body_used(self) -> bool:
        data = self._body
        if isinstance(data, ReadableStream):
            return core_of(data).disturbed or self._body_used
        return self._body_used

    @property
    def js_object(self) -> Any:
        """The underlying JS object on Cloudflare; here the object itself stands for it."""
        return self

    async def _consume(self) -> bytes:
        if self._body is None:
            return b""  # a null body is never "used"
        if self.body_used or (
            isinstance(self._body, ReadableStream) and core_of(self._body).locked
        ):
            raise OSError(self._USED_MESSAGE)
        self._body_used = True
        return await read_all(self._body)

    async def bytes(self) -> bytes:
        return await self._consume()

    async def text(self) -> str:
        return (await self._consume()).decode("utf-8-sig", errors="replace")

    async def buffer(self) -> JsBuffer:
        """The body as an ``ArrayBuffer`` (``JsBuffer``: ``to_bytes()``, ``to_memoryview()``)."""
        return as_js_buffer(await self._consume())

    async def blob(self) -> Blob:
        from .blob import Blob

        return Blob(await self._consume(), content_type=self._headers.get("content-type") or "")

    async def form_data(self) -> FormData:
        """A ``multipart/form-data`` or ``application/x-www-form-urlencoded`` body, parsed."""
        from .formdata import FormData

        content_type = self._headers.get("content-type") or ""
        return FormData._decode(await self._consume(), content_type)

    async def _read_json(self, **kwargs: Any) -> Any:
        return json.loads(await self.text(), **kwargs)
