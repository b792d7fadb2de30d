"""What every ``doemu`` command shares: the command group, the ``--config``/``--env`` options,
loading the config and settings, and the one-line failure."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NoReturn

import click

from .. import __version__
from ..config import (
    DoemuSettings,
    WorkerConfig,
    display_path,
    find_pyproject,
    load_config,
    resolve_settings,
)
from ..errors import DoemuError, error_text

__all__ = ["main"]

_CONFIG = click.option(
    "--config",
    "-c",
    type=click.Path(path_type=Path),
    default=None,
    help="wrangler.toml / wrangler.jsonc.  [default: the nearest one from the current directory]",
)
_ENV = click.option(
    "--env",
    "-e",
    "env_name",
    default=None,
    metavar="NAME",
    help="Use the config's [env.NAME] section (its vars and bindings; the Worker is named "
    "<name>-NAME).  [default: the top level]",
)
# A plain string, not click.Path(path_type=Path): Path("") is ".", and an empty --persist-to
# must be refused rather than persist into the current folder.
_PERSIST_TO_HELP = "Where object files live (a directory).  [default: .doemu/state]"


def _fail(message: str) -> NoReturn:
    raise click.ClickException(message)


def _load(config_path: Path | None, env: str | None = None) -> WorkerConfig:
    from .installation import agents_problem

    problem = agents_problem()
    if problem is not None:
        _fail(problem)
    try:
        config = load_config(config_path, env=env)
    except DoemuError as exc:
        _fail(error_text(exc))
    for warning in config.warnings:
        click.echo(f"warning: {warning}", err=True)
    return config


def _settings(config: WorkerConfig, cli: dict[str, Any]) -> DoemuSettings:
    try:
        settings = resolve_settings(
            cli, os.environ, find_pyproject(config), base_dir=config.base_dir
        )
    except DoemuError as exc:
        _fail(error_text(exc))
    problem = persist_dir_problem(settings.persist_to, config)
    if problem is not None and settings.persist:
        _fail(problem)
    return settings


def persist_dir_problem(persist_to: Path, config: WorkerConfig) -> str | None:
    """Why ``persist_to`` must not hold object files: it is the project's folder (``.``), the
    main module's (``src``) or one above them. Object files would lie among the sources, and
    every commit would be a change to the folder a reloading server watches."""
    persist = persist_to.resolve()
    folders = {"the project's folder (where its config is)": config.base_dir.resolve()}
    if config.main_path is not None:
        folders["the folder of the main module"] = config.main_path.parent.resolve()
    for what, folder in folders.items():
        if persist == folder or persist in folder.parents:
            shown = display_path(persist_to)
            that = "that is" if persist == folder else "that holds"
            return (
                f"--persist-to {shown}: {that} {what}; doemu would write object files "
                "among your sources. Pick a folder of their own, such as .doemu/state (the "
                "default), or --no-persist"
            )
    return None


#: The modules declaring the commands other than ``dev``, ``init`` and ``classes``: imported
#: when a command is asked for that is not declared yet, or when the commands are listed.
LAZY_COMMAND_MODULES = ("control", "d1", "inspect")


class _Commands(click.Group):
    """The ``doemu`` group, whose inspection and control commands are declared on demand.

    Start-up time matters (a restart after a crash is measured to its first answered request),
    and ``doemu dev`` has no use for the declarations of two dozen other commands and their
    options (a few milliseconds). A name this group does not know yet, or a listing (``--help``),
    imports :data:`LAZY_COMMAND_MODULES` first, so every command is still found by its name.
    """

    def _declare_all(self) -> None:
        import importlib

        for module in LAZY_COMMAND_MODULES:
            importlib.import_module(f"{__package__}.{module}")

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None:
            self._declare_all()
            command = super().get_command(ctx, cmd_name)
        return command

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._declare_all()
        return super().list_commands(ctx)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="doemu")
def main() -> None:
    """doemu: a local Durable-Object runtime for Cloudflare's Python Workers API."""
