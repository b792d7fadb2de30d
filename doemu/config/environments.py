"""``--env NAME``: the ``[env.NAME]`` section of a wrangler config, merged as wrangler merges it.

wrangler divides a config's keys into *inheritable* ones (``main``, ``compatibility_date``,
``compatibility_flags``, ``migrations``, …), which an environment takes from the top level unless
it sets them itself, and *non-inheritable* bindings (``vars``, ``durable_objects``, every other
binding type), which an environment must repeat: the top-level ones are not used for it, and
wrangler warns when the top level has them and the environment does not. The Worker's name
becomes ``<name>-<NAME>`` unless the environment names it (wrangler's default, "legacy"
environments), so an environment's Durable Objects have their own ids and their own storage,
as on Cloudflare. Without ``--env`` the top level is used and ``[env.*]`` sections are ignored.

This module works on the decoded data, before :func:`~doemu.config.validate.parse_config`
checks it, so an environment's values are validated with the same rules and messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .model import ConfigValueError

__all__ = ["NON_INHERITABLE_KEYS", "select_environment"]

#: wrangler's non-inheritable keys (``EnvironmentNonInheritable`` in workers-sdk) that doemu
#: reads or warns about; an environment never takes them from the top level.
NON_INHERITABLE_KEYS = frozenset(
    {
        "define", "vars", "durable_objects", "kv_namespaces", "r2_buckets", "d1_databases",
        "services", "queues", "analytics_engine_datasets", "vectorize", "hyperdrive", "ai",
        "browser", "images", "workflows", "dispatch_namespaces", "mtls_certificates", "logfwdr",
        "send_email", "pipelines", "secrets_store_secrets", "unsafe", "version_metadata",
        "text_blobs", "data_blobs", "wasm_modules", "tail_consumers", "ratelimits",
        "worker_loaders", "containers", "cloudchamber",
    }
)  # fmt: skip
#: Keys only the top level may hold (wrangler ignores them inside an environment).
_TOP_LEVEL_ONLY = frozenset({"env", "migrations", "keep_vars", "send_metrics", "site", "dev"})


def select_environment(
    raw: Mapping[str, Any], name: str, where: str
) -> tuple[dict[str, Any], list[str]]:
    """The top-level data with ``[env.<name>]`` applied, and wrangler's warnings about it.

    Raises :class:`ConfigValueError` when the file has no such environment (naming the ones it
    has), as ``wrangler dev --env`` refuses an unknown one.
    """
    envs = raw.get("env")
    known = sorted(envs) if isinstance(envs, dict) else []
    section = envs.get(name) if isinstance(envs, dict) else None
    if not isinstance(section, dict):
        listed = ", ".join(known) if known else "none"
        raise ConfigValueError(
            where, [f"--env {name}: no [env.{name}] section (environments: {listed})"]
        )
    merged = {k: v for k, v in raw.items() if k not in NON_INHERITABLE_KEYS and k != "env"}
    warnings: list[str] = []
    for key, value in section.items():
        if key in _TOP_LEVEL_ONLY:
            warnings.append(f"env.{name}.{key} is ignored: {key} is a top-level key")
            continue
        merged[key] = value
    if "name" not in section and isinstance(raw.get("name"), str):
        merged["name"] = f"{raw['name']}-{name}"
    for key in sorted(NON_INHERITABLE_KEYS & set(raw)):
        if key not in section:
            # wrangler's warning (validateNonInheritable), shortened.
            warnings.append(
                f'"{key}" exists at the top level, but not on "env.{name}". This is not what you '
                f'probably want, since "{key}" is not inherited by environments. Please add '
                f'"{key}" to "env.{name}".'
            )
    return merged, warnings
