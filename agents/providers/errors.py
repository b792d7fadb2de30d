"""What a provider adapter refuses or reports, under the library's one root, ``AgentsError``.

The chat layer turns an exception from a reply into the error frame and hands it to
``classify_chat_error``; the messages here therefore carry the provider's own words ("prompt is
too long", "rate limited") so a classifier and a reader both see what the provider said.
"""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime

from ..errors import AgentsError

__all__ = [
    "TRANSIENT_STATUSES",
    "ProviderConfigError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderInputError",
    "ProviderStreamError",
    "retry_after_seconds",
]


class ProviderError(AgentsError):
    """Root of the provider adapters' errors."""


class ProviderConfigError(ProviderError, ValueError):
    """An adapter cannot be built as asked (a missing key in ``env``, a bad option)."""


class ProviderInputError(ProviderError, ValueError):
    """The conversation holds something the provider cannot take (a file of a type it does not
    read, a URL it cannot fetch): refused before the request is sent, naming it."""

    def __init__(self, provider: str, message: str) -> None:
        super().__init__(f"{provider}: {message}")
        self.provider = provider


#: Statuses that refuse a request *for now*: retried by bounded chat recovery (a recovery turn
#: refused with one of them waits ``retry_after`` and tries again, within the budget).
TRANSIENT_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


class ProviderHTTPError(ProviderError):
    """The provider answered with an HTTP error: ``status``, its own ``message``, and the
    ``Retry-After`` it sent (``retry_after``, seconds). ``transient`` says whether the refusal
    is for now (429, 5xx, "overloaded"); the chat layer reads these attributes."""

    def __init__(
        self,
        provider: str,
        status: int,
        message: str,
        kind: str | None = None,
        *,
        retry_after: float | None = None,
    ) -> None:
        label = f" ({kind})" if kind else ""
        super().__init__(f"{provider} returned HTTP {status}{label}: {message}")
        self.provider = provider
        self.status = status
        self.kind = kind
        self.provider_message = message
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        return self.status in TRANSIENT_STATUSES or "overloaded" in (self.kind or "")


class ProviderStreamError(ProviderError):
    """The stream broke: an in-band error event, or the connection closed before the end."""

    def __init__(self, provider: str, message: str, *, transient: bool = False) -> None:
        super().__init__(f"{provider}: {message}")
        self.provider = provider
        #: The connection dropped mid-reply (not an error the provider reported): bounded chat
        #: recovery continues the reply.
        self.transient = transient


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` header in seconds: delta-seconds or an HTTP date (``None`` when absent
    or unreadable)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
