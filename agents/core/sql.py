"""The agent's SQL, read portably: rows become plain dicts on doemu and on Cloudflare alike.

On Cloudflare ``ctx.storage.sql.exec`` returns a JavaScript cursor whose rows are ``JsProxy``
objects, which neither ``dict(row)`` nor ``row["c"]`` handle; so rows are taken with
``toArray()`` and converted with ``to_py()`` when the result has it (Pyodide). On doemu
``toArray()`` already gives dicts. :func:`query_rows` is the one place where cursor rows become
Python data: ``Agent.sql`` and every feature read through it. Writes whose rows nobody reads go
through :func:`execute`, which leaves the cursor alone.
"""

from __future__ import annotations

from typing import Any

from ..errors import SqlQueryError

__all__ = ["MAX_PARAMS", "delete_in", "execute", "query_rows"]

#: Cloudflare's limit on bound parameters per SQL statement.
MAX_PARAMS = 100


def query_rows(sql: Any, query: str, *params: Any) -> list[dict[str, Any]]:
    """Run ``query`` on ``sql`` (``ctx.storage.sql``); rows as dicts. Errors name the query."""
    try:
        rows: Any = sql.exec(query, *params).toArray()
        if hasattr(rows, "to_py"):
            rows = rows.to_py()
        return [dict(row) for row in rows]
    except Exception as exc:
        raise SqlQueryError(query, exc) from exc


def execute(sql: Any, query: str, *params: Any) -> None:
    """Run a statement whose rows are not needed (storage errors propagate unchanged)."""
    sql.exec(query, *params)


def delete_in(sql: Any, table: str, column: str, values: list[Any]) -> None:
    """``DELETE FROM table WHERE column IN (values)``, in batches of :data:`MAX_PARAMS` bound
    parameters (``table`` and ``column`` are the caller's constants, never user input)."""
    for start in range(0, len(values), MAX_PARAMS):
        batch = values[start : start + MAX_PARAMS]
        marks = ",".join("?" * len(batch))
        execute(sql, f"DELETE FROM {table} WHERE {column} IN ({marks})", *batch)
