"""The agent's SQLite schema: created idempotently on every wake, versioned.

Every feature module owns its tables (``SCHEMA`` tuples of ``CREATE ... IF NOT EXISTS``); this
module applies them in one place. The version row lets a wake skip the DDL entirely when nothing
changed and gives later releases a place to hang migrations (``MIGRATIONS[v]`` runs when moving
from version ``v``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["SCHEMA_VERSION", "ensure_schema"]

#: Bump when any feature's ``SCHEMA`` changes; add the upgrade steps to ``MIGRATIONS``.
SCHEMA_VERSION = 1

_VERSION_TABLE = (
    "CREATE TABLE IF NOT EXISTS cf_agents_schema (id INTEGER PRIMARY KEY, version INTEGER NOT NULL)"
)

MIGRATIONS: Mapping[int, tuple[str, ...]] = {}

Exec = Callable[..., Any]


def ensure_schema(exec_sql: Exec, statements: Iterable[str]) -> bool:
    """Create every table the agent needs; returns True when DDL ran (first wake or upgrade)."""
    exec_sql(_VERSION_TABLE)
    rows = list(exec_sql("SELECT version FROM cf_agents_schema WHERE id = 1"))
    current = int(rows[0]["version"]) if rows else 0
    if current == SCHEMA_VERSION:
        return False
    for version in range(current, SCHEMA_VERSION):
        for statement in MIGRATIONS.get(version, ()):
            exec_sql(statement)
    for statement in statements:
        exec_sql(statement)
    exec_sql(
        "INSERT INTO cf_agents_schema (id, version) VALUES (1, ?) "
        "ON CONFLICT(id) DO UPDATE SET version = excluded.version",
        SCHEMA_VERSION,
    )
    return True
