"""``doemu``: the command line (click). ``doemu dev`` serves a worker; the other commands inspect
and control a running server through the admin API, or read the persist dir when none runs.

Every expected failure (a bad config, a bad setting, a busy port, no server for ``evict``) is a
one-line ``Error: …`` and exit code 1; tracebacks are kept for bugs and for the user's own code.

This module only declares the commands and echoes their results: what ``doemu dev`` does lives in
:mod:`doemu.server.devserver`, reading a persist dir when no server runs in
:mod:`doemu.inspection.offline`.

Start-up time matters (a restart after a crash is measured to its first answered request), so
what only the inspection commands use (the admin API client, the offline readers) is imported
inside those commands, never on the way to ``doemu dev`` serving; the modules declaring those
commands (``control``, ``d1``, ``inspect``) are imported by the ``doemu`` group when one of their
commands is asked for (see :data:`doemu.cli.common.LAZY_COMMAND_MODULES`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any

import click

from ..config import (
    CLOCKS,
    DURABILITY_LEVELS,
    LOOPS,
    DoemuSettings,
    WorkerConfig,
    display_path,
    find_pyproject,
    parse_var_options,
    resolve_vars,
)
from ..errors import DoemuError, error_text
from ..server.devserver import (
    StartupError,
    load_worker,
    run,
    run_with_reload,
    serve_error_page,
    setup_logging,
)
from .common import _CONFIG, _ENV, _PERSIST_TO_HELP, _fail, _load, _settings, main

__all__ = ["main"]


# ------------------------------------------------------------------------------------------- dev
@main.command()
@_CONFIG
@_ENV
@click.option(
    "--var",
    "vars_",
    multiple=True,
    metavar="KEY:VALUE",
    help="Set env.KEY (repeatable); overrides [vars] and .dev.vars.  [default: none]",
)
@click.option(
    "--host",
    "--ip",
    "host",
    default=None,
    help="Interface to bind (0.0.0.0: every interface); --ip is wrangler's spelling.  "
    "[default: 127.0.0.1]",
)
@click.option("--port", type=int, default=None, help="Port (0 picks a free one).  [default: 8787]")
@click.option("--persist-to", default=None, help=_PERSIST_TO_HELP)
@click.option(
    "--persist/--no-persist",
    default=None,
    help="--no-persist uses a temporary directory removed on exit.  [default: --persist]",
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
    help="Idle seconds before eviction: a range like 70-140, or one value.  [default: 70-140]",
)
@click.option(
    "--reload/--no-reload",
    default=None,
    help="Restart when sources change; a Worker that fails to import serves its error until "
    "the fix.  [default: --reload in a terminal, --no-reload when output is not one]",
)
@click.option(
    "--reload-dir",
    "reload_dirs",
    multiple=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Watch this folder instead of the project's (repeatable).  [default: the project]",
)
@click.option(
    "--reload-exclude",
    "reload_excludes",
    multiple=True,
    metavar="GLOB",
    help="Changes to paths matching GLOB do not restart (repeatable).  [default: none]",
)
@click.option(
    "--log-level",
    default=None,
    type=click.Choice(["critical", "error", "warning", "warn", "info", "debug", "trace", "none"]),
    help="info logs one line per request; warning (warn) silences it; none logs nothing but "
    "the banner; trace adds the libraries'.  [default: info]",
)
@click.option(
    "--env-file",
    "env_files",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="Read secrets from this dotenv file instead of .dev.vars (repeatable; later files "
    "win), as wrangler's --env-file.  [default: .dev.vars]",
)
@click.option(
    "--admin-token",
    default=None,
    help="Require this bearer token on the admin API (and allow non-loopback).  "
    "[default: none: loopback only]",
)
@click.option(
    "--limits",
    default=None,
    type=click.Choice(["local", "production"]),
    help="Storage limits: none (local, like workerd) or Cloudflare's production ones.  "
    "[default: local]",
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
@click.option(
    "--clock",
    default=None,
    type=click.Choice(CLOCKS),
    help="manual: time stands still until POST /__doemu/api/clock moves it (step through "
    "alarms by hand).  [default: real]",
)
@click.option(
    "--lenient/--strict",
    default=None,
    help="--lenient accepts what Cloudflare's Python runtime refuses (a coroutine passed to "
    "ctx.waitUntil, Python lists where JavaScript wants an Array, entropy at import time…).  "
    "[default: --strict]",
)
@click.option("--reload-child", is_flag=True, hidden=True)  # set by --reload for its child
def dev(
    config: Path | None,
    env_name: str | None,
    vars_: tuple[str, ...],
    reload_child: bool,
    reload_dirs: tuple[Path, ...],
    reload_excludes: tuple[str, ...],
    env_files: tuple[Path, ...],
    **flags: Any,
) -> None:
    """Serve the worker's Durable Objects over HTTP and WebSocket.

    Variables: [vars], then .dev.vars next to the config (dotenv secrets, never printed), then
    --var KEY:VALUE.
    """
    flags["log_level"] = _LOG_LEVELS.get(flags.get("log_level") or "", flags.get("log_level"))
    try:
        _dev(config, env_name, vars_, reload_child, flags, reload_dirs, reload_excludes, env_files)
    except StartupError as exc:
        if not reload_child or _SERVING.settings is None:
            raise
        # Under --reload the parent keeps watching: say so, and answer with the error meanwhile.
        exc.show()
        logging.getLogger("doemu.reload").warning(
            "the server answers requests with this error; it restarts when you save a fix"
        )
        serve_error_page(_SERVING.settings, exc)
        raise SystemExit(1) from None
    except click.ClickException as exc:
        if not reload_child:
            raise
        exc.show()
        logging.getLogger("doemu.reload").warning(
            "the server is not running; it restarts when you save a fix"
        )
        raise SystemExit(1) from None


#: wrangler's ``--log-level`` spellings, as doemu's levels.
_LOG_LEVELS = {"warn": "warning", "none": "critical"}


class _Serving:
    """The settings of the server being started (for the error page a reload child serves)."""

    settings: DoemuSettings | None = None


_SERVING = _Serving()


def _reload_by_default(worker: WorkerConfig) -> bool:
    """Whether to reload when nothing sets ``reload``: when a person watches (stdout is a
    terminal). A harness, a benchmark or CI reading the output gets one plain server process.
    ``--reload``/``--no-reload``, ``DOEMU_RELOAD`` or ``[tool.doemu] reload`` decide instead."""
    if os.environ.get("DOEMU_RELOAD"):
        return False
    pyproject = find_pyproject(worker)
    if pyproject is not None:
        try:
            tool = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {})
        except (OSError, ValueError):
            return False  # the settings reported it already
        if "reload" in (tool.get("doemu") or {}):
            return False
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def _dev(
    config: Path | None,
    env_name: str | None,
    vars_: tuple[str, ...],
    reload_child: bool,
    flags: dict[str, Any],
    reload_dirs: tuple[Path, ...] = (),
    reload_excludes: tuple[str, ...] = (),
    env_files: tuple[Path, ...] = (),
) -> None:
    worker = _load(config, env_name)
    settings = _settings(worker, flags)
    if flags.get("reload") is None and not reload_child and _reload_by_default(worker):
        settings = dataclasses.replace(settings, reload=True)
    _SERVING.settings = settings
    setup_logging(settings.log_level)
    try:
        cli_vars = parse_var_options(vars_)
        dev_vars = resolve_vars(worker, cli_vars, env_files)
    except DoemuError as exc:
        _fail(error_text(exc))
    if settings.reload:
        run_with_reload(
            worker,
            settings,
            cli_vars,
            reload_dirs=reload_dirs,
            reload_excludes=reload_excludes,
            env_files=env_files,
        )
        return
    run(worker, settings, force_on_second_signal=not reload_child, dev_vars=dev_vars)


# ------------------------------------------------------------------------------------ init
@main.command()
@click.argument("directory", type=click.Path(path_type=Path), default=".")
@click.option(
    "--force",
    is_flag=True,
    help="Write into a non-empty DIRECTORY (the project's own files are replaced, others kept; "
    "an existing pyproject.toml and .gitignore get doemu's missing parts appended).",
)
@click.option(
    "--with",
    "with_",
    default="",
    metavar="kv,...",
    help="Also bind these (comma-separated): kv, d1, r2.  [default: none]",
)
@click.option(
    "--template",
    "template_name",
    type=click.Choice(["worker", "chat", "agent-server"]),
    default="worker",
    show_default=True,
    help="worker: a Durable Object and an entry Worker; chat: an AIChatAgent (agents.chat); "
    "agent-server: an agent server with a tool (agents.server).",
)
def init(directory: Path, force: bool, with_: str, template_name: str) -> None:
    """Write a new project into DIRECTORY (default: here): it serves and tests with no edits."""
    from ..scaffold import write_project

    chosen = [part.strip() for part in with_.split(",") if part.strip()]
    try:
        result = write_project(
            directory, force=force, with_bindings=chosen, template_name=template_name
        )
    except DoemuError as exc:
        _fail(error_text(exc))
    shown = display_path(directory)
    for path in result.written:
        note = "  (replaced)" if path in result.replaced else ""
        verb = "merged" if path in result.merged else "wrote"
        click.echo(f"  {verb} {Path(shown, path).as_posix()}{note}")
    for path, notes in result.merged.items():
        kept = "" if path in result.written else " (kept as it is)"
        for line in notes or ("nothing to add",):
            click.echo(f"    {path}{kept}: {line}")
    here = directory.resolve() == Path.cwd().resolve()
    cd = "" if here else f"  cd {shlex.quote(shown)}\n"
    migrate = "  doemu d1 migrations apply DB   # the notes table\n" if "d1" in chosen else ""
    try_it = {
        "worker": "  curl -X POST http://127.0.0.1:8787/counter/alice\n",
        "chat": "  a useAgentChat client, or a WebSocket, at ws://127.0.0.1:8787/agents/chat/alice\n",
        "agent-server": "  curl -X POST http://127.0.0.1:8787/sessions/s1/start -d "
        '\'{"agentType": "assistant", "sessionId": "s1", "input": {"message": '
        '"hi"}}\'   # with a model in .dev.vars\n',
    }[template_name]
    click.echo(
        f"\nCreated the Worker {result.name!r}. Next steps:\n{cd}{migrate}"
        "  doemu dev     # serves it on http://127.0.0.1:8787; in another shell:\n"
        f"{try_it}"
        "  pytest        # runs tests/ in-process\n"
        "The same folder deploys to Cloudflare with `pywrangler deploy`."
    )


# ------------------------------------------------------------------------------------ classes
@main.command()
@_CONFIG
@_ENV
def classes(config: Path | None, env_name: str | None) -> None:
    """List every Durable Object class and where it comes from."""
    from ..loader import describe_classes

    for row in describe_classes(load_worker(_load(config, env_name))):
        bindings = ", ".join(row["bindings"]) or "(no binding)"
        click.echo(
            f"{row['name']:<24} {bindings:<20} {'sql' if row['sql'] else 'kv ':<4} {row['origin']}"
        )
