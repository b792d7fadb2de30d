"""``doemu d1``: a D1 database's migrations and SQL, as ``wrangler d1 … --local`` gives them.

``doemu d1 migrations list|apply|create DATABASE`` and ``doemu d1 execute DATABASE --command
SQL`` (or ``--file``) work on the running server's database through the admin API when one
answers, and on the file in the persist dir otherwise, with the same code either way
(:mod:`doemu.bindings.d1.migrations`). ``DATABASE`` is the binding, the ``database_name`` or the
``database_id``, as wrangler takes it. ``doemu sql DATABASE "SELECT …"`` reads one (see
:mod:`doemu.cli.inspect`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import click

from ..config import DoemuSettings
from ..config.bindings import D1DatabaseBinding
from ..errors import DoemuError
from .common import _fail, main
from .inspect import (
    FORMAT,
    _echo_json,
    _echo_table,
    _online,
    _stdout_is_terminal,
    _Target,
    _targeted,
)

__all__ = ["d1_binding", "offline_engine"]


def d1_binding(target: _Target, name: str) -> D1DatabaseBinding:
    """The D1 binding ``name`` names (binding, database name or id), or a one-line error."""
    for spec in target.worker.resources.d1:
        if spec.matches(name):
            return spec
    known = ", ".join(b.binding for b in target.worker.resources.d1) or "none"
    _fail(f"no D1 database {name!r} in {target.worker.source_name} (D1 bindings: {known})")


def offline_engine(settings: DoemuSettings, spec: D1DatabaseBinding) -> Any:
    """The database's engine on the persist dir's file, for when no server runs."""
    from ..bindings.d1 import D1Engine
    from ..persist import d1_file

    click.echo(f"(no doemu server answers; using {d1_file(settings.persist_to, spec.resource)})",
               err=True)  # fmt: skip
    return D1Engine(d1_file(settings.persist_to, spec.resource))


@main.group()
def d1() -> None:
    """D1 databases: migrations and SQL (wrangler d1 … --local)."""


@d1.group()
def migrations() -> None:
    """The migrations folder of a D1 database (migrations_dir, default migrations/)."""


def _path(spec: D1DatabaseBinding, tail: str) -> str:
    return f"/d1/{quote(spec.binding, safe='')}/{tail}"


@migrations.command(name="list")
@_targeted
@click.argument("database")
def list_(target: _Target, database: str) -> None:
    """List applied and pending migrations of DATABASE."""
    spec = d1_binding(target, database)
    state = _online(target, lambda c: c.get(_path(spec, "migrations")))
    if state is None:
        from ..bindings.d1.migrations import migration_state

        engine = offline_engine(target.settings, spec)
        try:
            found = migration_state(engine, spec)
        finally:
            engine.close()
        state = {
            "applied": [{"name": n, "applied_at": at} for n, at in found.applied],
            "pending": found.pending,
        }
    for item in state["applied"]:
        click.echo(f"applied  {item['name']}  ({item['applied_at']})")
    for name in state["pending"]:
        click.echo(f"pending  {name}")
    if not state["applied"] and not state["pending"]:
        click.echo(f"no migrations in {spec.migrations_dir}", err=True)


@migrations.command()
@_targeted
@click.argument("database")
def apply(target: _Target, database: str) -> None:
    """Apply DATABASE's pending migrations, in order, each in one transaction."""
    spec = d1_binding(target, database)
    result = _online(target, lambda c: c.post(_path(spec, "migrations/apply")))
    if result is None:
        from ..bindings.d1.migrations import apply_migrations

        engine = offline_engine(target.settings, spec)
        try:
            result = {"applied": apply_migrations(engine, spec)}
        except DoemuError as exc:
            _fail(str(exc).removeprefix("Error: "))
        finally:
            engine.close()
    for name in result["applied"]:
        click.echo(f"applied  {name}")
    if not result["applied"]:
        click.echo("no migrations to apply", err=True)


@migrations.command()
@_targeted
@click.argument("database")
@click.argument("message")
def create(target: _Target, database: str, message: str) -> None:
    """Write the next numbered migration file of DATABASE (e.g. 0002_add_users.sql)."""
    from ..bindings.d1.migrations import create_migration

    spec = d1_binding(target, database)
    try:
        path = create_migration(spec, message)
    except DoemuError as exc:
        _fail(str(exc).removeprefix("Error: "))
    click.echo(f"created {path}")


@d1.command()
@_targeted
@click.argument("database")
@click.option("--command", "command_", default=None, help="The SQL to run.  [default: none]")
@click.option(
    "--file",
    "file_",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    default=None,
    help="A file of SQL to run.  [default: none]",
)
@FORMAT
def execute(
    target: _Target, database: str, command_: str | None, file_: Path | None, output: str
) -> None:
    """Run SQL on DATABASE through the D1 binding (writes allowed; D1's rules and texts)."""
    spec = d1_binding(target, database)
    if (command_ is None) == (file_ is None):
        _fail("give --command SQL or --file PATH (one of them)")
    query = command_ if command_ is not None else Path(str(file_)).read_text(encoding="utf-8")
    body = {"query": query, "write": True}
    result = _online(target, lambda c: c.post(_path(spec, "sql"), body))
    if result is None:
        from ..bindings.d1.engine import Query
        from ..inspection.readers import jsonable

        engine = offline_engine(target.settings, spec)
        try:
            [done] = engine.run([Query(query)])
        except DoemuError as exc:
            _fail(str(exc).removeprefix("Error: "))
        finally:
            engine.close()
        result = {
            "columns": done.columns,
            "rows": [[jsonable(v) for v in row] for row in done.rows],
            "meta": done.meta,
        }
    if output == "auto":
        output = "table" if _stdout_is_terminal() else "json"
    if output == "json":
        _echo_json(result)
        return
    _echo_table(result["columns"], result["rows"])
    meta = result.get("meta") or {}
    click.echo(json.dumps({k: meta[k] for k in ("changes", "last_row_id") if k in meta}))
