"""What requests and responses share: a body that can be read once, as JS bodies can."""

from __future__ import annotations

__all__ = ["TEXT_PLAIN", "Body", "BodyMixin", "body_bytes"]

Body = str | bytes

#: The content type a ``str`` body gets when none is given (as in JS).
TEXT_PLAIN = "text/plain;charset=UTF-8"


def body_bytes(body: object, what: str) -> bytes | None:
    if body is None:
        return None
    if isinstance(body, str):
        return body.encode()
    if isinstance(body, bytes):
        return body
    raise TypeError(f"Unsupported type in {what}: {type(body).__name__}")


class BodyMixin:
    """What requests and responses share: a body that can be read once, as JS bodies can.

    ``text()`` decodes like the JS ``TextDecoder`` (a BOM is dropped, invalid UTF-8 becomes
    U+FFFD) rather than raising.
    """

    _body: bytes | None
    _body_used: bool
    _USED_MESSAGE = "Body already used"

    @property
    def body(self) -> bytes | None:
        return self._body

    @property
    def body_used(self) -> bool:
        return self._body_used

    def _consume(self) -> bytes:
        if self._body_used:
            raise OSError(self._USED_MESSAGE)
        if self._body is None:
            return b""
        self._body_used = True
        return self._body

    async def bytes(self) -> bytes:
        return self._consume()

    async def text(self) -> str:
        return self._consume().decode("utf-8-sig", errors="replace")
