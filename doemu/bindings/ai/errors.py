"""What ``env.AI.run`` throws: the AI binding's JavaScript errors, as Pyodide presents them.

workerd's AI binding throws ``InferenceUpstreamError`` when the inference service refuses or
fails a request (its text ``"<code>: <description>"``) and ``AiInternalError`` for what the
binding itself refuses. doemu keeps those names (``except JsException`` and ``error.name`` read
as on Cloudflare) and, as every binding error, they are :class:`~doemu.errors.DoemuError`\\ s.
What differs is the text: it names the Workers AI model, the endpoint model it was mapped to and
the endpoint's URL, because locally the "upstream" is a server the user configured.
"""

from __future__ import annotations

from ..errors import BindingError

__all__ = ["AiInternalError", "AiNotConfiguredError", "InferenceUpstreamError"]


class InferenceUpstreamError(BindingError):
    """The endpoint refused or failed the request (an HTTP error, unreachable, a cut stream),
    or the inputs are not what the model takes. ``status`` is the endpoint's HTTP status when
    it answered one (also in ``env.AI.lastRequestHttpStatusCode``, as on Cloudflare)."""

    js_name = "InferenceUpstreamError"

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class AiInternalError(BindingError):
    """The binding refuses the call itself."""

    js_name = "AiInternalError"


class AiNotConfiguredError(AiInternalError):
    """``[ai]`` is bound but ``[tool.doemu.ai]`` names no endpoint: Workers AI's models
    cannot run locally, and the message says how to configure one."""
