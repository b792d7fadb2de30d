"""Files a user attached — images, PDFs, text, audio — in each provider's input format.

A UI message's ``file`` part has a ``mediaType`` and a ``url``: a ``data:`` URL holding the
bytes (what a browser upload becomes) or an ``http(s)`` URL the provider fetches itself. Each API
takes a different subset, in its own shape:

=================  ==================================  =========================================
provider           takes                               as
=================  ==================================  =========================================
OpenAI Responses   images (PNG, JPEG, GIF, WebP)       ``input_image`` (data or http URL)
                   PDFs                                ``input_file`` (``file_data`` or
                                                       ``file_url``)
chat completions   images                              ``image_url`` (data or http URL)
                   PDFs, inline only                   ``file`` (``file_data``)
                   WAV and MP3 audio, inline only      ``input_audio``
Anthropic          images                              ``image`` (base64 or URL source)
                   PDFs                                ``document`` (base64 or URL source)
                   plain text, inline only             ``document`` (text source)
=================  ==================================  =========================================

Anything else is refused before the request is sent, with a :class:`ProviderInputError` that
names the file, its type and what the provider takes — never dropped silently, since the model
would answer as if it had seen it.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_to_bytes

from .errors import ProviderInputError
from .transcript import File

__all__ = ["DataUrl", "anthropic_block", "chat_part", "parse_data_url", "responses_part"]

IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav",
                  "audio/mpeg": "mp3", "audio/mp3": "mp3"}  # fmt: skip


@dataclass(frozen=True, slots=True)
class DataUrl:
    """A ``data:`` URL, decoded: its media type and its bytes."""

    media_type: str
    data: bytes

    @property
    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")


def parse_data_url(url: str) -> DataUrl | None:
    """The ``data:`` URL ``url`` decoded (RFC 2397), or ``None`` for any other URL; a malformed
    one raises :class:`ValueError`."""
    if not url.startswith("data:"):
        return None
    head, comma, payload = url[5:].partition(",")
    if not comma:
        raise ValueError("a data: URL needs a comma before its data")
    params = head.split(";")
    media_type = params[0].strip().lower() or "text/plain"
    if "base64" in (p.strip().lower() for p in params[1:]):
        try:
            data = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"its base64 data is not valid ({exc})") from None
    else:
        data = unquote_to_bytes(payload)
    return DataUrl(media_type, data)


def _media_type(file: File) -> str:
    return file.media_type.split(";")[0].strip().lower()


def _describe(file: File) -> str:
    name = f"{file.filename!r} " if file.filename else ""
    return f"the file {name}({file.media_type or 'no media type'})"


def _inline(provider: str, file: File) -> DataUrl | None:
    """The file's bytes when its URL is a ``data:`` URL; ``None`` for an http(s) URL; any other
    scheme, or a broken data URL, is refused."""
    try:
        inline = parse_data_url(file.url)
    except ValueError as exc:
        raise ProviderInputError(
            provider, f"{_describe(file)} has a bad data: URL: {exc}"
        ) from None
    if inline is None and not file.url.startswith(("https://", "http://")):
        scheme = file.url.split(":", 1)[0] if ":" in file.url else "no scheme"
        raise ProviderInputError(
            provider, f"{_describe(file)} has a URL the provider cannot fetch ({scheme}): give a "
            "data: URL or an http(s) URL",
        )  # fmt: skip
    return inline


def _refuse(provider: str, file: File, takes: str) -> ProviderInputError:
    return ProviderInputError(provider, f"cannot take {_describe(file)}: it takes {takes}")


def responses_part(provider: str, file: File) -> dict[str, Any]:
    """An OpenAI Responses input content part for ``file`` (see the module docstring)."""
    kind = _media_type(file)
    inline = _inline(provider, file)
    if kind in IMAGES:
        return {"type": "input_image", "image_url": file.url, "detail": "auto"}
    if kind == "application/pdf":
        part: dict[str, Any] = {"type": "input_file", "filename": file.filename or "file.pdf"}
        if inline is not None:
            part["file_data"] = file.url
        else:
            part["file_url"] = file.url
        return part
    raise _refuse(provider, file, "images (PNG, JPEG, GIF, WebP) and PDFs")


def chat_part(provider: str, file: File) -> dict[str, Any]:
    """A chat-completions content part for ``file`` (see the module docstring)."""
    kind = _media_type(file)
    inline = _inline(provider, file)
    takes = "images (PNG, JPEG, GIF, WebP), and PDFs and WAV/MP3 audio as data: URLs"
    if kind in IMAGES:
        return {"type": "image_url", "image_url": {"url": file.url}}
    if kind == "application/pdf" and inline is not None:
        document = {"file_data": file.url, "filename": file.filename or "file.pdf"}
        return {"type": "file", "file": document}
    if kind in _AUDIO_FORMATS and inline is not None:
        return {"type": "input_audio",
                "input_audio": {"data": inline.base64, "format": _AUDIO_FORMATS[kind]}}  # fmt: skip
    raise _refuse(provider, file, takes)


def anthropic_block(provider: str, file: File) -> dict[str, Any]:
    """An Anthropic content block for ``file`` (see the module docstring)."""
    kind = _media_type(file)
    inline = _inline(provider, file)
    if kind in IMAGES or kind == "application/pdf":
        block = "image" if kind in IMAGES else "document"
        if inline is None:
            return {"type": block, "source": {"type": "url", "url": file.url}}
        source = {"type": "base64", "media_type": kind, "data": inline.base64}
        return {"type": block, "source": source}
    if kind == "text/plain" and inline is not None:
        try:
            text = inline.data.decode("utf-8")
        except UnicodeDecodeError:
            raise ProviderInputError(provider, f"{_describe(file)} is not UTF-8 text") from None
        document: dict[str, Any] = {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": text},
        }
        if file.filename:
            document["title"] = file.filename
        return document
    raise _refuse(
        provider, file, "images (PNG, JPEG, GIF, WebP), PDFs, and plain text as a data: URL"
    )
