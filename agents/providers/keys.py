"""Where adapters get their secrets and their HTTP: ``env`` and ``workers.fetch``.

Keys come from the Worker's ``env`` (``wrangler secret put`` on Cloudflare, ``.dev.vars``
under ``doemu dev``), never from code; a missing one is refused by name — the name of the
binding, never a value. ``fetch`` is looked up at call time so tests and Workers alike get the
platform's.
"""

from __future__ import annotations

from typing import Any

from .base import Fetch
from .errors import ProviderConfigError

__all__ = ["default_fetch", "env_secret"]


def env_secret(env: Any, name: str) -> str:
    """The secret ``name`` of ``env`` (attribute or mapping), refused by name when missing."""
    value = env.get(name) if isinstance(env, dict) else getattr(env, name, None)
    if not value:
        raise ProviderConfigError(
            f"the secret {name} is not set in env (put it in .dev.vars locally, or "
            f"`wrangler secret put {name}` on Cloudflare)"
        )
    return str(value)


def default_fetch() -> Fetch:
    from workers import fetch

    return fetch
