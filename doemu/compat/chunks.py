"""What may travel through a byte stream: bytes-like chunks, never ``str``."""

from __future__ import annotations

__all__ = ["STRING_CHUNK", "to_chunk"]

#: workerd's text when a string is written to a byte stream.
STRING_CHUNK = (
    "This TransformStream is being used as a byte stream, but received a string on its writable "
    "side. If you wish to write a string, you'll probably want to explicitly UTF-8-encode it with "
    "TextEncoder."
)


def to_chunk(value: object, what: str) -> bytes:
    """``value`` as the bytes of one chunk; ``TypeError`` naming ``what`` for anything else."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        raise TypeError(STRING_CHUNK)
    raise TypeError(
        f"{what} expects a bytes-like chunk (a Uint8Array, e.g. from TextEncoder.encode()), "
        f"got {type(value).__name__}"
    )
