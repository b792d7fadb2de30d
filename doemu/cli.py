"""``doemu``: the command line (click). ``doemu dev`` serves a worker; the other commands inspect
and control a running server through the admin API, or read the persist dir when none runs.

Every expected failure (a bad config, a bad setting, a busy port, no server for ``evict``) is a
one-line ``Error: …`` and exit code 1; tracebacks are kept for bugs and for the user's own code.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shlex
import shutil
import signal
import socket
import sqlite3
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import quote, urlencode

import click

from . import __version__
from .adminclient import AdminClient, AdminUnavailable
from .config import (
    DoemuSettings,
    DurableObjectBinding,
    WorkerConfig,
    display_path,
    find_pyproject,
    load_config,
    resolve_settings,
)
from .errors import DoemuError
from .ids import IdFactory, is_hex_id

if TYPE_CHECKING:
    import uvicorn

    from .loader import LoadedWorker
    from .runtime import Runtime

__all__ = ["main"]

_CONFIG = click.option(
    "--config",
    "-c",
    type=click.Path(path_type=Path),
    default=None,
    help="wrangler.toml / wrangler.jsonc (default: found in the current directory).",
)
_PERSIST_TO_HELP = "Where object files live.  [default: .doemu/state]"
_TRACE = 5  # uvicorn's TRACE level, below DEBUG
_ALL_ROWS = 2**31 - 1  # a fetchmany() size meaning "all" (it must fit a C int)


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


def _load_worker(worker: WorkerConfig) -> LoadedWorker:
    """Import the worker; exceptions raised by the user's own code keep their traceback."""
    from .loader import load_worker

    try:
        loaded = load_worker(worker)
    except DoemuError as exc:
        _fail(str(exc))
    for warning in loaded.warnings:
        click.echo(f"warning: {warning}", err=True)
    return loaded


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


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
@click.option("--reload-child", is_flag=True, hidden=True)  # set by --reload for its child
def dev(config: Path | None, reload_child: bool, **flags: Any) -> None:
    """Serve the worker's Durable Objects over HTTP and WebSocket."""
    worker = _load(config)
    settings = _settings(worker, flags)
    _setup_logging(settings.log_level)
    if settings.reload:
        _run_with_reload(worker, settings)
        return
    asyncio.run(_serve(worker, settings, force_on_second_signal=not reload_child))


def _setup_logging(level: str) -> None:
    logging.addLevelName(_TRACE, "TRACE")  # "trace" is a valid setting; logging lacks the level
    logging.basicConfig(
        level=_TRACE if level == "trace" else level.upper(),
        format="%(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def _listen(host: str, port: int) -> socket.socket:
    """Bind the listening socket as uvicorn would, before anything else starts.

    uvicorn reports a busy port with ``sys.exit`` inside its task (a traceback, exit code 3, and
    a ``--no-persist`` temp dir left behind); binding first makes it a one-line error.
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        _fail(f"cannot listen on {_url(host, port)}: {exc.strerror or exc}")
    return sock


@contextlib.contextmanager
def _stop_signals(server: uvicorn.Server) -> Iterator[None]:
    """Send SIGINT/SIGTERM to uvicorn's graceful shutdown, before, during and after ``serve()``.

    Once it has shut down (storage committed), uvicorn restores the handlers it found and
    re-raises the signal that stopped it. With Python's defaults that kills the process (exit
    -15) or raises KeyboardInterrupt; with ``handle_exit`` installed it is a no-op and a graceful
    stop exits 0. It also covers a signal that arrives before uvicorn installs its own handlers.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stops = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, server.handle_exit) for sig in stops}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _server(config: uvicorn.Config, force_on_second_signal: bool) -> uvicorn.Server:
    """uvicorn's server; a second SIGINT forces the exit only when ``force_on_second_signal``.

    Under ``--reload``, Ctrl-C (or a group-wide SIGTERM) reaches the child and watchfiles then
    sends it one more SIGINT: that duplicate must not turn the graceful shutdown into a forced one
    (skipping the lifespan shutdown with a traceback). The parent still SIGKILLs a stuck child.
    """
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            if force_on_second_signal or not self.should_exit:
                super().handle_exit(sig, frame)

    return Server(config)


async def _serve(
    worker: WorkerConfig, settings: DoemuSettings, *, force_on_second_signal: bool = True
) -> None:
    import uvicorn

    from .runtime import ClassSpec, Runtime
    from .server import DoemuApp
    from .storage import StorageLimits

    loaded = _load_worker(worker)
    async with contextlib.AsyncExitStack() as cleanup:
        sock = cleanup.enter_context(_listen(settings.host, settings.port))
        try:
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
        except (DoemuError, OSError) as exc:
            _fail(f"cannot start the runtime: {exc}")
        # Closing is idempotent: this commits and removes a temp dir even when uvicorn's lifespan
        # shutdown did not run (startup failure, a second Ctrl-C).
        cleanup.push_async_callback(runtime.close)
        server = _server(
            uvicorn.Config(
                DoemuApp(runtime, entry=loaded.entry, admin_token=settings.admin_token),
                lifespan="on",
                log_level="warning" if settings.log_level == "info" else settings.log_level,
                access_log=settings.log_level in ("debug", "trace"),
                ws_ping_interval=None,
            ),
            force_on_second_signal,
        )
        cleanup.enter_context(_stop_signals(server))
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started:
            if serving.done():
                await serving
                _fail("the server failed to start (see the log above)")
            await asyncio.sleep(0.01)
        _banner(worker, loaded, runtime, settings, _url(settings.host, sock.getsockname()[1]))
        await serving


def _banner(
    worker: WorkerConfig, loaded: LoadedWorker, runtime: Runtime, settings: DoemuSettings, url: str
) -> None:
    """What is being served and where; the last line is the exact one harnesses wait for."""
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
    if len(runtime.scheduler):
        click.echo(f"  alarms:  {len(runtime.scheduler)} restored")
    click.echo(f"doemu ready on {url}")
    sys.stdout.flush()


def _run_with_reload(worker: WorkerConfig, settings: DoemuSettings) -> None:
    """Run ``doemu dev --no-reload`` as a child and restart it when a source file changes.

    The parent owns the port (a busy one fails here, ``0`` is fixed once so a restart keeps the
    URL) and, with ``--no-persist``, the temp dir, so state survives reloads as on a code update.
    """
    import watchfiles

    with _listen(settings.host, settings.port) as probe:
        port = probe.getsockname()[1]
    temp = None if settings.persist else Path(tempfile.mkdtemp(prefix="doemu-"))
    persist = (temp or settings.persist_to).resolve()
    args = [
        sys.executable, "-m", "doemu", "dev", "--no-reload", "--reload-child",
        "--host", settings.host, "--port", str(port), "--persist-to", str(persist),
        "--log-level", settings.log_level, "--limits", settings.limits,
        "--idle-timeout", f"{settings.idle_timeout[0]}-{settings.idle_timeout[1]}",
    ]  # fmt: skip
    if worker.source is not None:
        args += ["--config", str(worker.source)]
    if settings.max_live_objects:
        args += ["--max-live-objects", str(settings.max_live_objects)]
    if settings.admin_token:  # through the environment: argv is visible to every local user
        os.environ["DOEMU_ADMIN_TOKEN"] = settings.admin_token

    def source_change(change: watchfiles.Change, path: str) -> bool:
        p = Path(path).resolve()
        if p == persist or persist in p.parents:
            return False
        if any(part in {".doemu", "__pycache__", ".git", ".venv"} for part in p.parts):
            return False
        return p.suffix in {".py", ".toml", ".json", ".jsonc"}

    click.echo(f"doemu: watching {display_path(worker.base_dir)} for changes", err=True)
    if temp is not None:
        click.echo(f"doemu: --no-persist: state in {temp}, removed on exit", err=True)
    try:
        watchfiles.run_process(
            worker.base_dir,
            target=shlex.join(args),
            target_type="command",
            watch_filter=source_change,
            callback=lambda changes: click.echo(
                f"doemu: {len(changes)} change(s); restarting", err=True
            ),
        )
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)


# ------------------------------------------------------------------------------------ classes
@main.command()
@_CONFIG
def classes(config: Path | None) -> None:
    """List every Durable Object class and where it comes from."""
    from .loader import describe_classes

    for row in describe_classes(_load_worker(_load(config))):
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


@dataclass(frozen=True)
class _Target:
    """What an inspection command looks at: a server's admin API, else its persist dir."""

    worker: WorkerConfig
    settings: DoemuSettings
    client: AdminClient

    def binding(self, name: str) -> DurableObjectBinding:
        try:
            return self.worker.binding(name)
        except KeyError:
            known = ", ".join(b.name for b in self.worker.bindings) or "none"
            _fail(f"unknown binding {name!r} in {self.worker.source_name} (known: {known})")


def _target(
    config: Path | None, url: str | None, token: str | None, persist_to: Path | None = None
) -> _Target:
    worker = _load(config)
    settings = _settings(worker, {"persist_to": persist_to})
    if url is None:  # a server bound to every interface is reached on loopback
        host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(settings.host, settings.host)
        url = _url(host, settings.port)
    return _Target(worker, settings, AdminClient(url, token or settings.admin_token))


def _online(target: _Target, call: Callable[[AdminClient], Any]) -> Any:
    """The admin API's answer, or ``None`` when no server answers (callers then go offline)."""
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
    bindings = [target.binding(binding)] if binding else list(target.worker.bindings)
    return asyncio.run(_scan(target.worker, _offline(target), bindings))


async def _scan(
    worker: WorkerConfig, root: Path, bindings: list[DurableObjectBinding]
) -> list[dict[str, Any]]:
    """Every stored object, read-only; bindings of one class share a directory, listed once."""
    from .inspection import read_names

    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for b in bindings:
        directory = root / worker.unique_key(b)
        if directory.name in seen or not directory.is_dir():
            continue
        seen.add(directory.name)
        alarms = await _stored_alarms(directory / "metadata.sqlite")
        files = [p for p in sorted(directory.glob("*.sqlite")) if is_hex_id(p.stem)]
        for path, name in zip(files, await read_names(files), strict=True):
            alarm, alarm_name = alarms.get(path.stem, (None, None))
            item = {"binding": b.name, "id": path.stem, "state": "evicted"}
            out.append({**item, "name": name or alarm_name, "alarm": alarm})
    return out


async def _stored_alarms(path: Path) -> dict[str, tuple[float, str | None]]:
    """``_cf_ALARM`` by object id, read-only: the CLI must never write a server's files."""
    from .inspection import read_sql

    query = "SELECT actor_id, scheduled_time, actor_name FROM _cf_ALARM"
    try:
        result = await read_sql(path, query, limit=_ALL_ROWS)
    except sqlite3.Error:
        return {}  # no file or no table yet
    return {str(r[0]): (float(r[1]), r[2]) for r in result["rows"]}


def _object_file(target: _Target, binding: str, name: str) -> Path:
    """The file of object NAME (a name, or a 64-hex id of this namespace, as the admin API)."""
    key = target.worker.unique_key(target.binding(binding))
    ids = IdFactory(key)
    try:
        object_id = ids.from_string(name) if is_hex_id(name) else ids.from_name(name)
    except DoemuError as exc:
        _fail(f"{binding}/{name}: {exc}")
    return target.settings.persist_to / key / f"{object_id}.sqlite"


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
    from .inspection import ReadOnlySqlError, read_sql

    target = _target(config, url, admin_token, persist_to)
    path = f"/objects/{_path(binding)}/{_path(name)}/sql"
    result = _online(target, lambda c: c.post(path, {"query": query, "write": write}))
    if result is None:
        if write:
            _fail(
                f"--write needs a running server (writes go through the object); "
                f"none answers at {target.client.base}"
            )
        file = _object_file(target, binding, name)
        _offline(target)
        if not file.exists():
            _fail(f"{binding}/{name} has no storage in {display_path(file.parent)}")
        try:
            result = asyncio.run(read_sql(file, query))
        except ReadOnlySqlError:
            _fail(f"{binding}/{name}: read-only SQL; --write needs a running server")
        except (sqlite3.Error, DoemuError) as exc:
            _fail(f"{binding}/{name}: {exc}")
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
