"""``Blob`` and ``File``: immutable binary data with a content type (``workers.Blob``/``File``).

Signatures as Cloudflare's SDK: ``Blob(blob_parts, content_type=None, endings=None)``,
``File(blob_parts, filename, content_type=None, endings=None, last_modified=None)``; parts are
``str`` (UTF-8), bytes-likes and other blobs. ``BlobEnding`` is the SDK's enum of line-ending
modes (``"native"`` turns ``\\n`` into the platform's line ending in ``str`` parts).
"""

from __future__ import annotations

import enum
import os
import time
from collections.abc import Iterable
from typing import Any

__all__ = ["Blob", "BlobEnding", "File"]


class BlobEnding(enum.StrEnum):
    TRANSPARENT = "transparent"
    NATIVE = "native"


def _part_bytes(part: object, endings: str) -> bytes:
    if isinstance(part, str):
        if endings == BlobEnding.NATIVE:
            part = part.replace("\r\n", "\n").replace("\n", os.linesep)
        return part.encode()
    if isinstance(part, Blob):
        return part._data
    if isinstance(part, bytes | bytearray | memoryview):
        return bytes(part)
    raise TypeError(f"Don't know how to handle {type(part).__name__} for Blob()")


class Blob:
    """Immutable bytes with a content type: ``size``, ``content_type``, ``text()``, ``bytes()``,
    ``slice()``."""

    __slots__ = ("_content_type", "_data")

    def __init__(
        self,
        blob_parts: Iterable[Any] | Any,
        content_type: str | None = None,
        endings: BlobEnding | str | None = None,
    ) -> None:
        mode = str(endings or BlobEnding.TRANSPARENT)
        if mode not in (BlobEnding.TRANSPARENT, BlobEnding.NATIVE):
            raise TypeError(f"endings must be 'transparent' or 'native', got {endings!r}")
        if isinstance(blob_parts, str | bytes | bytearray | memoryview | Blob):
            parts: list[Any] = [blob_parts]
        else:
            parts = list(blob_parts)
        if content_type is None and len(parts) == 1 and isinstance(parts[0], Blob):
            content_type = parts[0].content_type
        self._data = b"".join(_part_bytes(p, mode) for p in parts)
        self._content_type = (content_type or "").lower()

    @property
    def size(self) -> int:
        return len(self._data)

    @property
    def content_type(self) -> str:
        return self._content_type

    @property
    def js_object(self) -> Any:
        """The JS ``Blob`` on Cloudflare; here the object itself stands for it."""
        return self

    async def text(self) -> str:
        return self._data.decode("utf-8", errors="replace")

    async def bytes(self) -> bytes:
        return self._data

    def slice(
        self, start: int | None = None, end: int | None = None, content_type: str | None = None
    ) -> Blob:
        return Blob(self._data[slice(start, end)], content_type=content_type or "")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(size={self.size}, content_type={self.content_type!r})"


class File(Blob):
    """A ``Blob`` with a file name and a modification time (``name``, ``last_modified``)."""

    __slots__ = ("_last_modified", "_name")

    def __init__(
        self,
        blob_parts: Iterable[Any] | Any,
        filename: str,
        content_type: str | None = None,
        endings: BlobEnding | str | None = None,
        last_modified: int | None = None,
    ) -> None:
        parts = blob_parts
        single = parts if isinstance(parts, File) else None
        if single is None and isinstance(parts, list | tuple) and len(parts) == 1:
            single = parts[0] if isinstance(parts[0], File) else None
        super().__init__(blob_parts, content_type, endings)
        self._name = str(filename)
        if last_modified is None:
            last_modified = single.last_modified if single else int(time.time() * 1000)
        self._last_modified = int(last_modified)

    @property
    def name(self) -> str:
        return self._name

    @property
    def last_modified(self) -> int:
        return self._last_modified
