"""``env.DB.prepare(sql)``: a D1 prepared statement, as the Python SDK hands it over.

``bind(*values)`` returns a new statement (a statement is immutable; binding again replaces the
values) and checks the values at once, raising ``D1_TYPE_ERROR`` as D1 does. ``first()`` gives
the first row as a ``JsDict`` (``first("col")`` one value; ``None`` without a row), ``all()`` and
``run()`` the ``{success, meta, results}`` result, ``raw()`` lists of values
(``raw(columnNames=True)`` puts the names first). Each runs as its own transaction; a list of
statements runs as one in ``env.DB.batch([...])``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ...compat.rpc import JsDict
from ..boundary import after, call, js_arguments, js_string, option
from .engine import D1Error, Query, QueryResult, d1_value, js_row_value

if TYPE_CHECKING:
    from .database import D1Database

__all__ = ["D1PreparedStatement", "result_object", "row_object"]


def row_object(columns: list[str], row: tuple[Any, ...]) -> JsDict:
    """A row as D1 returns it: a JS object (a later column of the same name wins)."""
    return JsDict(zip(columns, (js_row_value(v) for v in row), strict=True))


def result_object(result: QueryResult) -> JsDict:
    """``{success, meta, results}``, the D1Result of ``all()``, ``run()`` and ``batch()``."""
    meta = JsDict({k: JsDict(v) if isinstance(v, dict) else v for k, v in result.meta.items()})
    rows = [row_object(result.columns, row) for row in result.rows]
    return JsDict(success=True, meta=meta, results=rows)


class D1PreparedStatement:
    """One statement of one database, with its bound values (see the module docstring)."""

    __slots__ = ("_database", "_query")

    def __init__(self, database: D1Database, query: Query) -> None:
        self._database = database
        self._query = query

    def __repr__(self) -> str:
        return f"<D1PreparedStatement {self._query.sql!r}>"

    def bind(self, *args: Any, **kwargs: Any) -> D1PreparedStatement:
        """A copy of this statement with ``values`` bound to ``?``/``?N`` in order."""
        values = js_arguments(args, kwargs)
        params = tuple(d1_value(value) for value in values)
        return D1PreparedStatement(self._database, Query(self._query.sql, params))

    def first(self, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        values = js_arguments(args, kwargs)
        column = values[0] if values else None

        def shape(result: QueryResult) -> Any:
            if column is not None:
                name = js_string(column)
                if name not in result.columns:
                    raise D1Error(f"D1_COLUMN_NOTFOUND: Column not found ({name})")
                if not result.rows:
                    return None
                return row_object(result.columns, result.rows[0])[name]
            return row_object(result.columns, result.rows[0]) if result.rows else None

        return self._run(shape)

    def all(self, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        js_arguments(args, kwargs)
        return self._run(result_object)

    def run(self, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        js_arguments(args, kwargs)
        return self._run(result_object)

    def raw(self, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        values = js_arguments(args, kwargs)
        names = bool(option(values[0] if values else None, "columnNames"))

        def shape(result: QueryResult) -> Any:
            rows = [[js_row_value(v) for v in row] for row in result.rows]
            return [list(result.columns), *rows] if names else rows

        return self._run(shape)

    def _run(self, shape: Callable[[QueryResult], Any]) -> Awaitable[Any]:
        database = self._database

        def work() -> Awaitable[Any]:
            engine = database._engine()
            [result] = engine.run([self._query])
            return after(engine.durable([result]), shape(result))

        return call(work)
