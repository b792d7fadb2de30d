"""The key-value API over the hidden ``_cf_KV`` table, shared by every KV surface.

``storage.get/put/delete/list``, the transaction object ``txn`` and the synchronous
``storage.kv`` all call :class:`KvStore`, so they agree on validation, limits and ordering.
Values are stored with :mod:`doemu.clone` (structured-clone rules); writes join the turn's
implicit transaction.

Ordering is Cloudflare's: keys sort by their UTF-8 bytes. SQLite's BINARY collation compares
TEXT with ``memcmp`` over the UTF-8 encoding, and Python compares ``str`` by code point, which is
the same order, so ranges computed in Python and in SQL agree.

``None`` is a value (JavaScript's ``null``): ``put(key, None)`` stores it. ``get`` of a missing key
also returns ``None`` (JavaScript's ``undefined``), as Python has one null. ``put(key)`` without a
value is workerd's ``put() called with undefined value.``
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from doemu import clone
from doemu.errors import LimitExceededError
from doemu.storage import messages
from doemu.storage.connection import StorageConnection, internal_sql
from doemu.storage.errors import StorageTypeError
from doemu.storage.limits import StorageLimits

__all__ = ["MISSING", "KvStore", "ListQuery", "check_key", "check_keys", "compile_list_options"]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final[Any] = _Missing()
"""An argument that was not passed (distinct from ``None``)."""

_GET = internal_sql("SELECT value FROM _cf_KV WHERE key = ?")
_PUT = internal_sql("INSERT OR REPLACE INTO _cf_KV (key, value) VALUES (?, ?)")
_DELETE = internal_sql("DELETE FROM _cf_KV WHERE key = ?")
_CLEAR = internal_sql("DELETE FROM _cf_KV")


def _list_sql(has_end: bool, reverse: bool, has_limit: bool) -> str:
    sql = "SELECT key, value FROM _cf_KV WHERE key >= ?"
    if has_end:
        sql += " AND key < ?"
    sql += " ORDER BY key DESC" if reverse else " ORDER BY key"
    if has_limit:
        sql += " LIMIT ?"
    return internal_sql(sql)


_LIST = {
    (end, reverse, limit): _list_sql(end, reverse, limit)
    for end in (False, True)
    for reverse in (False, True)
    for limit in (False, True)
}

_STRING_OPTIONS = ("start", "startAfter", "end", "prefix")
_IGNORED_OPTIONS = ("allowConcurrency", "noCache")
_MAX_CHAR = 0x10FFFF


@dataclass(frozen=True, slots=True)
class ListQuery:
    """``list()`` options reduced to a key range: ``start <= key < end``."""

    start: str
    end: str | None
    reverse: bool
    limit: int | None


def _key_after_prefix(prefix: str) -> str | None:
    """The smallest key greater than every key starting with ``prefix`` (None: no such key)."""
    stripped = prefix.rstrip(chr(_MAX_CHAR))
    if not stripped:
        return None
    last = ord(stripped[-1]) + 1
    if 0xD800 <= last <= 0xDFFF:  # surrogates are never part of a valid key
        last = 0xE000
    return stripped[:-1] + chr(last)


def compile_list_options(options: Mapping[str, Any]) -> ListQuery | None:
    """Validate ``list()`` options as workerd does; None means the range is empty."""
    given = {name: value for name, value in options.items() if value is not None}
    for name, value in given.items():
        if name in _STRING_OPTIONS:
            if not isinstance(value, str):
                raise StorageTypeError(
                    f'list() option "{name}" must be a string, got "{type(value).__name__}"'
                )
        elif name == "reverse":
            if not isinstance(value, bool):
                raise StorageTypeError(
                    f'list() option "reverse" must be a bool, got "{type(value).__name__}"'
                )
        elif name == "limit":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise StorageTypeError(
                    f'list() option "limit" must be a number, got "{type(value).__name__}"'
                )
        elif name not in _IGNORED_OPTIONS:
            raise StorageTypeError(
                f'list() got an unknown option "{name}"; the options are start, startAfter, '
                "end, prefix, reverse and limit"
            )

    start: str = given.get("start", "")
    if "startAfter" in given:
        if "start" in given:
            raise StorageTypeError(messages.LIST_BOTH_STARTS)
        start = given["startAfter"] + "\0"  # the first key after startAfter, inclusive
    end: str | None = given.get("end")
    limit: int | None = None
    if "limit" in given:
        if not math.isfinite(given["limit"]) or given["limit"] != int(given["limit"]):
            raise StorageTypeError('list() option "limit" must be an integer')
        if given["limit"] <= 0:
            raise StorageTypeError(messages.LIST_LIMIT_POSITIVE)
        limit = int(given["limit"])
    prefix: str = given.get("prefix", "")
    if prefix:
        if start < prefix:
            start = prefix
        elif not start.startswith(prefix):
            return None  # start lies after every key with the prefix
        after = _key_after_prefix(prefix)
        if after is not None:
            if end is None:
                end = after
            elif end <= prefix:
                return None
            elif not end.startswith(prefix):
                end = after
    if end is not None and end <= start:
        return None
    return ListQuery(start, end, bool(given.get("reverse", False)), limit)


def check_key(key: Any) -> str:
    if not isinstance(key, str):
        raise StorageTypeError(f'Storage keys must be strings, got "{type(key).__name__}"')
    return key


def check_keys(keys: Any, method: str) -> list[str]:
    if not isinstance(keys, (list, tuple)):
        raise StorageTypeError(
            f'{method}() expects a string key or a list of keys, got "{type(keys).__name__}"'
        )
    return [check_key(key) for key in keys]


class KvStore:
    """KV operations on one object's ``_cf_KV`` table."""

    __slots__ = ("_conn", "_limits")

    def __init__(self, conn: StorageConnection, limits: StorageLimits | None) -> None:
        self._conn = conn
        self._limits = limits

    # -- JavaScript-style overloads: one key or many -------------------------------------------

    def get_any(self, keys: Any) -> Any:
        """``get(key)`` → value or None; ``get([keys])`` → dict of the found keys, in key order."""
        if isinstance(keys, str):
            return self.get(keys)
        return self.get_many(check_keys(keys, "get"))

    def put_any(self, key_or_entries: Any, value: Any = MISSING) -> None:
        """``put(key, value)`` or ``put({key: value, ...})`` (an options dict may follow)."""
        if isinstance(key_or_entries, str):
            if value is MISSING:
                raise StorageTypeError(messages.PUT_UNDEFINED)
            self.put(key_or_entries, value)
        elif isinstance(key_or_entries, Mapping):
            if value is not MISSING and value is not None and not isinstance(value, Mapping):
                raise StorageTypeError(messages.PUT_SIGNATURE)
            self.put_many(key_or_entries)
        else:
            raise StorageTypeError(
                "put() expects a string key or a dict of entries, "
                f'got "{type(key_or_entries).__name__}"'
            )

    def delete_any(self, keys: Any) -> bool | int:
        """``delete(key)`` → whether it existed; ``delete([keys])`` → how many existed."""
        if isinstance(keys, str):
            return self.delete(keys)
        return self.delete_many(check_keys(keys, "delete"))

    # -- single keys ---------------------------------------------------------------------------

    def get(self, key: str) -> Any:
        if self._limits is not None:
            self._limits.check_key(key)
        try:
            row = self._conn.read(_GET, (key,)).fetchone()
        except UnicodeEncodeError as exc:
            raise StorageTypeError(f"Storage key is not valid Unicode: {exc}") from None
        return None if row is None else clone.decode(row[0])

    def put(self, key: str, value: Any) -> None:
        encoded = clone.encode(value)
        if self._limits is not None:
            self._limits.check_key(key)
            self._limits.check_value(encoded)
        try:
            self._conn.write(_PUT, (key, encoded))
        except UnicodeEncodeError as exc:
            raise StorageTypeError(f"Storage key is not valid Unicode: {exc}") from None

    def delete(self, key: str) -> bool:
        if self._limits is not None:
            self._limits.check_key(key)
        try:
            return self._conn.write(_DELETE, (key,)).rowcount > 0
        except UnicodeEncodeError as exc:
            raise StorageTypeError(f"Storage key is not valid Unicode: {exc}") from None

    # -- batches -------------------------------------------------------------------------------

    def get_many(self, keys: list[str]) -> dict[str, Any]:
        if self._limits is not None:
            self._limits.check_batch(keys, len(keys))
        found: dict[str, Any] = {}
        for key in sorted(set(keys)):
            try:
                row = self._conn.read(_GET, (key,)).fetchone()
            except UnicodeEncodeError as exc:
                raise StorageTypeError(f"Storage key is not valid Unicode: {exc}") from None
            if row is not None:
                found[key] = clone.decode(row[0])
        return found

    def put_many(self, entries: Mapping[Any, Any]) -> None:
        if self._limits is not None and self._limits.max_batch_keys is not None:
            if len(entries) > self._limits.max_batch_keys:
                raise LimitExceededError(messages.MAX_PAIRS)
        rows: list[tuple[str, bytes]] = []
        for key, value in entries.items():
            check_key(key)
            encoded = clone.encode(value)
            if self._limits is not None:
                self._limits.check_batch((key,), 1, pairs=True)
                self._limits.check_value(encoded, key)
            rows.append((key, encoded))
        if rows:
            try:
                self._conn.write_many(_PUT, rows)
            except UnicodeEncodeError as exc:
                raise StorageTypeError(f"Storage key is not valid Unicode: {exc}") from None

    def delete_many(self, keys: list[str]) -> int:
        if self._limits is not None:
            self._limits.check_batch(keys, len(keys))
        deleted = 0
        for key in dict.fromkeys(keys):
            try:
                deleted += self._conn.write(_DELETE, (key,)).rowcount
            except UnicodeEncodeError as exc:
                raise StorageTypeError(f"Storage key is not valid Unicode: {exc}") from None
        return deleted

    # -- ranges --------------------------------------------------------------------------------

    def list(self, options: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """Key/value pairs matching ``list()`` options, in key order (or reverse)."""
        query = compile_list_options(options)
        if query is None:
            return []
        params: list[Any] = [query.start]
        if query.end is not None:
            params.append(query.end)
        if query.limit is not None:
            params.append(query.limit)
        sql = _LIST[(query.end is not None, query.reverse, query.limit is not None)]
        try:
            rows = self._conn.read(sql, params).fetchall()
        except UnicodeEncodeError as exc:
            raise StorageTypeError(f"list() option is not valid Unicode: {exc}") from None
        decode = clone.decode
        return [(key, decode(value)) for key, value in rows]

    def clear(self) -> int:
        """Delete every key (``deleteAll``); returns how many there were."""
        return self._conn.write(_CLEAR).rowcount
