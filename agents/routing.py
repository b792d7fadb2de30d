"""``route_agent_request``: ``/agents/<kebab-case-binding>/<name>`` → that agent's ``fetch``.

The SDK's rules (``agent-routing.ts``): every Durable Object binding in ``env`` (anything with an
``idFromName`` method) is addressable under the kebab-case of its *binding name*, converted with
the SDK's ``camelCaseToKebabCase`` — binding ``MyAgent`` or ``MY_AGENT`` → ``my-agent``. That is
also what clients compute from the class name (``AgentClient({agent: "MyAgent"})`` connects to
``/agents/my-agent/<name>``), so name the binding after the class. The instance is
``idFromName(<name>)`` with the path segment as is (no percent-decoding, like ``new URL()``).

* A path outside the prefix (or without both segments) is not an agent request: ``None``, so the
  worker can fall through to its own routes.
* A well-formed path whose namespace matches no binding answers ``400 Invalid request``, exactly as
  the SDK does (it is an agent request, addressed wrongly).
* Otherwise the request — an HTTP call or a WebSocket upgrade — is forwarded to the agent's stub
  and the agent's response is returned unchanged.

Options, as the SDK's ``AgentRouteOptions``: ``on_before_connect(request, route)`` (WebSocket
upgrades) and ``on_before_request(request, route)`` (everything else) may return a ``Response``
(answered at once, the agent never woken: authentication), a ``Request`` (forwarded instead), or
``None`` (forwarded as is); ``route`` is an :class:`AgentRoute` (binding name, instance name).
``props`` reach the agent's ``on_start(props)`` (:mod:`agents.lifecycle`). ``cors`` adds CORS
headers to HTTP answers without reading their bodies, so a streamed answer (SSE) stays streamed.

The class name itself cannot be matched portably: on Cloudflare a namespace binding does not
reveal which class it serves.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from workers import Request, Response

from .core.protocol import camel_case_to_kebab_case
from .lifecycle import PROPS_HEADER, encode_props, header_pairs

__all__ = [
    "AgentRoute",
    "BeforeHook",
    "agent_namespaces",
    "binding_name_candidates",
    "find_agent_namespace",
    "get_agent_by_name",
    "route_agent_request",
]


class AgentRoute(NamedTuple):
    """What a routing hook learns: the binding that matched and the instance name."""

    class_name: str
    name: str


#: ``on_before_connect`` / ``on_before_request``: a Response, a Request, or None (sync or async).
BeforeHook = Callable[[Any, AgentRoute], "Awaitable[Any] | Any"]

_log = logging.getLogger("agents.routing")

_DEFAULT_CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, POST, HEAD, OPTIONS",
    "Access-Control-Allow-Headers": "*",
    "Access-Control-Max-Age": "86400",
}


def binding_name_candidates(kebab: str) -> list[str]:
    """The binding names whose kebab-case is ``kebab``: ``my-agent`` → ``MY_AGENT``, ``MyAgent``,
    ``myAgent``, ``my_agent``, ``my-agent`` (only those that map back to ``kebab`` exactly)."""
    words = [w for w in kebab.split("-") if w]
    if not words:
        return []
    shapes = [
        "_".join(w.upper() for w in words),
        "".join(w[:1].upper() + w[1:] for w in words),
        words[0] + "".join(w[:1].upper() + w[1:] for w in words[1:]),
        "_".join(words),
        kebab,
    ]
    seen: list[str] = []
    for name in shapes:
        if name not in seen and camel_case_to_kebab_case(name) == kebab:
            seen.append(name)
    return seen


def _namespace(env: Any, name: str) -> Any | None:
    try:
        value = env[name] if isinstance(env, Mapping) else getattr(env, name, None)
    except Exception:
        return None
    return value if callable(getattr(value, "idFromName", None)) else None


def find_agent_namespace(env: Any, kebab: str) -> tuple[str, Any] | None:
    """``(binding name, namespace)`` of the Durable Object binding addressed as ``kebab``.

    Looked up by name, never by listing ``env``: on Cloudflare the Python SDK's env wrapper
    lists no bindings (``dir(env)`` shows none), so enumeration finds nothing there. A binding
    named in any of the usual styles is found (:func:`binding_name_candidates`); a mapping env is
    also searched in full, for names outside those styles.
    """
    for name in binding_name_candidates(kebab):
        namespace = _namespace(env, name)
        if namespace is not None:
            return name, namespace
    if isinstance(env, Mapping):
        return agent_namespaces(env).get(kebab)
    return None


def agent_namespaces(env: Mapping[str, Any]) -> dict[str, tuple[str, Any]]:
    """``{kebab-case name: (binding name, namespace)}`` for every Durable Object binding in a
    mapping ``env`` (a test's env). Cloudflare's env cannot be listed: use
    :func:`find_agent_namespace`."""
    found: dict[str, tuple[str, Any]] = {}
    for name in env:
        if not isinstance(name, str) or name.startswith("_"):
            continue
        namespace = _namespace(env, name)
        if namespace is not None:
            found.setdefault(camel_case_to_kebab_case(name), (name, namespace))
    return found


async def route_agent_request(
    request: Any,
    env: Any,
    *,
    prefix: str = "agents",
    cors: bool | Mapping[str, str] = False,
    props: Any = None,
    on_before_connect: BeforeHook | None = None,
    on_before_request: BeforeHook | None = None,
) -> Any | None:
    """Forward ``request`` to the agent its path names; ``None`` when it names none.

    ``cors=True`` adds the SDK's permissive CORS headers to HTTP answers (and answers
    ``OPTIONS`` preflights itself); a mapping supplies explicit headers instead. ``props`` go
    to the agent's ``on_start(props)``; the two hooks are described in the module docstring.
    """
    prefix_parts = [p for p in prefix.split("/") if p]
    parts = [p for p in urlsplit(str(request.url)).path.split("/") if p]
    if parts[: len(prefix_parts)] != prefix_parts or len(parts) < len(prefix_parts) + 2:
        return None
    namespace_name = parts[len(prefix_parts)]
    name = parts[len(prefix_parts) + 1]
    bound = find_agent_namespace(env, namespace_name)
    if bound is None:
        _log.error(
            'The URL %s with namespace "%s" and name "%s" does not match any Durable Object '
            "binding.",
            request.url,
            namespace_name,
            name,
        )
        return Response("Invalid request", status=400)
    upgrade = request.headers.get("Upgrade")
    is_websocket = isinstance(upgrade, str) and upgrade.lower() == "websocket"
    cors_headers = _cors_headers(cors)
    if cors_headers and str(request.method).upper() == "OPTIONS":
        return Response(None, headers=cors_headers)
    binding, namespace = bound
    route = AgentRoute(binding, name)
    hook = on_before_connect if is_websocket else on_before_request
    if hook is not None:
        answer = hook(request, route)
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, Request):
            request = answer
        elif answer is not None:  # a Response: answered here, the agent is never woken
            return answer if is_websocket else _with_cors(answer, cors_headers)
    if props is not None:
        headers = header_pairs(request.headers, {PROPS_HEADER: encode_props(props)})
        request = Request(request, headers=headers)
    stub = namespace.get(namespace.idFromName(name))
    response = await stub.fetch(request)
    return response if is_websocket else _with_cors(response, cors_headers)


async def get_agent_by_name(namespace: Any, name: str, *, props: Any = None) -> Any:
    """The stub of agent ``name``, its ``on_start(props)`` run first (the SDK's
    ``getAgentByName``): native RPC carries no props, so they are handed over here."""
    stub = namespace.get(namespace.idFromName(name))
    await stub.ensure_started(props)
    return stub


def _with_cors(response: Any, cors_headers: dict[str, str] | None) -> Any:
    """``response`` with the CORS headers added; its body is passed on, never read."""
    if not cors_headers:
        return response
    headers = header_pairs(response.headers, cors_headers)
    return Response(
        response.body, status=response.status, status_text=response.status_text, headers=headers
    )


def _cors_headers(cors: bool | Mapping[str, str]) -> dict[str, str] | None:
    if cors is True:
        return dict(_DEFAULT_CORS)
    if isinstance(cors, Mapping):
        return dict(cors)
    return None
