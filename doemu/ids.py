"""Durable Object ids, derived exactly as workerd derives them.

workerd keys every namespace by ``uniqueKey = f"{worker_name}-{ClassName}"`` and
``K = sha256(uniqueKey)``. A name-derived id is ``base = HMAC(K, name)[:16]`` followed by
``mac = HMAC(K, base)[:16]``; a unique id has a random base and the same kind of mac. The mac is
what lets ``idFromString`` tell an id of this namespace from a foreign one. Ids print as 64
lowercase hex digits; only such validated strings ever become file names.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from .errors import InvalidIdError
from .jsboundary import hinted, is_strict

__all__ = [
    "INVALID_ID_FOREIGN",
    "INVALID_ID_HEX",
    "DurableObjectId",
    "IdFactory",
    "is_hex_id",
]

INVALID_ID_HEX = "Invalid Durable Object ID: must be 64 hex digits"
INVALID_ID_FOREIGN = "Durable Object ID is not valid for this namespace."

_HEX64 = re.compile(r"[0-9a-fA-F]{64}")


def is_hex_id(text: str) -> bool:
    """True when ``text`` is 64 hex digits (either case)."""
    return _HEX64.fullmatch(text) is not None


class DurableObjectId:
    """An object's id: 64 lowercase hex digits, plus the name it came from (if any)."""

    __slots__ = ("_hex", "name")

    def __init__(self, hex_id: str, name: str | None = None) -> None:
        self._hex = hex_id.lower()
        self.name = name

    def toString(self) -> str:
        return self._hex

    def equals(self, other: object) -> bool:
        return isinstance(other, DurableObjectId) and other._hex == self._hex

    def __str__(self) -> str:
        return self._hex

    def __repr__(self) -> str:
        suffix = f", name={self.name!r}" if self.name is not None else ""
        return f"DurableObjectId({self._hex!r}{suffix})"

    def __eq__(self, other: object) -> bool:
        """As on Cloudflare (a JS object seen through Pyodide), ``==`` is identity: two ids of the
        same object are ``equals()``, not ``==`` (by value under ``--lenient``)."""
        if is_strict():
            return self is other
        return self.equals(other)

    def __hash__(self) -> int:
        if is_strict():
            raise hinted(
                TypeError("unhashable type: 'pyodide.ffi.JsProxy'"),
                "on Cloudflare an id is a JavaScript object, which cannot be a dict key or set "
                "member; use str(id)",
            )
        return hash(self._hex)


class IdFactory:
    """Derives and validates ids for one namespace (one ``uniqueKey``)."""

    __slots__ = ("_key", "_names", "unique_key")

    #: Name → hex cache size: routing by name is the hot path, and two HMACs per request add up.
    NAME_CACHE_SIZE = 8192

    def __init__(self, unique_key: str) -> None:
        self.unique_key = unique_key
        self._key = hashlib.sha256(unique_key.encode()).digest()
        self._names: dict[str, str] = {}

    def _mac(self, base: bytes) -> bytes:
        return hmac.new(self._key, base, hashlib.sha256).digest()[:16]

    def from_name(self, name: str) -> DurableObjectId:
        if not isinstance(name, str):
            raise InvalidIdError(f"idFromName() expects a string name, got {type(name).__name__}")
        cached = self._names.get(name)
        if cached is not None:
            return DurableObjectId(cached, name)
        base = hmac.new(self._key, name.encode(), hashlib.sha256).digest()[:16]
        hex_id = (base + self._mac(base)).hex()
        if len(self._names) >= self.NAME_CACHE_SIZE:
            self._names.clear()
        self._names[name] = hex_id
        return DurableObjectId(hex_id, name)

    def new_unique(self) -> DurableObjectId:
        base = secrets.token_bytes(16)
        return DurableObjectId((base + self._mac(base)).hex())

    def from_string(self, text: str) -> DurableObjectId:
        if not isinstance(text, str) or not is_hex_id(text):
            raise InvalidIdError(INVALID_ID_HEX)
        raw = bytes.fromhex(text)
        if not hmac.compare_digest(self._mac(raw[:16]), raw[16:]):
            raise InvalidIdError(INVALID_ID_FOREIGN)
        return DurableObjectId(text)

    def owns(self, text: str) -> bool:
        """True when ``text`` is a valid id of this namespace."""
        try:
            self.from_string(text)
        except InvalidIdError:
            return False
        return True
