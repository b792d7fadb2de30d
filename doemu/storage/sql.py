"""``ctx.storage.sql``: Cloudflare's synchronous SQL API over the object's SQLite file.

``exec(query, *bindings)`` runs every statement of ``query`` at once (as workerd does: earlier
statements run to their first row and are discarded), binds parameters to the last statement only,
and returns the last statement's :class:`~doemu.storage.cursor.SqlCursor`. Statements are split
with ``sqlite3.complete_statement``, which understands strings, comments and trigger bodies.

Errors keep workerd's format, SQLite's message followed by the primary result code
(``no such table: foo: SQLITE_ERROR``); refusals by the authorizer are
:class:`~doemu.errors.SqlNotAllowedError`. workerd also appends `` at offset N`` when SQLite
reports an error position; Python's ``sqlite3`` does not expose it, so doemu's texts omit it.
A failed statement leaves the connection and the turn's other writes intact.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from doemu.errors import SqlError, SqlNotAllowedError
from doemu.jsboundary import hinted, is_strict
from doemu.storage import messages
from doemu.storage.connection import StorageConnection, internal_sql
from doemu.storage.cursor import SqlCursor
from doemu.storage.errors import StorageTypeError

__all__ = ["SqlStorage", "split_statements"]

# https://www.sqlite.org/rescode.html#primary_result_code_list
_PRIMARY_CODES = {
    1: "SQLITE_ERROR",
    2: "SQLITE_INTERNAL",
    3: "SQLITE_PERM",
    4: "SQLITE_ABORT",
    5: "SQLITE_BUSY",
    6: "SQLITE_LOCKED",
    7: "SQLITE_NOMEM",
    8: "SQLITE_READONLY",
    9: "SQLITE_INTERRUPT",
    10: "SQLITE_IOERR",
    11: "SQLITE_CORRUPT",
    12: "SQLITE_NOTFOUND",
    13: "SQLITE_FULL",
    14: "SQLITE_CANTOPEN",
    15: "SQLITE_PROTOCOL",
    16: "SQLITE_EMPTY",
    17: "SQLITE_SCHEMA",
    18: "SQLITE_TOOBIG",
    19: "SQLITE_CONSTRAINT",
    20: "SQLITE_MISMATCH",
    21: "SQLITE_MISUSE",
    22: "SQLITE_NOLFS",
    23: "SQLITE_AUTH",
    24: "SQLITE_FORMAT",
    25: "SQLITE_RANGE",
    26: "SQLITE_NOTADB",
    27: "SQLITE_NOTICE",
    28: "SQLITE_WARNING",
}
_SQLITE_AUTH = 23
_SQLITE_CONSTRAINT = 19
#: ``ALTER TABLE t RENAME TO _cf_…``: a rename to a reserved name (quoted or not).
_RENAME_TO_RESERVED = re.compile(
    r"\bALTER\s+TABLE\b.*?\bRENAME\s+TO\s+[\"`\[']?_cf_", re.IGNORECASE | re.DOTALL
)

_DATABASE_SIZE = internal_sql(
    "SELECT ((SELECT page_count FROM pragma_page_count()) - "
    "(SELECT freelist_count FROM pragma_freelist_count())) * "
    "(SELECT page_size FROM pragma_page_size())"
)

_PLAIN_BINDINGS = frozenset({type(None), int, float, str, bytes})


def _blank(sql: str) -> bool:
    """True if ``sql`` holds only whitespace, comments and semicolons (no statement)."""
    i, n = 0, len(sql)
    while i < n:
        char = sql[i]
        if char in " \t\n\r\f\v;":
            i += 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            return False
    return True


def split_statements(sql: str) -> list[str]:
    """Split ``sql`` into statements, ignoring empty ones (comments, stray semicolons)."""
    statements: list[str] = []
    start = 0
    end = sql.find(";")
    while end >= 0:
        candidate = sql[start : end + 1]
        if sqlite3.complete_statement(candidate):
            if not _blank(candidate):
                statements.append(candidate)
            start = end + 1
        end = sql.find(";", end + 1)
    rest = sql[start:]
    if not _blank(rest):
        statements.append(rest)
    return statements


def _binding(index: int, value: Any) -> Any:
    if isinstance(value, bool):
        # A Python bool reaches workerd as a JavaScript boolean, which SQLite stores as text.
        return "true" if value else "false"
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    # Subclasses such as IntEnum or StrEnum bind as their base type.
    if isinstance(value, int):
        return _js_number(int(value)) if is_strict() else int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        return bytes(value)
    raise SqlError(
        f'SQL binding {index} has unsupported type "{type(value).__name__}"; expected None, '
        "bool, int, float, str or bytes."
    )


#: Pyodide passes an int whose magnitude reaches this to JavaScript as a BigInt (observed: 2**53-1
#: itself already is one), which workerd's SQL bindings refuse.
BIGINT_FROM = 2**53 - 1


def _js_number(value: int) -> float:
    """A Python int as Pyodide hands it to workerd: a JavaScript number, which SQLite stores as
    REAL (``typeof(?)`` is ``'real'``, ``? / 2`` divides exactly); from 2**53 - 1 on it becomes a
    BigInt, which workerd refuses."""
    if -BIGINT_FROM < value < BIGINT_FROM:
        return float(value)
    raise hinted(
        StorageTypeError("Cannot convert a BigInt value to a number"),
        "Python ints from 2**53 - 1 on reach workerd as BigInts; bind them as str",
    )


def _js_values(_cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row as it reaches Python through JavaScript: a REAL holding an integer is a JS number
    Pyodide gives as an ``int``; a BLOB is an ArrayBuffer Pyodide gives as a ``memoryview``."""
    for value in row:
        kind = type(value)
        if (
            (kind is float and value.is_integer())
            or kind is bytes
            or (kind is int and not -BIGINT_FROM < value < BIGINT_FROM)
        ):
            return tuple(_js_value(v) for v in row)
    return row


def _js_value(value: Any) -> Any:
    kind = type(value)
    if kind is float:
        return int(value) if value.is_integer() else value
    if kind is int:
        # A JavaScript number past 2**53 has lost precision: Pyodide gives the float it holds.
        return value if -BIGINT_FROM < value < BIGINT_FROM else float(value)
    if kind is bytes:
        return memoryview(value)
    return value


def _bindings(values: tuple[Any, ...]) -> tuple[Any, ...]:
    if is_strict():
        return tuple(
            _js_number(value)
            if type(value) is int
            else value
            if type(value) in _PLAIN_BINDINGS
            else _binding(i, value)
            for i, value in enumerate(values, start=1)
        )
    if all(type(value) in _PLAIN_BINDINGS for value in values):
        return values
    return tuple(
        value if type(value) in _PLAIN_BINDINGS else _binding(i, value)
        for i, value in enumerate(values, start=1)
    )


class SqlStorage:
    """``ctx.storage.sql``."""

    __slots__ = ("_conn",)

    def __init__(self, conn: StorageConnection) -> None:
        self._conn = conn

    def exec(self, query: str, *bindings: Any) -> SqlCursor:
        """Run ``query`` (one or more statements) and return the last statement's cursor."""
        if not isinstance(query, str):
            raise StorageTypeError(
                f'sql.exec() expects a string query, got "{type(query).__name__}"'
            )
        conn = self._conn
        conn.check_open()
        statements = split_statements(query)
        if not statements:
            raise SqlError(messages.SQL_NO_STATEMENT)
        for statement in statements:
            if _RENAME_TO_RESERVED.search(statement):
                # SQLite's authorizer never sees a rename's new name; workerd refuses it.
                raise SqlNotAllowedError("not authorized: SQLITE_AUTH")
        params = _bindings(bindings)
        db = conn.db
        with conn.user_statement():
            try:
                for statement in statements[:-1]:
                    try:
                        db.execute(statement).close()
                    except sqlite3.ProgrammingError as exc:
                        if str(exc).startswith("Incorrect number of bindings"):
                            raise SqlError(messages.SQL_BINDINGS_ON_EARLIER_STATEMENT) from None
                        raise
                before = db.total_changes
                try:
                    cursor = db.execute(statements[-1], params)
                except sqlite3.ProgrammingError as exc:
                    if str(exc).startswith("Incorrect number of bindings"):
                        raise SqlError(messages.SQL_WRONG_BINDING_COUNT) from None
                    raise
            except sqlite3.Error as exc:
                raise self._error(exc) from None
            except OverflowError as exc:
                raise SqlError(f"SQL binding out of range: {exc}") from None
            if is_strict():
                cursor.row_factory = _js_values
            buffered = None
            if cursor.description and "returning" in statements[-1].lower():
                # A write with RETURNING stays "in progress" until drained, which would make
                # the turn's COMMIT fail, and SQLite counts its changes only at the end.
                try:
                    buffered = cursor.fetchall()
                except sqlite3.Error as exc:
                    raise self._error(exc) from None
        return SqlCursor(cursor, db.total_changes - before, self._error, buffered)

    def _error(self, exc: sqlite3.Error) -> SqlError:
        """Turn a ``sqlite3`` error into workerd's ``message: SQLITE_CODE`` form."""
        auth = self._conn.authorizer
        if auth.denial is not None:
            denial, auth.denial = auth.denial, None
            return SqlNotAllowedError(denial)
        code = getattr(exc, "sqlite_errorcode", None)
        primary = code & 0xFF if isinstance(code, int) else None
        name = _PRIMARY_CODES.get(primary) if primary is not None else None
        text = f"{exc}: {name}" if name else str(exc)
        if primary == _SQLITE_CONSTRAINT and code != primary:
            # workerd names the extended code of a constraint failure.
            text += f" (extended: {getattr(exc, 'sqlite_errorname', code)})"
        if primary == _SQLITE_AUTH or str(exc).startswith("not authorized"):
            return SqlNotAllowedError(text)
        return SqlError(text)

    @property
    def databaseSize(self) -> int:
        """Bytes used by the database (allocated pages minus free pages, times the page size)."""
        size: int = self._conn.read(_DATABASE_SIZE).fetchone()[0]
        return size
