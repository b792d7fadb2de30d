"""Reading ``wrangler.toml`` / ``wrangler.jsonc`` as wrangler reads it, plus doemu's own settings.

The worker configuration (:class:`WorkerConfig`) comes from the same file ``wrangler deploy`` uses,
so one file describes the Worker locally and on Cloudflare. It is searched for as wrangler does:
``wrangler.json``, then ``wrangler.jsonc``, then ``wrangler.toml``, in the start directory and then
in each parent (the nearest directory wins; inside one directory wrangler's order decides).

``[[migrations]]`` are replayed in order, with wrangler's own rules and error texts, to learn the
final set of Durable Object classes and which of them are SQLite-backed: only a class created by
``new_sqlite_classes`` gets ``ctx.storage.sql``.

What fails and what only warns follows wrangler: malformed values, duplicate binding names,
duplicate migration tags and a migration that cannot be replayed are errors (:class:`ConfigError`
subclasses, every problem listed, each naming the file and the key). Unknown keys, bindings whose
class has no migration, cross-script bindings and transfers are warnings, returned in
:attr:`WorkerConfig.warnings` for the CLI to print (nothing is sent to :mod:`warnings`).

doemu-only settings (:class:`DoemuSettings`) come from CLI flags, ``DOEMU_*`` environment variables
and ``[tool.doemu]`` in a ``pyproject.toml`` next to the config, in that order of precedence.

A CLI puts it together like this::

    config = load_config(config_option)               # None: search from the cwd upward
    settings = resolve_settings(cli_params, os.environ, find_pyproject(config),
                                base_dir=config.base_dir)
    for warning in config.warnings:
        print(f"warning: {warning}")

The package is split by concept: :mod:`~doemu.config.model` (the dataclasses and errors),
:mod:`~doemu.config.files` (finding and decoding the file), :mod:`~doemu.config.jsonc` and
:mod:`~doemu.config.positions` (JSONC and line numbers), :mod:`~doemu.config.validate` and
:mod:`~doemu.config.migrations` (wrangler's rules), :mod:`~doemu.config.settings` (doemu's own
settings). Import from :mod:`doemu.config` itself; the submodules are an implementation detail.
"""

from __future__ import annotations

from .devvars import DEV_VARS_FILE as DEV_VARS_FILE
from .devvars import DevVars as DevVars
from .devvars import dev_vars_file as dev_vars_file
from .devvars import parse_var_options as parse_var_options
from .devvars import resolve_vars as resolve_vars
from .files import CONFIG_FILE_NAMES as CONFIG_FILE_NAMES
from .files import find_config as find_config
from .files import find_pyproject as find_pyproject
from .files import load_config as load_config
from .jsonc import parse_jsonc as parse_jsonc
from .jsonc import strip_jsonc as strip_jsonc
from .model import ClassInfo as ClassInfo
from .model import ConfigNotFoundError as ConfigNotFoundError
from .model import ConfigSyntaxError as ConfigSyntaxError
from .model import ConfigValueError as ConfigValueError
from .model import DurableObjectBinding as DurableObjectBinding
from .model import MigrationError as MigrationError
from .model import SettingsError as SettingsError
from .model import WorkerConfig as WorkerConfig
from .model import display_path as display_path
from .settings import CLOCKS as CLOCKS
from .settings import DURABILITY_LEVELS as DURABILITY_LEVELS
from .settings import LOOPS as LOOPS
from .settings import DoemuSettings as DoemuSettings
from .settings import Durability as Durability
from .settings import Limits as Limits
from .settings import Loop as Loop
from .settings import parse_idle_timeout as parse_idle_timeout
from .settings import resolve_settings as resolve_settings
from .validate import parse_config as parse_config

__all__ = [
    "CLOCKS",
    "CONFIG_FILE_NAMES",
    "DEV_VARS_FILE",
    "DURABILITY_LEVELS",
    "LOOPS",
    "ClassInfo",
    "ConfigNotFoundError",
    "ConfigSyntaxError",
    "ConfigValueError",
    "DevVars",
    "DoemuSettings",
    "Durability",
    "DurableObjectBinding",
    "Loop",
    "MigrationError",
    "SettingsError",
    "WorkerConfig",
    "dev_vars_file",
    "display_path",
    "find_config",
    "find_pyproject",
    "load_config",
    "parse_config",
    "parse_idle_timeout",
    "parse_jsonc",
    "parse_var_options",
    "resolve_settings",
    "resolve_vars",
    "strip_jsonc",
]
