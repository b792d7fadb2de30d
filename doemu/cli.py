"""``doemu``: the command line (click). ``doemu dev`` serves a worker; the other commands inspect
and control a running server through the admin API, or read the persist dir when none runs."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shlex
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from . import __version__
from .adminclient import AdminClient, AdminUnavailable
from .config import (
    DoemuSettings,
    WorkerConfig,
    display_path,
    find_pyproject,
    load_config,
    resolve_settings,
)
from .errors import DoemuError
from .ids import IdFactory, is_hex_id

__all__ = ["main"]

_log = logging.getLogger("doemu.cli")

_CONFIG = click.option(
    "--config",
    "-c",
    type=click.Path(path_type=Path),
    default=None,
    help="wrangler.toml / wrangler.jsonc (default: found in the current directory).",
)


def _fail(message: str) -> None:
    raise click.ClickException(message)


def _load(config_path: Path | None) -> WorkerConfig:
    try:
        config = load_config(config_path)
    except DoemuError as exc:
        raise click.ClickException(str(exc)) from None
    for warning in config.warnings:
        click.echo(f"warning: {warning}", err=True)
    return config


def _settings(config: WorkerConfig, cli: dict[str, Any]) -> DoemuSettings:
    try:
        return resolve_settings(cli, os.environ, find_pyproject(config), base_dir=config.base_dir)
    except DoemuError as exc:
        raise click.ClickException(str(exc)) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="doemu")
def main() -> None:
    """doemu: a local Durable-Object runtime for Cloudflare's Python Workers API."""


# ------------------------------------------------------------------------------------------- dev
@main.command()
@_CONFIG
@click.option("--host", default=None, help="Interface to bind.  [default: 127.0.0.1]")
@click.option("--port", type=int, default=None, help="Port (0 picks a free one).  [default: 8787]")
@click.option(
    "--persist-to",
    type=click.Path(path_type=Path),
    default=None,
    help="Where object files live.  [default: .doemu/state]",
)
@click.option(
    "--persist/--no-persist",
    default=None,
    help="--no-persist uses a temporary directory removed on exit.",
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
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
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
def dev(config: Path | None, **flags: Any) -> None:
    """Serve the worker's Durable Objects over HTTP and WebSocket."""
    worker = _load(config)
    settings = _settings(worker, flags)
    _setup_logging(settings.log_level)
    if settings.reload:
        _run_with_reload(worker, settings)
        return
    asyncio.run(_serve(worker, settings))


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(), format="%(levelname)-7s %(name)s: %(message)s", stream=sys.stderr
    )


async def _serve(worker: WorkerConfig, settings: DoemuSettings) -> None:
    import uvicorn

    from .loader import load_worker
    from .runtime import ClassSpec, Runtime
    from .server import DoemuApp
    from .storage import StorageLimits

    try:
        loaded = load_worker(worker)
    except DoemuError as exc:
        raise click.ClickException(str(exc)) from None
    runtime = Runtime(
        worker_name=worker.name,
        classes={name: ClassSpec(c.cls, c.sql) for name, c in loaded.classes.items()},
        bindings={b.name: b.class_name for b in worker.bindings},
        persist_dir=settings.persist_to if settings.persist else None,
        vars=worker.vars,
        idle_timeout=settings.idle_timeout,
        max_live_objects=settings.max_live_objects,
        limits=StorageLimits.production() if settings.limits == "production" else None,
    )
    app = DoemuApp(runtime, entry=loaded.entry, admin_token=settings.admin_token)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        lifespan="on",
        log_level="warning" if settings.log_level == "info" else settings.log_level,
        access_log=settings.log_level == "debug",
        ws_ping_interval=None,
    )
    server = uvicorn.Server(config)
    serving = asyncio.ensure_future(server.serve())
    while not server.started:
        if serving.done():
            await serving
            raise click.ClickException(f"could not start on {settings.host}:{settings.port}")
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    url = f"http://{settings.host}:{port}"
    persist = (
        f"{display_path(runtime.persist_dir)} (persistent)"
        if settings.persist
        else f"{runtime.persist_dir} (temporary: removed on exit)"
    )
    click.echo(f"doemu {__version__} · worker {worker.name!r} · {worker.source_name}")
    click.echo(f"  url:     {url}")
    click.echo(f"  admin:   {url}/__doemu/api/health")
    click.echo(f"  persist: {persist}")
    entry = f"Default ({loaded.entry.__module__})" if loaded.entry else "default router"
    click.echo(f"  entry:   {entry}")
    for binding in worker.bindings:
        item = loaded.classes[binding.class_name]
        click.echo(f"  {binding.name} → {item.name} ({'sql' if item.sql else 'kv'}; {item.origin})")
    pending = len(runtime.scheduler)
    if pending:
        click.echo(f"  alarms:  {pending} restored")
    click.echo(f"doemu ready on {url}")
    sys.stdout.flush()
    await serving


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _run_with_reload(worker: WorkerConfig, settings: DoemuSettings) -> None:
    """Run ``doemu dev --no-reload`` as a child and restart it when a source file changes."""
    import watchfiles

    port = settings.port or _free_port(settings.host)
    args = [
        sys.executable,
        "-m",
        "doemu",
        "dev",
        "--no-reload",
        "--host",
        settings.host,
        "--port",
        str(port),
        "--log-level",
        settings.log_level,
        "--idle-timeout",
        f"{settings.idle_timeout[0]}-{settings.idle_timeout[1]}",
        "--limits",
        settings.limits,
    ]
    if worker.source is not None:
        args += ["--config", str(worker.source)]
    args += ["--persist-to", str(settings.persist_to)] if settings.persist else ["--no-persist"]
    if settings.admin_token:
        args += ["--admin-token", settings.admin_token]
    if settings.max_live_objects:
        args += ["--max-live-objects", str(settings.max_live_objects)]
    persist = settings.persist_to.resolve()

    def source_change(change: watchfiles.Change, path: str) -> bool:
        p = Path(path).resolve()
        if p == persist or persist in p.parents:
            return False
        if any(part in {".doemu", "__pycache__", ".git", ".venv"} for part in p.parts):
            return False
        return p.suffix in {".py", ".toml", ".json", ".jsonc"}

    click.echo(f"doemu: watching {display_path(worker.base_dir)} for changes", err=True)
    watchfiles.run_process(
        worker.base_dir,
        target=shlex.join(args),
        target_type="command",
        watch_filter=source_change,
        callback=lambda changes: click.echo(
            f"doemu: {len(changes)} change(s); restarting", err=True
        ),
    )


# ------------------------------------------------------------------------------------ classes
@main.command()
@_CONFIG
def classes(config: Path | None) -> None:
    """List every Durable Object class and where it comes from."""
    from .loader import describe_classes, load_worker

    worker = _load(config)
    try:
        loaded = load_worker(worker)
    except DoemuError as exc:
        raise click.ClickException(str(exc)) from None
    for row in describe_classes(loaded):
        bindings = ", ".join(row["bindings"]) or "(no binding)"
        click.echo(
            f"{row['name']:<24} {bindings:<20} {'sql' if row['sql'] else 'kv ':<4} {row['origin']}"
        )


# ------------------------------------------------------------------ inspection via admin API
_URL = click.option("--url", default=None, help="A running server. [default: from settings]")
_TOKEN = click.option("--admin-token", default=None, envvar="DOEMU_ADMIN_TOKEN")


def _client(worker: WorkerConfig, url: str | None, token: str | None) -> AdminClient:
    settings = _settings(worker, {})
    return AdminClient(url or f"http://{settings.host}:{settings.port}", token)


def _persist_dir(worker: WorkerConfig) -> Path:
    return _settings(worker, {}).persist_to


def _online(client: AdminClient, call: Callable[[AdminClient], Any]) -> Any:
    try:
        return call(client)
    except AdminUnavailable:
        return None
    except DoemuError as exc:
        raise click.ClickException(str(exc)) from None


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2))


@main.command()
@_CONFIG
@_URL
@_TOKEN
@click.argument("binding", required=False)
def objects(
    config: Path | None, url: str | None, admin_token: str | None, binding: str | None
) -> None:
    """List objects (live and evicted) of every binding, or of BINDING."""
    worker = _load(config)
    query = f"?binding={binding}" if binding else ""
    found = _online(_client(worker, url, admin_token), lambda c: c.get("/objects" + query))
    if found is None:
        found = asyncio.run(_offline_objects(worker, binding))
        click.echo(f"(no server running; read {display_path(_persist_dir(worker))})", err=True)
    for item in found:
        alarm = "" if item.get("alarm") is None else f" alarm={item['alarm']:.0f}"
        name = item.get("name") or "-"
        click.echo(f"{item['binding']:<12} {item['id']} {item['state']:<8} {name}{alarm}")


async def _offline_objects(worker: WorkerConfig, binding: str | None) -> list[dict[str, Any]]:
    from .alarms import AlarmTable
    from .inspection import read_meta

    out: list[dict[str, Any]] = []
    root = _persist_dir(worker)
    for b in worker.bindings:
        if binding and b.name != binding:
            continue
        directory = root / worker.unique_key(b)
        if not directory.is_dir():
            continue
        alarms: dict[str, float] = {}
        if (directory / "metadata.sqlite").exists():
            table = AlarmTable(directory / "metadata.sqlite")
            alarms = {row[0]: row[1] for row in await table.load_all()}
            table.close()
        for path in sorted(directory.glob("*.sqlite")):
            if not is_hex_id(path.stem):
                continue
            name = await read_meta(path, "name")
            out.append(
                {
                    "binding": b.name,
                    "id": path.stem,
                    "state": "evicted",
                    "name": name,
                    "alarm": alarms.get(path.stem),
                }
            )
    return out


def _object_path(worker: WorkerConfig, binding: str, name: str) -> Path:
    try:
        b = worker.binding(binding)
    except KeyError:
        raise click.ClickException(f"unknown binding {binding!r}") from None
    ids = IdFactory(worker.unique_key(b))
    object_id = ids.from_string(name) if is_hex_id(name) and ids.owns(name) else ids.from_name(name)
    return _persist_dir(worker) / worker.unique_key(b) / f"{object_id}.sqlite"


@main.command()
@_CONFIG
@_URL
@_TOKEN
@click.option("--write", is_flag=True, help="Allow writes (runs inside the object).")
@click.argument("binding")
@click.argument("name")
@click.argument("query")
def sql(
    config: Path | None,
    url: str | None,
    admin_token: str | None,
    write: bool,
    binding: str,
    name: str,
    query: str,
) -> None:
    """Run QUERY on the object NAME (a name or a 64-hex id); read-only by default."""
    from urllib.parse import quote

    from .inspection import read_sql

    worker = _load(config)
    path = f"/objects/{binding}/{quote(name, safe='')}/sql"
    body = {"query": query, "write": write}
    result = _online(_client(worker, url, admin_token), lambda c: c.post(path, body))
    if result is None:
        if write:
            _fail("--write needs a running server (writes go through the object)")
        file = _object_path(worker, binding, name)
        if not file.exists():
            _fail(f"{binding}/{name} has no storage in {display_path(file.parent)}")
        result = asyncio.run(read_sql(file, query))
    _echo_json(result)


@main.command()
@_CONFIG
@_URL
@_TOKEN
def alarms(config: Path | None, url: str | None, admin_token: str | None) -> None:
    """List pending alarms."""
    worker = _load(config)
    found = _online(_client(worker, url, admin_token), lambda c: c.get("/objects"))
    if found is None:
        found = asyncio.run(_offline_objects(worker, None))
    for item in found:
        if item.get("alarm") is not None:
            click.echo(
                f"{item['binding']:<12} {item['id']} {item.get('name') or '-'} {item['alarm']:.0f}"
            )


def _control(action: str) -> Callable[..., None]:
    def command(
        config: Path | None,
        url: str | None,
        admin_token: str | None,
        binding: str | None,
        name: str | None,
        all_: bool,
    ) -> None:
        from urllib.parse import quote

        worker = _load(config)
        client = _client(worker, url, admin_token)
        if all_:
            target = f"/{action}-all"
        elif binding and name:
            target = f"/objects/{binding}/{quote(name, safe='')}/{action}"
        else:
            _fail("give BINDING NAME, or --all")
        result = _online(client, lambda c: c.post(target))
        if result is None:
            _fail(f"no doemu server at {client.base}: nothing is live to {action}")
        _echo_json(result)

    return command


for _action, _help in (
    ("evict", "Evict gracefully (storage kept, sockets hibernate)."),
    ("reset", "Reset: abort in-flight work and drop the instance."),
):
    main.command(name=_action, help=_help)(
        _CONFIG(
            _URL(
                _TOKEN(
                    click.option("--all", "all_", is_flag=True)(
                        click.argument("name", required=False)(
                            click.argument("binding", required=False)(_control(_action))
                        )
                    )
                )
            )
        )
    )
