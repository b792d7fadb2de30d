"""``deleteAll()`` on a SQLite-backed object: remove every user table, view and trigger.

Cloudflare's ``deleteAll()`` on a SQLite-backed object wipes the whole database (SQL tables and KV
data) atomically, and, from compatibility date 2026-02-24 (``delete_all_deletes_alarm``), the
alarm too. doemu drops the user's schema objects and empties ``_cf_KV`` inside the turn's implicit
transaction, so the wipe is atomic and rolls back with the turn. The caller deletes the alarm.
Internal metadata other than the alarm (such as the object's name) is kept: on Cloudflare it is
not part of the object's storage.
"""

from __future__ import annotations

from doemu.storage.connection import StorageConnection, internal_sql

__all__ = ["drop_user_schema"]

_USER_OBJECTS = internal_sql(
    "SELECT type, name, sql FROM sqlite_master "
    "WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_cf\\_%' ESCAPE '\\' "
    "AND type IN ('table', 'view', 'trigger')"
)
_DEFER_FOREIGN_KEYS = internal_sql("PRAGMA defer_foreign_keys = ON")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def drop_user_schema(conn: StorageConnection) -> None:
    """Drop every table, view and trigger the user created (indexes go with their tables)."""
    objects = conn.read(_USER_OBJECTS).fetchall()
    if not objects:
        return
    # Dropping a parent table before its children would trip immediate foreign-key checks; once
    # everything is gone no reference is left, so checking at commit time succeeds.
    conn.write(_DEFER_FOREIGN_KEYS)
    ordered = sorted(
        objects,
        key=lambda row: (
            {"trigger": 0, "view": 1}.get(row[0], 2),
            0 if (row[2] or "").upper().startswith("CREATE VIRTUAL") else 1,
        ),
    )
    for kind, name, _sql in ordered:
        # IF EXISTS: dropping a virtual table also drops its shadow tables.
        conn.write(internal_sql(f"DROP {kind.upper()} IF EXISTS {_quote(name)}"))
