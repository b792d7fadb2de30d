"""``FormData``: the fields of a form (``workers.FormData``), and their wire formats.

A mapping from names to ``str`` or ``Blob``/``File`` values, several values per name
(``append``, ``get_all``); ``form[name]`` is the first value, ``None`` when there is none (a
JavaScript ``null`` on Cloudflare). As a body it is sent as ``multipart/form-data``;
``await request.form_data()`` reads that format and ``application/x-www-form-urlencoded``.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any
from urllib.parse import parse_qsl

from .blob import Blob, File

__all__ = ["FormData"]

FormDataValue = str | Blob


def _value(value: object, filename: str | None = None) -> FormDataValue:
    if isinstance(value, Blob):
        if filename is not None or not isinstance(value, File):
            return File(value, filename or "blob", value.content_type)
        return value
    if isinstance(value, list | tuple):
        raise TypeError("FormData values must be str, Blob or File; use append() for several")
    return str(value)


class FormData(MutableMapping[str, Any]):
    """The fields of a form; see the module docstring."""

    __slots__ = ("_entries",)

    def __init__(self, form_data: FormData | Mapping[str, Any] | None = None) -> None:
        self._entries: list[tuple[str, FormDataValue]] = []
        if not form_data:
            return
        if isinstance(form_data, FormData):
            self._entries = list(form_data._entries)
        elif isinstance(form_data, Mapping):
            for key, value in form_data.items():
                self.append(key, value)
        else:
            raise TypeError("Expected form_data to be a dict or an instance of FormData")

    def __getitem__(self, key: str) -> Any:
        for name, value in self._entries:
            if name == key:
                return value
        return None

    def __setitem__(self, key: str, value: Any) -> None:
        new = _value(value)
        kept: list[tuple[str, FormDataValue]] = []
        placed = False
        for name, old in self._entries:
            if name != key:
                kept.append((name, old))
            elif not placed:
                kept.append((name, new))
                placed = True
        if not placed:
            kept.append((key, new))
        self._entries = kept

    def __delitem__(self, key: str) -> None:
        self.delete(key)

    def __contains__(self, key: object) -> bool:
        return any(name == key for name, _ in self._entries)

    def __iter__(self) -> Iterator[str]:
        return self.keys()

    def __len__(self) -> int:
        return len({name for name, _ in self._entries})

    def append(self, key: str, value: Any, filename: str | None = None) -> None:
        self._entries.append((str(key), _value(value, filename)))

    def delete(self, key: str) -> None:
        self._entries = [(name, value) for name, value in self._entries if name != key]

    def get_all(self, key: str) -> list[Any]:
        return [value for name, value in self._entries if name == key]

    def keys(self) -> Iterator[str]:  # type: ignore[override]
        seen: set[str] = set()
        for name, _ in self._entries:
            if name not in seen:
                seen.add(name)
                yield name

    def values(self) -> Iterator[Any]:  # type: ignore[override]
        return (value for _, value in self._entries)

    def items(self) -> Iterator[tuple[str, Any]]:  # type: ignore[override]
        return iter(list(self._entries))

    @property
    def js_object(self) -> Any:
        """The JS ``FormData`` on Cloudflare; here the object itself stands for it."""
        return self

    def __repr__(self) -> str:
        return f"FormData({self._entries!r})"

    # -- wire formats ------------------------------------------------------------------------
    def _encode(self) -> tuple[bytes, str]:
        """``(multipart body, content type)``."""
        boundary = f"----doemuFormBoundary{secrets.token_hex(12)}"
        out = bytearray()
        for name, value in self._entries:
            out += f"--{boundary}\r\n".encode()
            quoted = name.replace('"', "%22")
            if isinstance(value, File):
                filename = value.name.replace('"', "%22")
                out += (
                    f'Content-Disposition: form-data; name="{quoted}"; filename="{filename}"\r\n'
                    f"Content-Type: {value.content_type or 'application/octet-stream'}\r\n\r\n"
                ).encode()
                out += value._data
            else:
                assert isinstance(value, str)
                out += f'Content-Disposition: form-data; name="{quoted}"\r\n\r\n'.encode()
                out += value.encode()
            out += b"\r\n"
        out += f"--{boundary}--\r\n".encode()
        return bytes(out), f"multipart/form-data; boundary={boundary}"

    @classmethod
    def _decode(cls, data: bytes, content_type: str) -> FormData:
        form = cls()
        media = content_type.partition(";")[0].strip().lower()
        if media == "application/x-www-form-urlencoded":
            for key, value in parse_qsl(data.decode("utf-8", errors="replace"), True):
                form.append(key, value)
            return form
        if media != "multipart/form-data":
            raise TypeError(
                'Parsing a Body as FormData requires a Content-Type header of "multipart/form-data"'
                ' or "application/x-www-form-urlencoded"'
            )
        # Imported here, not with the module: the email package is about 3 ms of every start-up
        # (the Workers surface imports this module), and only a multipart body needs it.
        import email.parser
        import email.policy

        header = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(header + data)
        if not message.is_multipart():
            raise TypeError("the multipart/form-data body could not be parsed")
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if not isinstance(name, str):
                continue
            payload = part.get_payload(decode=True)
            raw = payload if isinstance(payload, bytes) else b""
            filename = part.get_filename()
            if filename is not None:
                form.append(name, File([raw], filename, part.get_content_type()))
            else:
                form.append(name, raw.decode(part.get_content_charset() or "utf-8", "replace"))
        return form
