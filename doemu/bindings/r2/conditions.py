"""R2's ``onlyIf`` conditionals and ``range`` reads, as the JS binding takes them.

``onlyIf`` is an object (``etagMatches``, ``etagDoesNotMatch``, ``uploadedBefore``,
``uploadedAfter``, ``secondsGranularity``) or a ``Headers`` (``If-Match``, ``If-None-Match``,
``If-Unmodified-Since``, ``If-Modified-Since``); etag lists are comma-separated, quoted or not,
``W/`` marks a weak one, ``*`` matches any. The rules are HTTP's (RFC 9110 13.2.2), as R2 and
Miniflare apply them: ``If-None-Match`` compares weakly, a failed ``If-None-Match`` makes
``If-Modified-Since`` irrelevant, and so on.

``range`` is ``{offset, length}`` or ``{suffix}`` (or a ``Headers`` with ``Range: bytes=…``); one
that cannot be satisfied is R2's error 10039.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import BindingTypeError

__all__ = ["Conditional", "InvalidRange", "ReadRange", "conditional", "read_range"]


class InvalidRange(ValueError):
    """The requested range is not satisfiable."""


@dataclass(frozen=True)
class Etag:
    value: str | None  # None: the wildcard
    weak: bool = False


@dataclass(frozen=True)
class Conditional:
    """A parsed ``onlyIf`` (times in epoch ms)."""

    matches: tuple[Etag, ...] | None = None
    not_matches: tuple[Etag, ...] | None = None
    before: float | None = None
    after: float | None = None
    seconds: bool = False

    def holds(self, etag: str | None, uploaded: float | None) -> bool:
        """Whether the conditions hold for an object (``etag`` None: there is no object)."""
        if etag is None or uploaded is None:
            return self.matches is None and self.after is None
        if_match = self.matches is None or _includes(self.matches, etag, weak=False)
        if_none = self.not_matches is None or not _includes(self.not_matches, etag, weak=True)
        cut = _to_seconds if self.seconds else _same
        modified = cut(uploaded)
        if_modified = (
            self.after is None
            or cut(self.after) < modified
            or (self.not_matches is not None and if_none)
        )
        if_unmodified = (
            self.before is None
            or modified < cut(self.before)
            or (self.matches is not None and if_match)
        )
        return if_match and if_none and if_modified and if_unmodified


def _same(ms: float) -> float:
    return ms


def _to_seconds(ms: float) -> float:
    return (ms // 1000) * 1000


def _includes(etags: tuple[Etag, ...], etag: str, *, weak: bool) -> bool:
    return any(e.value is None or (e.value == etag and (weak or not e.weak)) for e in etags)


_ETAG = re.compile(r'\s*(W/)?"?([^",]*)"?\s*')


def _etags(value: Any, *, from_header: bool = False) -> tuple[Etag, ...] | None:
    if value is None:
        return None
    out = []
    for part in str(value).split(","):
        bare = part.strip()
        if not from_header and len(bare) > 1 and bare.startswith('"') and bare.endswith('"'):
            # workerd's text: an onlyIf object takes bare etags (a header takes quoted ones).
            raise BindingTypeError(f"Conditional ETag should not be wrapped in quotes ({bare}).")
        if part.strip() == "*":
            out.append(Etag(None))
            continue
        match = _ETAG.fullmatch(part)
        if match is not None and match.group(2):
            out.append(Etag(match.group(2), weak=bool(match.group(1))))
    return tuple(out) or None


def _time(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.astimezone()  # a naive datetime is local time, as the SDK reads Dates
        return float(value.timestamp()) * 1000.0
    if isinstance(value, int | float):
        return float(value)
    try:
        parsed = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError):
        return None
    return float(parsed.timestamp()) * 1000.0


def _headers(value: Any) -> Mapping[str, str] | None:
    """A ``Headers`` object's fields (lowercase), or None for anything else."""
    items = getattr(value, "items", None)
    if items is None or isinstance(value, Mapping):
        return None
    return {str(k).lower(): str(v) for k, v in items()}


def conditional(value: Any) -> Conditional | None:
    """The ``onlyIf`` option as a :class:`Conditional` (None when absent)."""
    if value is None:
        return None
    headers = _headers(value)
    if headers is not None:
        return Conditional(
            _etags(headers.get("if-match"), from_header=True),
            _etags(headers.get("if-none-match"), from_header=True),
            _time(headers.get("if-unmodified-since")),
            _time(headers.get("if-modified-since")),
            True,  # HTTP dates have second granularity
        )
    if not isinstance(value, Mapping):
        return None
    return Conditional(
        _etags(value.get("etagMatches")),
        _etags(value.get("etagDoesNotMatch")),
        _time(value.get("uploadedBefore")),
        _time(value.get("uploadedAfter")),
        bool(value.get("secondsGranularity")),
    )


@dataclass(frozen=True)
class ReadRange:
    """Bytes ``[offset, offset + length)`` of an object, and how the caller asked for them."""

    offset: int
    length: int
    suffix: int | None = None


_RANGE_HEADER = re.compile(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*")


def read_range(value: Any, size: int) -> ReadRange | None:
    """The ``range`` option for an object of ``size`` bytes (None: the whole object).

    Raises :class:`InvalidRange` for one that cannot be satisfied.
    """
    if value is None:
        return None
    headers = _headers(value)
    if headers is not None:
        header = headers.get("range")
        if header is None:
            return None
        match = _RANGE_HEADER.fullmatch(header)
        if match is None:
            return None  # not one byte range: the whole object, as for an unparsable header
        first, last = match.groups()
        if not first:
            value = {"suffix": int(last)} if last else None
        else:
            end = int(last) if last else size - 1
            value = {"offset": int(first), "length": end - int(first) + 1}
        if value is None:
            return None
    if not isinstance(value, Mapping):
        raise InvalidRange("range must be {offset, length} or {suffix}")
    offset, length, suffix = value.get("offset"), value.get("length"), value.get("suffix")
    if suffix is not None:
        suffix = int(suffix)
        if suffix <= 0:
            raise InvalidRange("suffix must be > 0")
        suffix = min(suffix, size)
        return ReadRange(size - suffix, suffix, suffix)
    start = 0 if offset is None else int(offset)
    count = size - start if length is None else int(length)
    if start < 0 or start > size or count <= 0:
        raise InvalidRange(f"offset {start}, length {count} of {size} bytes")
    return ReadRange(start, min(count, size - start))
