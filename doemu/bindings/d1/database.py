"""``env.DB``: a D1 database as Cloudflare's Python Workers API presents it.

``prepare(sql)`` makes a :class:`~doemu.bindings.d1.statement.D1PreparedStatement`; ``batch([…])``
runs statements as one transaction and returns one result per statement; ``exec(sql)`` runs
a script one line at a time (D1 splits it on newlines, as on Cloudflare) and returns ``{count,
duration}``, an error naming the line (``D1_EXEC_ERROR: Error in line 2: …``);
``withSession(constraint)`` gives a session (``prepare``, ``batch``, ``getBookmark()``) over the
same local database, which has no replicas to be behind.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from ...compat.rpc import JsDict
from ..boundary import after, call, js_arguments, js_string
from .engine import D1Engine, D1Error, Query
from .statement import D1PreparedStatement, result_object

__all__ = ["D1Database", "D1DatabaseSession"]


class D1Database:
    """One D1 database bound as ``env.<binding>`` (see the module docstring)."""

    __slots__ = ("_binding", "_open")

    def __init__(self, binding: str, open_engine: Callable[[], D1Engine]) -> None:
        self._binding = binding
        #: The database's engine, opened on first use (a cached lookup after that).
        self._open = open_engine

    def __repr__(self) -> str:
        return f"<D1Database {self._binding}>"

    def _engine(self) -> D1Engine:
        return self._open()

    def prepare(self, *args: Any, **kwargs: Any) -> D1PreparedStatement:
        values = js_arguments(args, kwargs)
        sql = js_string(values[0]) if values else "undefined"
        return D1PreparedStatement(self, Query(sql))

    def batch(self, *args: Any, **kwargs: Any) -> Awaitable[list[Any]]:
        values = js_arguments(args, kwargs)
        statements = values[0] if values else None
        queries: list[Query] = []
        for statement in statements if isinstance(statements, list) else []:
            if not isinstance(statement, D1PreparedStatement):
                raise D1Error(
                    "D1_ERROR: batch() takes a list of prepared statements (env.DB.prepare(…)), "
                    f"got {type(statement).__name__}"
                )
            queries.append(statement._query)

        def work() -> Awaitable[list[Any]]:
            if not queries:
                raise D1Error("D1_ERROR: No SQL statements detected.")
            engine = self._engine()
            results = engine.run(queries)
            return after(engine.durable(results), [result_object(r) for r in results])

        return call(work)

    def exec(self, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        values = js_arguments(args, kwargs)
        script = js_string(values[0]) if values else "undefined"

        def work() -> Awaitable[Any]:
            started = time.perf_counter()
            engine = self._engine()
            lines = [line for line in script.split("\n") if line.strip()]
            if not lines:
                raise D1Error("D1_EXEC_ERROR: Error in line 1: : No SQL statements detected.")
            results = []
            for number, line in enumerate(lines, start=1):
                try:
                    results.extend(engine.run([Query(line)]))
                except D1Error as exc:
                    text = exc.message.removeprefix("D1_ERROR: ")
                    raise D1Error(
                        f"D1_EXEC_ERROR: Error in line {number}: {line}: {text}"
                    ) from None
            duration = (time.perf_counter() - started) * 1000.0
            return after(engine.durable(results), JsDict(count=len(lines), duration=duration))

        return call(work)

    def withSession(self, *args: Any, **kwargs: Any) -> D1DatabaseSession:
        """A session (read replication's API): the same database here, bookmarks counted."""
        js_arguments(args, kwargs)
        return D1DatabaseSession(self)


class D1DatabaseSession:
    """``env.DB.withSession(…)``: ``prepare``, ``batch`` and ``getBookmark()``."""

    __slots__ = ("_database", "_seen")

    def __init__(self, database: D1Database) -> None:
        self._database = database
        self._seen = False

    def prepare(self, *args: Any, **kwargs: Any) -> D1PreparedStatement:
        self._seen = True
        return self._database.prepare(*args, **kwargs)

    def batch(self, *args: Any, **kwargs: Any) -> Awaitable[list[Any]]:
        self._seen = True
        return self._database.batch(*args, **kwargs)

    def getBookmark(self) -> str | None:
        """``None`` before the session's first query, then the database's latest commit."""
        if not self._seen:
            return None
        commits = self._database._engine().commits
        return f"00000000-{commits:08x}-00000000-{'0' * 32}"
