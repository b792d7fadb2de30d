"""The agent's SQLite schema: created idempotently on every wake, versioned.

Every feature module owns its tables (``SCHEMA`` tuples of ``CREATE ... IF NOT EXISTS``); this
module applies them in one place. The stored row holds the schema version and a digest of the
statements: a wake whose digest matches skips the DDL entirely, and any change to a feature's
DDL (a new table, a new index) is applied on the next wake even without a version bump. Changes
that ``IF NOT EXISTS`` cannot express (adding a column) go in ``MIGRATIONS[v]``, run when moving
from version ``v``, with ``SCHEMA_VERSION`` bumped.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "ensure_schema"]

#: Bump when a change needs a step in ``MIGRATIONS``.
SCHEMA_VERSION = 2

MIGRATIONS: Mapping[int, tuple[str, ...]] = {
    # 1 → 2: usage entries can be partial (a request cut before its usage was reported). A
    # version-1 database may predate the usage table, so it is created in its version-1 shape
    # first (frozen here: later DDL changes belong to later steps), then given the column.
    1: (
        """CREATE TABLE IF NOT EXISTS cf_agents_usage (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  at INTEGER NOT NULL,
  turn TEXT,
  op_id TEXT,
  kind TEXT NOT NULL,
  provider TEXT NOT NULL,
  model TEXT NOT NULL,
  input_tokens INTEGER NOT NULL,
  output_tokens INTEGER NOT NULL,
  cost REAL NOT NULL,
  priced INTEGER NOT NULL
)""",
        "ALTER TABLE cf_agents_usage ADD COLUMN partial INTEGER NOT NULL DEFAULT 0",
    ),
}

_TABLE = (
    "CREATE TABLE IF NOT EXISTS cf_agents_schema ("
    "id INTEGER PRIMARY KEY, version INTEGER NOT NULL, digest TEXT)"
)

#: A query function that returns its rows as mappings: the agent's ``self.sql``. Not a raw
#: ``sql.exec``, whose Cloudflare cursor yields JavaScript rows that cannot be subscripted.
Query = Callable[..., Sequence[Mapping[str, Any]]]


def ensure_schema(query: Query, statements: Iterable[str]) -> bool:
    """Create every table the agent needs; returns True when DDL ran (first wake or change)."""
    ddl = list(statements)
    digest = hashlib.sha256("\n".join(ddl).encode()).hexdigest()[:32]
    query(_TABLE)
    rows = query("SELECT version, digest FROM cf_agents_schema WHERE id = 1")
    if rows and rows[0]["version"] == SCHEMA_VERSION and rows[0]["digest"] == digest:
        return False
    current = int(rows[0]["version"]) if rows else SCHEMA_VERSION
    for version in range(current, SCHEMA_VERSION):
        for statement in MIGRATIONS.get(version, ()):
            query(statement)
    for statement in ddl:
        query(statement)
    query(
        "INSERT INTO cf_agents_schema (id, version, digest) VALUES (1, ?, ?) "
        "ON CONFLICT(id) DO UPDATE SET version = excluded.version, digest = excluded.digest",
        SCHEMA_VERSION,
        digest,
    )
    return True
