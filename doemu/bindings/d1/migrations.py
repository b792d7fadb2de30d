"""``wrangler d1 migrations``: a folder of numbered ``.sql`` files, applied once each, in order.

The folder is the binding's ``migrations_dir`` (default ``migrations/`` beside the config), the
record of what ran is the ``migrations_table`` (default ``d1_migrations``) inside the database,
with wrangler's columns (``id``, ``name``, ``applied_at``), so a database migrated by doemu reads
the same to wrangler and the other way round. Each file runs with the migration's row in one
transaction: a file that fails leaves the database as it was, and the files after it unapplied.
:func:`create_migration` writes the next file as ``wrangler d1 migrations create`` does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ...config.bindings import D1DatabaseBinding
from .engine import D1Engine, D1Error, Query

__all__ = [
    "MigrationState",
    "apply_migrations",
    "create_migration",
    "migration_files",
    "migration_state",
]

_NUMBERED = re.compile(r"^(\d+)_")


@dataclass(frozen=True)
class MigrationState:
    """What the folder holds and what the database has applied (names, in order)."""

    applied: list[tuple[str, str]]  # (name, applied_at)
    pending: list[str]


def migration_files(folder: Path) -> list[str]:
    """The ``.sql`` files of the folder, in the order wrangler applies them (by name)."""
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.suffix == ".sql" and p.is_file())


def _ensure_table(engine: D1Engine, table: str) -> None:
    engine.run(
        [
            Query(
                f"CREATE TABLE IF NOT EXISTS {table}("
                "id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE, "
                "applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL)"
            )
        ]
    )


def migration_state(engine: D1Engine, binding: D1DatabaseBinding) -> MigrationState:
    """Applied migrations (from the table) and pending ones (files not in it)."""
    _ensure_table(engine, binding.migrations_table)
    [result] = engine.run(
        [Query(f"SELECT name, applied_at FROM {binding.migrations_table} ORDER BY id")]
    )
    applied = [(str(name), str(at)) for name, at in result.rows]
    done = {name for name, _ in applied}
    pending = [name for name in migration_files(binding.migrations_dir) if name not in done]
    return MigrationState(applied, pending)


def apply_migrations(engine: D1Engine, binding: D1DatabaseBinding) -> list[str]:
    """Apply every pending migration in order; returns the names applied.

    A failing file raises :class:`D1Error` naming it; the ones before it stay applied.
    """
    applied: list[str] = []
    for name in migration_state(engine, binding).pending:
        sql = (binding.migrations_dir / name).read_text(encoding="utf-8")
        try:
            engine.run(
                [
                    Query(sql),
                    Query(f"INSERT INTO {binding.migrations_table} (name) VALUES (?)", (name,)),
                ]
            )
        except D1Error as exc:
            raise D1Error(f"Migration {name} failed: {exc.message}") from None
        applied.append(name)
    return applied


def create_migration(binding: D1DatabaseBinding, message: str) -> Path:
    """Write the next numbered file (``0003_add_users.sql``) and return its path."""
    slug = re.sub(r"[^A-Za-z0-9]+", "_", message.strip()).strip("_").lower()
    if not slug:
        raise D1Error(f"a migration needs a name made of letters or digits, got {message!r}")
    folder = binding.migrations_dir
    numbers = [int(m.group(1)) for n in migration_files(folder) if (m := _NUMBERED.match(n))]
    number = max(numbers, default=0) + 1
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{number:04d}_{slug}.sql"
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    path.write_text(f"-- Migration number: {number:04d} \t {stamp}\n", encoding="utf-8")
    return path
