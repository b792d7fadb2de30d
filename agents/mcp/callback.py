"""The MCP client's OAuth callback: the URL the browser comes back to, and what it is answered.

A module of its own because the callback is the one part of the MCP client that is plain HTTP
rather than MCP, and it spans two moments. It is fixed when a server is added: the URL is stored
with the server and registered with the authorization server as the ``redirect_uri``, so it must
be the same at the code exchange and after every eviction. It is met later, as an ordinary
``fetch`` to the agent that must be told apart from the agent's own routes. What happens in
between — trading the code for tokens and connecting again — belongs to the servers' owner,
:meth:`agents.mcp.manager.McpClientManager.handle_callback`.

* **The URL** (:func:`callback_url`) is the SDK's, ``<host>/agents/<class>/<name>/callback``:
  the host is the origin of the request being handled unless ``callback_host`` is given, and
  without either OAuth is impossible (the URL is empty; such a server fails clearly on ``401``).
* **Recognising it** (:func:`callback_server_id`, :func:`at_callback_url`): a ``GET`` whose
  ``state`` (``<nonce>.<server id>``) names a server, at that server's stored URL (same path and
  host). Anything else goes on to the agent's own routes and ``on_request``.
* **The browser's answer** (:class:`OAuthCallbackConfig`, the SDK's
  ``configureOAuthCallback`` options): a custom handler's response, else a redirect to the
  success or error page (``?error=…``), else a redirect to the origin.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from workers import Response

from ..core.protocol import camel_case_to_kebab_case
from .oauth import parse_state

if TYPE_CHECKING:
    from ..core.host import AgentHost

__all__ = [
    "OAuthCallbackConfig",
    "OAuthCallbackResult",
    "at_callback_url",
    "callback_server_id",
    "callback_url",
]

#: The SDK's ``MCPClientOAuthResult``: ``serverId``, ``authSuccess``, ``authError``.
OAuthCallbackResult = dict[str, Any]


def callback_url(agent: AgentHost, request: Any, host: str | None, path: str | None) -> str:
    """Where the authorization server sends the browser back to ``agent``: ``host`` (else the
    origin of ``request``, the request being handled) joined with ``path`` (else
    ``/agents/<class>/<name>/callback``); ``""`` when there is neither host nor request."""
    if host is None:
        if request is None:
            return ""  # no request to take the host from: OAuth is not possible
        host = "{0.scheme}://{0.netloc}".format(urlsplit(str(request.url)))
    if path is None:
        kebab = camel_case_to_kebab_case(type(agent).__name__)
        path = f"/agents/{kebab}/{quote(agent.name, safe='')}/callback"
    return f"{host.rstrip('/')}/{path.lstrip('/')}"


def callback_server_id(request: Any) -> str | None:
    """The server id the ``state`` of a ``GET`` names, or None: not an OAuth callback."""
    if str(request.method).upper() != "GET":
        return None
    query = urlsplit(str(request.url)).query
    parsed = parse_state((parse_qs(query).get("state") or [""])[0])
    return parsed[1] if parsed is not None else None


def at_callback_url(request: Any, stored_url: str | None) -> bool:
    """Whether ``request`` arrived at ``stored_url`` (path and host; the query is the answer)."""
    url = urlsplit(str(request.url))
    callback = urlsplit(str(stored_url or ""))
    return callback.path == url.path and callback.netloc == url.netloc


@dataclass(frozen=True, slots=True)
class OAuthCallbackConfig:
    """What the callback answers the browser (see
    :meth:`~agents.mcp.manager.McpClientManager.configure_oauth_callback`); the defaults
    redirect to the origin."""

    success_redirect: str | None = None
    error_redirect: str | None = None
    custom_handler: Callable[[OAuthCallbackResult], Any] | None = None

    def respond(self, result: OAuthCallbackResult, request: Any) -> Any:
        """The browser's answer to the callback ``request`` that ended in ``result``."""
        if self.custom_handler is not None:
            return self.custom_handler(result)
        parts = urlsplit(str(request.url))
        origin = f"{parts.scheme}://{parts.netloc}"
        if result.get("authSuccess") and self.success_redirect:
            return Response.redirect(_absolute(origin, self.success_redirect))
        if not result.get("authSuccess") and self.error_redirect:
            error = urlencode({"error": result.get("authError") or "Unknown error"})
            return Response.redirect(f"{_absolute(origin, self.error_redirect)}?{error}")
        return Response.redirect(origin)


def _absolute(origin: str, url: str) -> str:
    return url if url.startswith(("http://", "https://")) else f"{origin}/{url.lstrip('/')}"
