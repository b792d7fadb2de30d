"""``TextEncoder`` and ``TextDecoder``: UTF-8 between ``str`` and the byte chunks of streams."""

from __future__ import annotations

import codecs
from typing import Any

from ..jsboundary import JsException
from .jsclass import JsClass
from .jsproxy import JsBuffer, as_js_buffer

__all__ = ["TextDecoder", "TextEncoder"]


class TextEncoder(metaclass=JsClass):
    """``new TextEncoder()``: ``encode(str)`` gives a ``Uint8Array`` (a ``JsBuffer`` here)."""

    __slots__ = ()

    @classmethod
    def _new(cls) -> TextEncoder:
        return cls()

    @property
    def encoding(self) -> str:
        return "utf-8"

    def encode(self, input: str = "") -> JsBuffer:
        if not isinstance(input, str):
            input = str(input)
        return as_js_buffer(input.encode("utf-8", errors="surrogatepass"))


class TextDecoder(metaclass=JsClass):
    """``new TextDecoder(label, {fatal, ignoreBOM})``: ``decode(bytes, stream=…)`` to ``str``.

    With ``stream=True`` a multi-byte character split across chunks is kept for the next call,
    which is how a stream of chunks is decoded.
    """

    __slots__ = ("_decoder", "_fatal", "_ignore_bom", "_label")

    def __init__(
        self, label: str = "utf-8", *, fatal: bool = False, ignoreBOM: bool = False
    ) -> None:
        try:
            info = codecs.lookup(label)
        except LookupError:
            raise JsException("RangeError", f"Invalid encoding label: {label!r}") from None
        self._label = info.name
        self._fatal = fatal
        self._ignore_bom = ignoreBOM
        self._decoder = self._new_decoder()

    @classmethod
    def _new(cls, label: str = "utf-8", options: Any = None, /, **kwargs: Any) -> TextDecoder:
        merged = {**(options or {}), **kwargs}
        unknown = set(merged) - {"fatal", "ignoreBOM"}
        if unknown:
            raise TypeError(f"TextDecoder.new() got unknown options {sorted(unknown)}")
        return cls(label, fatal=bool(merged.get("fatal")), ignoreBOM=bool(merged.get("ignoreBOM")))

    def _new_decoder(self) -> codecs.IncrementalDecoder:
        name = "utf-8-sig" if self._label == "utf-8" and not self._ignore_bom else self._label
        return codecs.getincrementaldecoder(name)("strict" if self._fatal else "replace")

    @property
    def encoding(self) -> str:
        return "utf-8" if self._label == "utf-8" else self._label

    @property
    def fatal(self) -> bool:
        return self._fatal

    @property
    def ignoreBOM(self) -> bool:
        return self._ignore_bom

    def decode(self, input: Any = None, options: Any = None, /, **kwargs: Any) -> str:
        stream = bool({**(options or {}), **kwargs}.get("stream"))
        data = b"" if input is None else bytes(input)
        try:
            text = self._decoder.decode(data, final=not stream)
        except UnicodeDecodeError as exc:
            self._decoder = self._new_decoder()
            raise TypeError(f"The encoded data was not valid for encoding {self.encoding}") from exc
        if not stream:
            self._decoder = self._new_decoder()
        return text
