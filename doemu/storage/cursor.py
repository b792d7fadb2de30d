"""``SqlStorageCursor``: the result of ``sql.exec()``, in Cloudflare's shape.

A cursor is an iterator of rows (``for row in cursor``), with ``toArray()``, ``one()``, ``raw()``
(rows as lists, sharing the same position), ``next()`` returning ``{done, value}``, and the
``columnNames``, ``rowsRead`` and ``rowsWritten`` properties. Rows allow both ``row["c"]`` and
``row.c``. Rows are fetched lazily from SQLite, as in workerd; Cloudflare advises consuming a
cursor before the next ``await`` because it is not a snapshot, and the same holds here.

``rowsRead`` and ``rowsWritten`` are approximations: Python's ``sqlite3`` does not expose the
per-statement counters workerd reads. ``rowsRead`` counts the rows this cursor has returned so far
and ``rowsWritten`` counts the rows the statement inserted, updated or deleted (triggers
included). Cloudflare also counts rows scanned and index entries written, so both numbers are
lower bounds of what Cloudflare bills.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from doemu.errors import SqlError
from doemu.jsboundary import JsDict, hinted, is_strict
from doemu.storage import messages

__all__ = ["IteratorResult", "RawIterator", "SqlCursor", "SqlRow"]

#: On Cloudflare the cursor (the SDK's wrapper of it) is iterable (``for row in cursor``) but
#: not an iterator: workerd's text, and doemu's advice (a note).
_NOT_AN_ITERATOR = "'_BindingWrapper' object is not an iterator"
_NOT_AN_ITERATOR_HINT = (
    "on Cloudflare the cursor is iterable but next(cursor) fails; use next(iter(cursor)), "
    "cursor.one() or cursor.next()"
)

T = TypeVar("T")


class SqlRow(dict[str, Any]):
    """One result row: a ``dict`` of column → value that also allows ``row.column``."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass(frozen=True, slots=True)
class IteratorResult(Generic[T]):
    """What ``next()`` returns: JavaScript's iterator result, ``{done, value}``."""

    done: bool
    value: T | None = None


class SqlCursor:
    """The cursor of the last statement of one ``sql.exec()`` call."""

    __slots__ = ("_buffer", "_columns", "_cursor", "_map_error", "_rows_read", "_rows_written")

    def __init__(
        self,
        cursor: sqlite3.Cursor,
        rows_written: int,
        map_error: Callable[[sqlite3.Error], SqlError],
        buffered: list[tuple[Any, ...]] | None = None,
    ) -> None:
        description = cursor.description
        self._columns = [column[0] for column in description] if description else []
        self._rows_read = 0
        self._rows_written = rows_written
        self._map_error = map_error
        # Rows already fetched (statements that write and return rows are drained at once, so
        # no write statement is left in progress when the turn commits).
        self._buffer = iter(buffered) if buffered is not None else None
        self._cursor: sqlite3.Cursor | None = cursor
        if buffered is not None or not self._columns:
            cursor.close()  # nothing (more) to fetch from SQLite
            self._cursor = None

    def _next_values(self) -> tuple[Any, ...] | None:
        if self._buffer is not None:
            buffered = next(self._buffer, None)
            if buffered is not None:
                self._rows_read += 1
            return buffered
        cursor = self._cursor
        if cursor is None:
            return None
        try:
            values: tuple[Any, ...] | None = cursor.fetchone()
        except sqlite3.Error as exc:
            self._cursor = None
            raise self._map_error(exc) from exc
        if values is None:
            self._cursor = None
            return None
        self._rows_read += 1
        return values

    def _next_row(self) -> SqlRow | None:
        values = self._next_values()
        if values is None:
            return None
        return SqlRow(zip(self._columns, values, strict=True))

    # -- iteration ------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[SqlRow]:
        return self if not is_strict() else self._rows()

    def _rows(self) -> Iterator[SqlRow]:
        while (row := self._next_row()) is not None:
            yield row

    def __next__(self) -> SqlRow:
        if is_strict():
            raise hinted(TypeError(_NOT_AN_ITERATOR), _NOT_AN_ITERATOR_HINT)
        row = self._next_row()
        if row is None:
            raise StopIteration
        return row

    def next(self) -> Any:
        """JavaScript's ``cursor.next()``: ``{done, value}`` (a ``JsDict``, as the SDK gives
        it; an ``IteratorResult`` under ``--lenient``)."""
        row = self._next_row()
        if is_strict():
            return JsDict({"done": row is None, "value": row})
        return IteratorResult(True) if row is None else IteratorResult(False, row)

    def toArray(self) -> list[SqlRow]:
        """Every remaining row."""
        if self._buffer is not None:
            rows = list(self._buffer)
        elif self._cursor is not None:
            cursor, self._cursor = self._cursor, None
            try:
                rows = cursor.fetchall()
            except sqlite3.Error as exc:
                raise self._map_error(exc) from exc
        else:
            return []
        self._rows_read += len(rows)
        columns = self._columns
        return [SqlRow(zip(columns, values, strict=True)) for values in rows]

    def one(self) -> SqlRow:
        """The only row; raises ``SqlError`` if there are none or more than one."""
        row = self._next_row()
        if row is None:
            raise SqlError(messages.ONE_NONE)
        if self._next_values() is not None:
            self._close()
            raise SqlError(messages.ONE_MULTIPLE)
        return row

    def raw(self) -> RawIterator:
        """An iterator over the same results with each row as a list of values."""
        return RawIterator(self)

    def _close(self) -> None:
        self._buffer = None
        if self._cursor is not None:
            self._cursor.close()
            self._cursor = None

    # -- properties -----------------------------------------------------------------------------

    @property
    def columnNames(self) -> list[str]:
        """Column names in the order ``raw()`` returns values (duplicates kept)."""
        return list(self._columns)

    @property
    def rowsRead(self) -> int:
        """Rows returned so far (a lower bound of Cloudflare's figure; see the module doc)."""
        return self._rows_read

    @property
    def rowsWritten(self) -> int:
        """Rows inserted, updated or deleted by the statement (a lower bound; see module doc)."""
        return self._rows_written

    def __repr__(self) -> str:
        return f"<SqlCursor columns={self._columns!r} rowsRead={self._rows_read}>"


class RawIterator:
    """``cursor.raw()``: rows as lists, advancing the same underlying cursor."""

    __slots__ = ("_cursor",)

    def __init__(self, cursor: SqlCursor) -> None:
        self._cursor = cursor

    def __iter__(self) -> Iterator[list[Any]]:
        return self

    def __next__(self) -> list[Any]:
        values = self._cursor._next_values()
        if values is None:
            raise StopIteration
        return list(values)

    def next(self) -> IteratorResult[list[Any]]:
        values = self._cursor._next_values()
        return IteratorResult(True) if values is None else IteratorResult(False, list(values))

    def toArray(self) -> list[list[Any]]:
        return list(self)

    @property
    def columnNames(self) -> list[str]:
        return self._cursor.columnNames
