"""``[tool.doemu.ai]``: the OpenAI-compatible endpoint that serves ``env.AI`` locally.

Workers AI's models run only on Cloudflare, so ``doemu dev`` answers ``env.AI.run(model, …)``
from an endpoint the project names (a local model server, a gateway, or doemu's fake providers)
in ``pyproject.toml`` next to the wrangler file::

    [tool.doemu.ai]
    base_url = "http://127.0.0.1:11434/v1"     # POST {base_url}/chat/completions, /embeddings
    default_model = "llama3.1:8b"               # for a text model the map does not name
    default_embedding_model = "nomic-embed-text"

    [tool.doemu.ai.models]
    "@cf/meta/llama-3.1-8b-instruct" = "llama3.1:8b"
    "@cf/baai/bge-base-en-v1.5" = "nomic-embed-text"

Its key, when it needs one, is a secret: ``DOEMU_AI_API_KEY`` in ``.dev.vars`` (never in this
file, never printed). These are doemu's settings, not the Worker's: they say where ``env.AI``
is served from here and mean nothing on Cloudflare, so they live beside the other
``[tool.doemu]`` settings and not in the wrangler file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .checker import show
from .model import SettingsError

__all__ = ["AI_API_KEY_VAR", "AI_KEYS", "AiSettings", "parse_ai_settings"]

#: The ``.dev.vars`` secret sent as ``Authorization: Bearer …`` to the endpoint, when set.
AI_API_KEY_VAR = "DOEMU_AI_API_KEY"
AI_KEYS = ("base_url", "default_model", "default_embedding_model", "models")


@dataclass(frozen=True)
class AiSettings:
    """Where ``env.AI`` is served from: ``base_url`` (no trailing ``/``), Workers AI model
    names mapped to the endpoint's, and the models used for names the map does not hold."""

    base_url: str
    models: Mapping[str, str] = field(default_factory=dict)
    default_model: str | None = None
    default_embedding_model: str | None = None

    def endpoint_model(self, model: str, embeddings: bool) -> str | None:
        """The endpoint's model for the Workers AI ``model``: mapped, else the default for
        the task (``None``: neither)."""
        mapped = self.models.get(model)
        if mapped is not None:
            return mapped
        return self.default_embedding_model if embeddings else self.default_model


def _text(value: Any, label: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SettingsError(f"{label}={show(value)}: expected a non-empty string", source=where)
    return value.strip()


def parse_ai_settings(value: Any, where: str) -> AiSettings:
    """``[tool.doemu.ai]`` of the pyproject ``where``, checked; a bad key or value raises
    :class:`~doemu.config.model.SettingsError` naming it."""
    label = f"{where} [tool.doemu.ai]"
    if not isinstance(value, dict):
        raise SettingsError(f"{label} must be a table, got {show(value)}", source=where)
    unknown = [key for key in value if key not in AI_KEYS]
    if unknown:
        raise SettingsError(
            f"{label} has unknown key {unknown[0]!r}; expected one of {', '.join(AI_KEYS)} "
            f"(the API key is not set here: put {AI_API_KEY_VAR} in .dev.vars)",
            source=where,
        )
    if "base_url" not in value:
        raise SettingsError(
            f'{label}: base_url is required (e.g. base_url = "http://127.0.0.1:11434/v1", '
            "an OpenAI-compatible endpoint)",
            source=where,
        )
    base_url = _text(value["base_url"], f"{label} base_url", where).rstrip("/")
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SettingsError(
            f"{label} base_url={show(base_url)}: expected an http:// or https:// URL "
            '(e.g. "http://127.0.0.1:11434/v1")',
            source=where,
        )
    models = value.get("models", {})
    if not isinstance(models, dict):
        raise SettingsError(f"{label}.models must be a table, got {show(models)}", source=where)
    mapped = {
        str(name): _text(target, f"{label}.models {show(name)}", where)
        for name, target in models.items()
    }
    defaults = {
        key: _text(value[key], f"{label} {key}", where) if key in value else None
        for key in ("default_model", "default_embedding_model")
    }
    return AiSettings(base_url, mapped, defaults["default_model"],
                      defaults["default_embedding_model"])  # fmt: skip
