"""Workers AI: ``[ai] binding`` (``env.AI.run``), served by an OpenAI-compatible endpoint.

* :mod:`.binding`: the ``env.AI`` object and its ``run``;
* :mod:`.shapes`: Workers AI's inputs and outputs, translated to and from OpenAI's wire format;
* :mod:`.upstream`: the HTTP calls to the endpoint of ``[tool.doemu.ai]`` (httpx, httpx-sse);
* :mod:`.errors`: ``InferenceUpstreamError`` and ``AiInternalError``, as the binding throws them.
"""

from __future__ import annotations

from .binding import Ai, api_key_from, not_configured_text
from .errors import AiInternalError, AiNotConfiguredError, InferenceUpstreamError

__all__ = [
    "Ai",
    "AiInternalError",
    "AiNotConfiguredError",
    "InferenceUpstreamError",
    "api_key_from",
    "not_configured_text",
]
