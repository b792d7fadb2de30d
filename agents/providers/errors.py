"""What a provider adapter refuses or reports, under the library's one root, ``AgentsError``.

The chat layer turns an exception from a reply into the error frame and hands it to
``classify_chat_error``; the messages here therefore carry the provider's own words ("prompt is
too long", "rate limited") so a classifier and a reader both see what the provider said.
"""

from __future__ import annotations

from ..errors import AgentsError

__all__ = ["ProviderConfigError", "ProviderError", "ProviderHTTPError", "ProviderStreamError"]


class ProviderError(AgentsError):
    """Root of the provider adapters' errors."""


class ProviderConfigError(ProviderError, ValueError):
    """An adapter cannot be built as asked (a missing key in ``env``, a bad option)."""


class ProviderHTTPError(ProviderError):
    """The provider answered with an HTTP error: ``status`` and its own ``message``."""

    def __init__(self, provider: str, status: int, message: str, kind: str | None = None) -> None:
        label = f" ({kind})" if kind else ""
        super().__init__(f"{provider} returned HTTP {status}{label}: {message}")
        self.provider = provider
        self.status = status
        self.kind = kind
        self.provider_message = message


class ProviderStreamError(ProviderError):
    """The stream broke: an in-band error event, or the connection closed before the end."""

    def __init__(self, provider: str, message: str) -> None:
        super().__init__(f"{provider}: {message}")
        self.provider = provider
