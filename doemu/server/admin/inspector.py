"""The inspector: one static web page over the admin API, served at the admin API's root.

The page (:mod:`.inspector_page`) is plain HTML with one inline script and no build step: it
calls the JSON routes from the browser like any other client, so it can show nothing the API
does not, and the API's access rules hold for every byte of data. This module decides who may
load the page itself:

* Without an admin token, exactly the API's rules (loopback client, loopback ``Host``, no foreign
  ``Origin``): :class:`~.access.AccessControl` guards the page as it guards the routes.
* With a token, a browser opening a URL cannot send ``Authorization``, so the page would be
  unreachable if it needed one. It is the same static bytes for everyone, holds no data and
  echoes nothing from the request, so it is served without the token (a foreign ``Origin`` is
  still refused); the user supplies the token (``#token=…``, ``?token=…`` or a form) and the
  script keeps it in ``sessionStorage`` and sends it as ``Authorization: Bearer`` on every call.

A Content-Security-Policy allows only the page's own inline script and style (by hash), calls to
its own origin, and no framing: even a value that slipped past the script's escaping could not
run, and another site cannot frame the page to click its buttons.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from .access import AccessControl, _header, _same_origin, error_response
from .inspector_page import assemble

__all__ = ["PAGE", "InspectorGate", "InspectorPage"]

#: The page's paths inside the admin app (``/__doemu/api`` and ``/__doemu/api/`` both map to /).
_PATHS = frozenset({"/", ""})


def _hash(source: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()


@dataclass(frozen=True, slots=True)
class InspectorPage:
    """The page's bytes and the headers that go with them, computed once."""

    html: str
    script_hash: str
    style_hash: str

    @classmethod
    def build(cls) -> InspectorPage:
        template, script, style = assemble()
        html = template.replace("/*STYLE*/", style).replace("/*SCRIPT*/", script)
        return cls(html, _hash(script), _hash(style))

    @property
    def headers(self) -> dict[str, str]:
        policy = (
            f"default-src 'none'; script-src '{self.script_hash}'; "
            f"style-src '{self.style_hash}'; connect-src 'self'; img-src 'self'; "
            "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        )
        return {
            "content-security-policy": policy,
            "x-frame-options": "DENY",
            "x-content-type-options": "nosniff",
            "referrer-policy": "no-referrer",  # a ?token= in the address never leaves in a Referer
            "cache-control": "no-store",
        }

    def response(self) -> Response:
        return Response(self.html, media_type="text/html; charset=utf-8", headers=self.headers)


PAGE = InspectorPage.build()


async def _serve(scope: Scope, receive: Receive, send: Send) -> None:
    response = PAGE.response()
    if scope["method"] == "HEAD":  # the headers (and length) a GET would get, no body
        await send({"type": "http.response.start", "status": 200, "headers": response.raw_headers})
        await send({"type": "http.response.body", "body": b""})
        return
    await response(scope, receive, send)


class InspectorGate:
    """ASGI middleware in front of the admin API's access control: ``GET``/``HEAD`` of the root
    is the page (under the rules in the module docstring); every other request passes on."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token
        #: Without a token, the page is guarded exactly as the routes are.
        self._loopback_only = AccessControl(_serve, token=None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["path"] not in _PATHS
            or scope["method"] not in ("GET", "HEAD")
        ):
            await self.app(scope, receive, send)
        elif self.token is None:
            await self._loopback_only(scope, receive, send)
        else:
            origin = _header(scope, b"origin")
            if origin is not None and not _same_origin(origin, scope):
                refusal = error_response(403, f"the inspector refuses Origin {origin!r}")
                await refusal(scope, receive, send)
            else:
                await _serve(scope, receive, send)
