"""The versioned schema: DDL on first wake, skipped when unchanged, re-applied when changed."""

from __future__ import annotations

import sqlite3
from typing import Any

from agents.core.schema import ensure_schema


def executor(db: sqlite3.Connection) -> Any:
    db.row_factory = sqlite3.Row

    def run(query: str, *params: Any) -> list[sqlite3.Row]:
        return db.execute(query, params).fetchall()

    return run


def test_schema_is_created_once_and_reapplied_when_the_ddl_changes() -> None:
    db = sqlite3.connect(":memory:")
    run = executor(db)
    first = ["CREATE TABLE IF NOT EXISTS a (x INTEGER)"]
    assert ensure_schema(run, first) is True
    assert ensure_schema(run, first) is False  # same DDL: nothing to do on this wake
    second = [*first, "CREATE TABLE IF NOT EXISTS b (y TEXT)"]
    assert ensure_schema(run, second) is True
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"a", "b", "cf_agents_schema"} <= tables
    assert ensure_schema(run, second) is False
