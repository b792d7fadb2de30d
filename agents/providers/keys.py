"""What every HTTP adapter shares: a key from ``env``, a model, a base URL, ``workers.fetch``.

Keys come from the Worker's ``env`` (``wrangler secret put`` on Cloudflare, ``.dev.vars``
under ``doemu dev``), never from code; a missing one is refused by name — the name of the
binding, never a value — and no adapter shows its key (``repr`` names the model and base URL).
``fetch`` is looked up at call time so tests and Workers alike get the platform's.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from .base import Fetch
from .errors import ProviderConfigError

__all__ = ["HttpAdapter", "default_fetch", "env_secret"]


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


class HttpAdapter:
    """The common half of an adapter; subclasses name their defaults and speak their format."""

    #: The provider's own base URL, and the ``env`` names of its key and of a base override.
    default_base_url: ClassVar[str]
    key_var: ClassVar[str]
    base_url_var: ClassVar[str]

    def __init__(
        self, *, api_key: str, model: str, base_url: str | None = None, fetch: Fetch | None = None
    ) -> None:
        self._key = api_key
        self.model = model
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self._fetch = fetch

    @classmethod
    def from_env(
        cls, env: Any, *, model: str, key: str | None = None, base_url_var: str | None = None,
        **options: Any,
    ) -> Self:  # fmt: skip
        """The adapter with its key from the secret ``key`` of ``env`` (default
        :attr:`key_var`) and its base URL from ``base_url_var`` when that is set."""
        var = base_url_var or cls.base_url_var
        base = env.get(var) if isinstance(env, dict) else getattr(env, var, None)
        secret = env_secret(env, key or cls.key_var)
        return cls(api_key=secret, model=model, base_url=str(base) if base else None, **options)

    @property
    def fetch(self) -> Fetch:
        return self._fetch or default_fetch()

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"
