"""A D1 database's SQLite file, and how D1 runs a query on it.

D1 is SQLite behind a Durable Object, so user SQL meets the same authorizer as an object's
``ctx.storage.sql`` (no ``_cf_*`` names, no ``BEGIN``/``SAVEPOINT``: use ``batch()``, no
``ATTACH``, allow-listed pragmas), with workerd's error texts (``no such table: t:
SQLITE_ERROR``), to which the D1 API adds ``D1_ERROR: ``. What D1 adds on top is here:

* values cross as JSON: a JS number (every Python ``int`` and ``float`` that Pyodide turns into
  one) is bound as a SQLite ``REAL``, a boolean as ``1``/``0``, bytes and lists of bytes as a
  ``BLOB``; integers beyond 2**53 are JS ``BigInt`` and refused (``D1_TYPE_ERROR``); results
  come back as JS numbers (an integral value is an ``int``), and a ``BLOB`` as a list of ints;
* every query reports ``meta``: ``changes``, ``last_row_id``, ``changed_db``, ``size_after``,
  ``rows_read``, ``rows_written``, ``duration`` (ms) and, as Cloudflare documents them,
  ``served_by_region``, ``served_by_primary`` and ``timings.sql_duration_ms``;
* a ``batch`` is one transaction: every statement, or none.

``rows_read`` and ``rows_written`` are approximations (rows returned; rows changed), as for
objects: Python's ``sqlite3`` does not expose SQLite's statement counters.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...storage import messages
from ...storage.authorizer import Authorizer
from ...storage.connection import internal_sql
from ...storage.durability import SyncPool
from ...storage.sql import split_statements
from ..boundary import MAX_SAFE_INTEGER, js_number, js_string
from ..errors import BindingError
from ..sqlite import BindingFile

__all__ = ["D1Engine", "D1Error", "Query", "QueryResult", "d1_value"]

_CHANGES = internal_sql("SELECT total_changes(), last_insert_rowid()")
_SIZE = internal_sql(
    "SELECT (SELECT page_count FROM pragma_page_count()) * "
    "(SELECT page_size FROM pragma_page_size())"
)

_SERVED_BY = "doemu.db"


class D1Error(BindingError):
    """A D1 error: ``D1_ERROR: …``, ``D1_TYPE_ERROR: …``, ``D1_EXEC_ERROR: …``…"""


@dataclass(frozen=True, slots=True)
class Query:
    """One prepared statement with its bound values (already converted for SQLite)."""

    sql: str
    params: tuple[Any, ...] = ()


@dataclass(slots=True)
class QueryResult:
    """What one query produced: columns, rows (SQLite values) and its ``meta``."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    meta: dict[str, Any] = field(default_factory=dict)


def d1_value(value: Any) -> Any:
    """A bound value as D1 sends and binds it (see the module docstring); raises
    ``D1_TYPE_ERROR`` for what D1 refuses, when ``bind()`` is called, as D1 does."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise D1Error(f"D1_TYPE_ERROR: Type 'bigint' not supported for value '{value}'")
        return float(value)
    if isinstance(value, float):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, list) and all(isinstance(b, int) and 0 <= b < 256 for b in value):
        return bytes(value)
    raise D1Error(f"D1_TYPE_ERROR: Type 'object' not supported for value '{js_string(value)}'")


def js_row_value(value: Any) -> Any:
    """A SQLite value as D1 returns it to Python (JS numbers; a BLOB as a list of ints)."""
    if isinstance(value, bytes):
        return list(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return js_number(value)
    return value


_NEAR = re.compile(r'near "(?P<token>.+)": syntax error$', re.S)


def _offset(message: str, statements: Sequence[str]) -> str:
    """`` at offset N`` for a syntax error: where its token first appears in the statements.

    SQLite knows the offset (``sqlite3_error_offset``) but Python's ``sqlite3`` does not expose
    it; the first occurrence of the token on a token boundary is where SQLite stops in all but
    contrived queries.
    """
    match = _NEAR.match(message)
    if match is None:
        return ""
    token = match["token"]
    for statement in statements:
        start = 0
        while (at := statement.find(token, start)) >= 0:
            before = statement[at - 1] if at else " "
            if not (before.isalnum() or before == "_"):
                stripped = len(statement) - len(statement.lstrip())
                return f" at offset {len(statement[stripped:at].encode())}"
            start = at + 1
    return ""


class D1Engine:
    """One D1 database file, open for the runtime (used on the event loop)."""

    def __init__(self, path: Path, sync_pool: SyncPool | None = None) -> None:
        self.path = path
        self.authorizer = Authorizer()
        self.file = BindingFile(path, (), sync_pool, authorizer=self.authorizer)
        self.db = self.file.conn
        #: Queries run so far: the session bookmark's counter.
        self.commits = 0

    def run(self, queries: Sequence[Query]) -> list[QueryResult]:
        """Run ``queries`` as one transaction (a batch; one query is a batch of one).

        Raises :class:`D1Error` with D1's text; nothing of a failed batch is kept.
        """
        with self.file.write():
            results = [self._one(query) for query in queries]
        self.commits += 1
        return results

    def durable(self, results: Sequence[QueryResult]) -> asyncio.Future[None] | None:
        """What the answer waits for: the fsync of a batch that changed the database."""
        if any(r.meta["changed_db"] for r in results):
            return self.file.durable()
        return None

    def _one(self, query: Query) -> QueryResult:
        statements = split_statements(query.sql)
        if not statements:
            blank = query.sql.strip() == ""
            raise D1Error(
                "D1_ERROR: "
                + ("No SQL statements detected." if blank else messages.SQL_NO_STATEMENT)
            )
        started = time.perf_counter()
        total_before, rowid_before = self.file.internal(_CHANGES).fetchone()
        size_before = self.file.internal(_SIZE).fetchone()[0]
        db = self.db
        try:
            for statement in statements[:-1]:
                db.execute(statement).close()
            cursor = db.execute(statements[-1], query.params)
            columns = [d[0] for d in cursor.description or ()]
            rows = cursor.fetchall()
        except sqlite3.ProgrammingError as exc:
            if "Incorrect number of bindings" in str(exc):
                raise D1Error(f"D1_ERROR: {messages.SQL_WRONG_BINDING_COUNT}") from None
            raise D1Error(f"D1_ERROR: {exc}") from None
        except sqlite3.Error as exc:
            raise D1Error(f"D1_ERROR: {self._text(exc, statements)}") from None
        except OverflowError as exc:
            raise D1Error(f"D1_ERROR: {exc}") from None
        total_after, rowid_after = self.file.internal(_CHANGES).fetchone()
        size_after = self.file.internal(_SIZE).fetchone()[0]
        duration = (time.perf_counter() - started) * 1000.0
        changes = total_after - total_before
        meta = {
            "served_by": _SERVED_BY,
            "served_by_region": "local",
            "served_by_primary": True,
            "timings": {"sql_duration_ms": duration},
            "duration": duration,
            "changes": changes,
            "last_row_id": rowid_after,
            "changed_db": bool(changes) or rowid_after != rowid_before or size_after != size_before,
            "size_after": size_after,
            "rows_read": len(rows),
            "rows_written": changes,
        }
        return QueryResult(columns, rows, meta)

    def _text(self, exc: sqlite3.Error, statements: Sequence[str]) -> str:
        """workerd's ``message: SQLITE_CODE`` for a ``sqlite3`` error (see doemu.storage.sql),
        with `` at offset N`` after a syntax error, as workerd adds it."""
        auth = self.authorizer
        if auth.denial is not None:
            denial, auth.denial = auth.denial, None
            return denial
        extended = getattr(exc, "sqlite_errorname", None)
        if not isinstance(extended, str) or not extended.startswith("SQLITE_"):
            return str(exc)
        primary = "_".join(extended.split("_")[:2])  # SQLITE_CONSTRAINT_PRIMARYKEY → …CONSTRAINT
        text = f"{exc}{_offset(str(exc), statements)}: {primary}"
        if primary == "SQLITE_CONSTRAINT" and extended != primary:
            text += f" (extended: {extended})"  # workerd names a constraint's extended code
        return text

    def size(self) -> int:
        return int(self.file.internal(_SIZE).fetchone()[0])

    def close(self) -> None:
        self.file.close()
