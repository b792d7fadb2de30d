"""``doemu``: the command line (click). ``doemu dev`` serves a worker; the other commands inspect
and control a running server through the admin API, or read the persist dir when none runs.

Every expected failure (a bad config, a bad setting, a busy port, no server for ``evict``) is a
one-line ``Error: …`` and exit code 1; tracebacks are kept for bugs and for the user's own code.

This module only declares the commands and echoes their results: what ``doemu dev`` does lives in
:mod:`doemu.server.devserver`, reading a persist dir when no server runs in
:mod:`doemu.inspection.offline`.

Start-up time matters (a restart after a crash is measured to its first answered request), so
what only the inspection commands use (the admin API client, the offline readers) is imported
inside those commands, never on the way to ``doemu dev`` serving.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import quote, urlencode

import click

from . import __version__
from .config import (
    DURABILITY_LEVELS,
    LOOPS,
    DoemuSettings,
    DurableObjectBinding,
    WorkerConfig,
    display_path,
    find_pyproject,
    load_config,
    resolve_settings,
)
from .errors import DoemuError
from .server.devserver import http_url, load_worker, run, run_with_reload, setup_logging

if TYPE_CHECKING:
    from .server.admin.client import AdminClient

__all__ = ["main"]

_CONFIG = click.option(
    "--config",
    "-c",
    type=click.Path(path_type=Path),
    default=None,
    help="wrangler.toml / wrangler.jsonc (default: found in the current directory).",
)
_PERSIST_TO_HELP = "Where object files live.  [default: .doemu/state]"


def _fail(message: str) -> NoReturn:
    raise click.ClickException(message)


def _load(config_path: Path | None) -> WorkerConfig:
    try:
        config = load_config(config_path)
    except DoemuError as exc:
        _fail(str(exc))
    for warning in config.warnings:
        click.echo(f"warning: {warning}", err=True)
    return config


def _settings(config: WorkerConfig, cli: dict[str, Any]) -> DoemuSettings:
    try:
        return resolve_settings(cli, os.environ, find_pyproject(config), base_dir=config.base_dir)
    except DoemuError as exc:
        _fail(str(exc))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="doemu")
def main() -> None:
    """doemu: a local Durable-Object runtime for Cloudflare's Python Workers API."""


# ------------------------------------------------------------------------------------------- dev
@main.command()
@_CONFIG
@click.option("--host", default=None, help="Interface to bind.  [default: 127.0.0.1]")
@click.option("--port", type=int, default=None, help="Port (0 picks a free one).  [default: 8787]")
@click.option("--persist-to", type=click.Path(path_type=Path), default=None, help=_PERSIST_TO_HELP)
@click.option(
    "--persist/--no-persist",
    default=None,
    help="--no-persist uses a temporary directory removed on exit.",
)
@click.option(
    "--durability",
    default=None,
    type=click.Choice(DURABILITY_LEVELS),
    help="What an acknowledged write survives: a power loss (fsync before output) or a "
    "process crash.  [default: power]",
)
@click.option(
    "--idle-timeout",
    default=None,
    help="Idle seconds before eviction: a range like 70-140, or one value.",
)
@click.option("--reload/--no-reload", default=None, help="Restart when sources change.")
@click.option(
    "--log-level",
    default=None,
    type=click.Choice(["critical", "error", "warning", "info", "debug", "trace"]),
)
@click.option(
    "--admin-token",
    default=None,
    help="Require this bearer token on the admin API (and allow non-loopback).",
)
@click.option(
    "--limits",
    default=None,
    type=click.Choice(["local", "production"]),
    help="Storage limits: none (local, like workerd) or Cloudflare's production ones.",
)
@click.option(
    "--max-live-objects",
    type=int,
    default=None,
    help="Cap on live objects (LRU eviction). [default: from the fd limit]",
)
@click.option(
    "--loop",
    default=None,
    type=click.Choice(LOOPS),
    help="Event loop: uvloop when installed (auto), or asyncio.  [default: auto]",
)
@click.option("--reload-child", is_flag=True, hidden=True)  # set by --reload for its child
def dev(config: Path | None, reload_child: bool, **flags: Any) -> None:
    """Serve the worker's Durable Objects over HTTP and WebSocket."""
    worker = _load(config)
    settings = _settings(worker, flags)
    setup_logging(settings.log_level)
    if settings.reload:
        run_with_reload(worker, settings)
        return
    run(worker, settings, force_on_second_signal=not reload_child)


# ------------------------------------------------------------------------------------ init
@main.command()
@click.argument("directory", type=click.Path(path_type=Path), default=".")
@click.option(
    "--force",
    is_flag=True,
    help="Write into a non-empty DIRECTORY (the project's own files are replaced, others kept).",
)
def init(directory: Path, force: bool) -> None:
    """Write a new project into DIRECTORY (default: here): it serves and tests with no edits."""
    from .scaffold import write_project

    try:
        result = write_project(directory, force=force)
    except DoemuError as exc:
        _fail(str(exc))
    shown = display_path(directory)
    for path in result.written:
        note = "  (replaced)" if path in result.replaced else ""
        click.echo(f"  wrote {Path(shown, path).as_posix()}{note}")
    here = directory.resolve() == Path.cwd().resolve()
    cd = "" if here else f"  cd {shlex.quote(shown)}\n"
    click.echo(
        f"\nCreated the Worker {result.name!r}. Next steps:\n{cd}"
        "  doemu dev     # serves it on http://127.0.0.1:8787; in another shell:\n"
        "  curl -X POST http://127.0.0.1:8787/counter/alice\n"
        "  pytest        # runs tests/ in-process\n"
        "The same folder deploys to Cloudflare with `pywrangler deploy`."
    )


# ------------------------------------------------------------------------------------ classes
@main.command()
@_CONFIG
def classes(config: Path | None) -> None:
    """List every Durable Object class and where it comes from."""
    from .loader import describe_classes

    for row in describe_classes(load_worker(_load(config))):
        bindings = ", ".join(row["bindings"]) or "(no binding)"
        click.echo(
            f"{row['name']:<24} {bindings:<20} {'sql' if row['sql'] else 'kv ':<4} {row['origin']}"
        )


# ------------------------------------------------------------------ inspection via admin API
_URL = click.option("--url", default=None, help="A running server. [default: from settings]")
_TOKEN = click.option("--admin-token", default=None, envvar="DOEMU_ADMIN_TOKEN")
_PERSIST_TO = click.option(
    "--persist-to",
    type=click.Path(path_type=Path),
    default=None,
    help="The persist dir to read when no server runs.  [default: .doemu/state]",
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
    config: Path | None, url: str | None, token: str | None, persist_to: Path | None = None
) -> _Target:
    from .server.admin.client import AdminClient

    worker = _load(config)
    settings = _settings(worker, {"persist_to": persist_to})
    if url is None:  # a server bound to every interface is reached on loopback
        host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(settings.host, settings.host)
        url = http_url(host, settings.port)
    return _Target(worker, settings, AdminClient(url, token or settings.admin_token))


def _online(target: _Target, call: Callable[[AdminClient], Any]) -> Any:
    """The admin API's answer, or ``None`` when no server answers (callers then go offline)."""
    from .server.admin.client import AdminUnavailable

    try:
        return call(target.client)
    except AdminUnavailable:
        return None
    except DoemuError as exc:
        _fail(str(exc))


def _offline(target: _Target) -> Path:
    """Say (on stderr, so stdout stays parseable) that the persist dir is read instead."""
    root = target.settings.persist_to
    click.echo(f"(no doemu server at {target.client.base}; reading {display_path(root)})", err=True)
    return root


def _path(segment: str | None) -> str:
    return quote(segment or "", safe="")


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2))


@main.command()
@_CONFIG
@_URL
@_TOKEN
@_PERSIST_TO
@click.argument("binding", required=False)
def objects(
    config: Path | None,
    url: str | None,
    admin_token: str | None,
    persist_to: Path | None,
    binding: str | None,
) -> None:
    """List objects (live and evicted) of every binding, or of BINDING."""
    target = _target(config, url, admin_token, persist_to)
    query = "?" + urlencode({"binding": binding}) if binding else ""
    found = _online(target, lambda c: c.get("/objects" + query))
    if found is None:
        found = _offline_objects(target, binding)
    for item in found:
        alarm = "" if item.get("alarm") is None else f" alarm={item['alarm']:.0f}"
        name = item.get("name") or "-"
        click.echo(f"{item['binding']:<12} {item['id']} {item['state']:<8} {name}{alarm}")


def _offline_objects(target: _Target, binding: str | None) -> list[dict[str, Any]]:
    from .inspection.offline import scan_objects

    bindings = [target.binding(binding)] if binding else list(target.worker.bindings)
    try:
        return scan_objects(target.worker, _offline(target), bindings)
    except DoemuError as exc:
        _fail(str(exc))


@main.command()
@_CONFIG
@_URL
@_TOKEN
@_PERSIST_TO
@click.option("--write", is_flag=True, help="Allow writes (runs inside the object).")
@click.argument("binding")
@click.argument("name")
@click.argument("query")
def sql(
    config: Path | None,
    url: str | None,
    admin_token: str | None,
    persist_to: Path | None,
    write: bool,
    binding: str,
    name: str,
    query: str,
) -> None:
    """Run QUERY on the object NAME (a name or a 64-hex id); read-only by default."""
    target = _target(config, url, admin_token, persist_to)
    path = f"/objects/{_path(binding)}/{_path(name)}/sql"
    result = _online(target, lambda c: c.post(path, {"query": query, "write": write}))
    if result is None:
        if write:
            _fail(
                f"--write needs a running server (writes go through the object); "
                f"none answers at {target.client.base}"
            )
        from .inspection.offline import find_object_file, read_only_sql

        root = target.settings.persist_to
        try:
            file = find_object_file(target.worker, root, target.binding(binding), name)
            _offline(target)
            result = read_only_sql(file, query, f"{binding}/{name}")
        except DoemuError as exc:
            _fail(str(exc))
    _echo_json(result)


def _when(ms: float) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


@main.command()
@_CONFIG
@_URL
@_TOKEN
@_PERSIST_TO
def alarms(
    config: Path | None, url: str | None, admin_token: str | None, persist_to: Path | None
) -> None:
    """List pending alarms (epoch ms, as getAlarm() returns them, and UTC)."""
    target = _target(config, url, admin_token, persist_to)
    found = _online(target, lambda c: c.get("/objects"))
    if found is None:
        found = _offline_objects(target, None)
    for item in found:
        if item.get("alarm") is not None:
            name = item.get("name") or "-"
            when = f"{item['alarm']:.0f} {_when(item['alarm'])}"
            click.echo(f"{item['binding']:<12} {item['id']} {name} {when}")


def _control(action: str, help_text: str) -> None:
    """Register ``evict``/``reset``: they act on live instances, so they need a running server."""

    @main.command(name=action, help=help_text)
    @_CONFIG
    @_URL
    @_TOKEN
    @click.option("--all", "all_", is_flag=True, help=f"{action.capitalize()} every live object.")
    @click.argument("binding", required=False)
    @click.argument("name", required=False)
    def command(
        config: Path | None,
        url: str | None,
        admin_token: str | None,
        all_: bool,
        binding: str | None,
        name: str | None,
    ) -> None:
        if all_ and (binding or name):
            _fail("give BINDING NAME or --all, not both")
        if not all_ and not (binding and name):
            _fail("give BINDING NAME, or --all")
        target = _target(config, url, admin_token)
        path = f"/{action}-all" if all_ else f"/objects/{_path(binding)}/{_path(name)}/{action}"
        result = _online(target, lambda c: c.post(path))
        if result is None:
            _fail(f"no doemu server runs at {target.client.base}: nothing is live to {action}")
        _echo_json(result)


_control("evict", "Evict gracefully (storage kept, sockets hibernate). Needs a running server.")
_control("reset", "Reset: abort in-flight work and drop the instance. Needs a running server.")
