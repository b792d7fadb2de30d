"""The inspection and control commands (``objects``, ``alarms``, ``kv``, ``sql``, ``evict``…):
through a running server's admin API, else by reading its persist dir."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

import click

from ..config import (
    DoemuSettings,
    DurableObjectBinding,
    WorkerConfig,
    display_path,
)
from ..errors import DoemuError, error_text
from ..server.banner import browsable_url, read_server_record

if TYPE_CHECKING:
    from ..server.admin.client import AdminClient

from .common import _CONFIG, _ENV, _fail, _load, _settings, main

__all__: list[str] = []


# ------------------------------------------------------------------ inspection via admin API
_URL = click.option(
    "--url",
    default=None,
    help="A running server.  [default: the URL the server recorded in the persist dir, else "
    "host and port from settings]",
)
_TOKEN = click.option(
    "--admin-token",
    default=None,
    envvar="DOEMU_ADMIN_TOKEN",
    help="The server's admin token (env: DOEMU_ADMIN_TOKEN).  [default: none]",
)
_PERSIST_TO = click.option(
    "--persist-to",
    default=None,
    help="The server's persist dir: where it records its URL, and what is read when no server "
    "runs.  [default: .doemu/state]",
)


class _Target:
    """What an inspection command looks at: a server's admin API, else its persist dir.

    A plain class rather than a dataclass: building a dataclass costs close to a millisecond at
    import time, on every command, ``doemu dev`` included.
    """

    __slots__ = ("client", "settings", "worker")

    def __init__(self, worker: WorkerConfig, settings: DoemuSettings, client: AdminClient) -> None:
        self.worker = worker
        self.settings = settings
        self.client = client

    def binding(self, name: str) -> DurableObjectBinding:
        try:
            return self.worker.binding(name)
        except KeyError:
            known = ", ".join(b.name for b in self.worker.bindings) or "none"
            _fail(f"unknown binding {name!r} in {self.worker.source_name} (known: {known})")


def _target(
    config: Path | None,
    url: str | None,
    token: str | None,
    persist_to: str | None = None,
    env: str | None = None,
) -> _Target:
    """The server to ask: ``--url``, else the one serving the persist dir, else the settings'.

    A ``doemu dev`` records its URL in its persist dir while it serves (see
    :data:`doemu.server.banner.SERVER_RECORD`), so a server started with another ``--port``
    is found without repeating it; a server bound to every interface is reached on loopback.
    A persist dir named explicitly (``--persist-to`` or ``DOEMU_PERSIST_TO``) is answered by
    the server it records, or read from its files: never by whatever listens on the settings'
    port, which may serve another project's state.
    """
    from ..server.admin.client import AdminClient

    worker = _load(config, env)
    settings = _settings(worker, {"persist_to": persist_to})
    token = token or settings.admin_token
    if url is None:
        url = read_server_record(settings.persist_to)
        if url is None and (persist_to is not None or os.environ.get("DOEMU_PERSIST_TO")):
            absent = f"no running doemu server is recorded in {display_path(settings.persist_to)}"
            return _Target(worker, settings, AdminClient(None, token, absent=absent))
        url = url or browsable_url(settings.host, settings.port)
    return _Target(worker, settings, AdminClient(url, token))


def _targeted(command: Callable[..., None]) -> Callable[..., None]:
    """The options that say what a command looks at (``--config``, ``--env``, ``--url``,
    ``--admin-token``, ``--persist-to``), turned into the :class:`_Target` it gets first."""

    @functools.wraps(command)
    def run(
        config: Path | None,
        env_name: str | None,
        url: str | None,
        admin_token: str | None,
        persist_to: str | None,
        **options: Any,
    ) -> None:
        command(_target(config, url, admin_token, persist_to, env_name), **options)

    for option in (_PERSIST_TO, _TOKEN, _URL, _ENV, _CONFIG):
        run = option(run)
    return run


def _online(target: _Target, call: Callable[[AdminClient], Any]) -> Any:
    """The admin API's answer, or ``None`` when no server answers (callers then go offline)."""
    from ..server.admin.client import AdminUnavailable

    try:
        return call(target.client)
    except AdminUnavailable:
        return None
    except DoemuError as exc:
        _fail(error_text(exc))


def _offline(target: _Target) -> Path:
    """Say (on stderr, so stdout stays parseable) that the persist dir is read instead."""
    root = target.settings.persist_to
    click.echo(f"({target.client.where}; reading {display_path(root)})", err=True)
    return root


def _path(segment: str | None) -> str:
    return quote(segment or "", safe="")


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2))


@main.command()
@_targeted
@click.argument("binding", required=False)
def objects(
    target: _Target,
    binding: str | None,
) -> None:
    """List objects (live and evicted) of every binding, or of BINDING."""
    query = "?" + urlencode({"binding": binding}) if binding else ""
    found = _online(target, lambda c: c.get("/objects" + query))
    if found is None:
        found = _offline_objects(target, binding)
    if not found:  # on stderr: stdout stays empty for scripts
        click.echo(f"no objects{f' of {binding}' if binding else ''} yet", err=True)
        return
    _echo_rows(
        ["binding", "name", "id", "state", "alarm (ms)", "alarm (UTC)"],
        [
            [
                item["binding"],
                item.get("name") or "-",
                item["id"],
                item["state"],
                "-" if item.get("alarm") is None else f"{item['alarm']:.0f}",
                "-" if item.get("alarm") is None else _when(item["alarm"]),
            ]
            for item in found
        ],
    )


def _echo_rows(header: list[str], rows: list[list[str]]) -> None:
    """Aligned columns under a header row (the last column is not padded)."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        click.echo(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


def _offline_objects(target: _Target, binding: str | None) -> list[dict[str, Any]]:
    from ..inspection.offline import scan_objects

    bindings = [target.binding(binding)] if binding else list(target.worker.bindings)
    try:
        return scan_objects(target.worker, _offline(target), bindings)
    except DoemuError as exc:
        _fail(error_text(exc))


#: ``--format``: how SQL results are printed (``doemu sql``, ``doemu d1 execute``).
FORMAT = click.option(
    "--format",
    "output",
    type=click.Choice(["auto", "table", "json"]),
    default="auto",
    show_default=True,
    help="table: aligned columns; json: the API's answer; auto: a table on a terminal, JSON "
    "when piped (scripts keep parsing it).",
)


@main.command()
@_targeted
@click.option(
    "--write", is_flag=True, help="Allow writes (runs inside the object).  [default: read-only]"
)
@FORMAT
@click.argument("binding")
@click.argument("name")
@click.argument("query", required=False)
def sql(
    target: _Target,
    write: bool,
    output: str,
    binding: str,
    name: str,
    query: str | None,
) -> None:
    """Run QUERY on the object NAME (a name or a 64-hex id); read-only by default.

    For a D1 database: doemu sql DATABASE QUERY (its binding, name or id)."""
    d1 = _d1_database(target, binding)
    if d1 is not None and query is None:
        result = _d1_sql(target, d1, name, write)
    else:
        if query is None:
            _fail("give BINDING NAME QUERY (or DATABASE QUERY for a D1 database)")
        result = _object_sql(target, binding, name, query, write)
    if output == "auto":
        output = "table" if _stdout_is_terminal() else "json"
    if output == "json" or not isinstance(result, dict) or "columns" not in result:
        _echo_json(result)
        return
    _echo_table(result["columns"], result.get("rows") or [])


def _object_sql(target: _Target, binding: str, name: str, query: str, write: bool) -> Any:
    path = f"/objects/{_path(binding)}/{_path(name)}/sql"
    result = _online(target, lambda c: c.post(path, {"query": query, "write": write}))
    if result is None:
        if write:
            _fail(
                f"--write needs a running server (writes go through the object): "
                f"{target.client.where}"
            )
        from ..inspection.offline import find_object_file, read_only_sql

        root = target.settings.persist_to
        try:
            file = find_object_file(target.worker, root, target.binding(binding), name)
            _offline(target)
            result = read_only_sql(file, query, f"{binding}/{name}")
        except DoemuError as exc:
            _fail(error_text(exc))
    return result


def _d1_database(target: _Target, name: str) -> Any:
    """The D1 binding ``name`` names, if it names one and no Durable Object binding."""
    if any(b.name == name for b in target.worker.bindings):
        return None
    return next((b for b in target.worker.resources.d1 if b.matches(name)), None)


def _d1_sql(target: _Target, spec: Any, query: str, write: bool) -> Any:
    path = f"/d1/{_path(spec.binding)}/sql"
    result = _online(target, lambda c: c.post(path, {"query": query, "write": write}))
    if result is None:
        if write:
            _fail(f"--write on a D1 database without a server: use doemu d1 execute {spec.binding}")
        from ..inspection.offline import read_only_sql
        from ..persist import d1_file

        try:
            file = d1_file(target.settings.persist_to, spec.resource)
            _offline(target)
            result = read_only_sql(file, query, f"D1 database {spec.binding}")
        except DoemuError as exc:
            _fail(error_text(exc))
    return result


def _stdout_is_terminal() -> bool:
    """Whether stdout is a terminal (a pipe gets JSON, which scripts already parse)."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def _cell(value: Any) -> str:
    """A table cell: SQL NULL as ``NULL``, text as is, anything else as compact JSON."""
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return value.replace("\n", "\\n")
    return json.dumps(value, separators=(",", ":"))


def _echo_table(columns: list[str], rows: list[list[Any]]) -> None:
    """``columns`` and ``rows`` as an aligned text table, then the row count (as sqlite3 would)."""
    if not columns:
        click.echo("(no result rows)")
        return
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(str(c)), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    click.echo("  ".join(str(c).ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    click.echo("  ".join("-" * w for w in widths))
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    click.echo(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")


def _when(ms: float) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


@main.command()
@_targeted
def alarms(
    target: _Target,
) -> None:
    """List pending alarms (epoch ms, as getAlarm() returns them, and UTC)."""
    found = _online(target, lambda c: c.get("/objects"))
    if found is None:
        found = _offline_objects(target, None)
    pending = [item for item in found if item.get("alarm") is not None]
    if not pending:  # on stderr: stdout stays empty for scripts
        click.echo("no pending alarms", err=True)
        return
    _echo_rows(
        ["binding", "name", "id", "alarm (ms)", "alarm (UTC)"],
        [
            [
                item["binding"],
                item.get("name") or "-",
                item["id"],
                f"{item['alarm']:.0f}",
                _when(item["alarm"]),
            ]
            for item in pending
        ],
    )


def _control(action: str, help_text: str) -> None:
    """Register ``evict``/``reset``: they act on live instances, so they need a running server."""

    @main.command(name=action, help=help_text)
    @_targeted
    @click.option(
        "--all",
        "all_",
        is_flag=True,
        help=f"{action.capitalize()} every live object.  [default: only BINDING NAME]",
    )
    @click.argument("binding", required=False)
    @click.argument("name", required=False)
    def command(
        target: _Target,
        all_: bool,
        binding: str | None,
        name: str | None,
    ) -> None:
        if all_ and (binding or name):
            _fail("give BINDING NAME or --all, not both")
        if not all_ and not (binding and name):
            _fail("give BINDING NAME, or --all")
        path = f"/{action}-all" if all_ else f"/objects/{_path(binding)}/{_path(name)}/{action}"
        result = _online(target, lambda c: c.post(path))
        if result is None:
            base = target.client.base
            where = target.client.absent if base is None else f"no doemu server runs at {base}"
            _fail(f"{where}: nothing is live to {action}")
        _echo_json(result)


_control("evict", "Evict gracefully (storage kept, sockets hibernate). Needs a running server.")
_control("reset", "Reset: abort in-flight work and drop the instance. Needs a running server.")
