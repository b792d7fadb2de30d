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
    try:
        config = load_config(config_path, env=env)
    except DoemuError as exc:
        _fail(error_text(exc))
    for warning in config.warnings:
        click.echo(f"warning: {warning}", err=True)
    return config


def _settings(config: WorkerConfig, cli: dict[str, Any]) -> DoemuSettings:
    try:
        return resolve_settings(cli, os.environ, find_pyproject(config), base_dir=config.base_dir)
    except DoemuError as exc:
        _fail(error_text(exc))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="doemu")
def main() -> None:
    """doemu: a local Durable-Object runtime for Cloudflare's Python Workers API."""
