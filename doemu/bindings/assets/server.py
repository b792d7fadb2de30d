"""Static assets before the Worker, and ``env.ASSETS.fetch``: Cloudflare's asset routing.

For each request :meth:`AssetServer.first` decides, as Cloudflare's router does, whether the
assets answer or the Worker does:

* ``run_worker_first = true``: the Worker, always (it may call ``env.ASSETS.fetch``);
* ``run_worker_first = ["/api/*", "!/api/docs/*"]``: the Worker for the paths a pattern matches
  (unless a ``!`` pattern matches too), the assets otherwise, with ``not_found_handling`` applied
  (so a single-page app's ``index.html`` answers unknown paths);
* otherwise (the default) the assets when a file (or a redirect to one) matches; a request that
  matches nothing goes to the Worker, except a browser navigation (``Sec-Fetch-Mode: navigate``)
  in ``single-page-application`` mode, which gets ``index.html``.

An asset response has Cloudflare's headers (``ETag``, ``Content-Type``, ``Cache-Control: public,
max-age=0, must-revalidate`` unless the request carries ``Authorization`` or ``Range``), a 304
for a matching ``If-None-Match``, no body for ``HEAD``, a 405 for a method other than GET and
HEAD, and a 307 to the canonical path. ``env.ASSETS.fetch(request)`` answers with the same rules,
``not_found_handling`` included (a plain 404 when nothing matches), and follows the redirects
unless the request says otherwise, as a ``fetch()`` through a binding does on Cloudflare.
"""

from __future__ import annotations

import asyncio
import mimetypes
import re
from collections.abc import Awaitable
from typing import Any
from urllib.parse import urlsplit

from ...compat import workers
from ...config.bindings import AssetsConfig
from ..boundary import call
from ..entry import follow_redirects
from .resolve import AssetFolder, Intent, decode_path, encode_path

__all__ = ["AssetServer", "AssetsBinding"]

CACHE_CONTROL = "public, max-age=0, must-revalidate"
_TEXT_TYPES = ("application/javascript", "application/json", "application/xml", "image/svg+xml")


def _pattern(route: str) -> re.Pattern[str]:
    """A ``run_worker_first`` route (``*`` matches anything, ``/`` included) as a regex."""
    return re.compile("".join(".*" if c == "*" else re.escape(c) for c in route) + r"\Z")


def _content_type(name: str) -> str | None:
    kind, _ = mimetypes.guess_type(name)
    if kind is None:
        return None
    if kind.startswith("text/") or kind in _TEXT_TYPES:
        return f"{kind}; charset=utf-8"
    return kind


class AssetServer:
    """Serves ``[assets]`` (see the module docstring)."""

    def __init__(self, config: AssetsConfig) -> None:
        self.config = config
        self.folder = AssetFolder(config.directory, config.html_handling, config.not_found_handling)
        first = config.run_worker_first
        self._always_worker = first is True
        routes = first if isinstance(first, tuple) else ()
        self._worker_routes = [_pattern(r) for r in routes if not r.startswith("!")]
        self._asset_routes = [_pattern(r[1:]) for r in routes if r.startswith("!")]
        self._routed = bool(routes)

    def first(self, method: str, url: str, headers: Any) -> bool:
        """Whether the assets answer this request before the Worker."""
        if self._always_worker:
            return False
        path = urlsplit(url).path or "/"
        if self._routed:
            decoded = decode_path(path)
            if any(p.match(decoded) for p in self._asset_routes):
                return True
            if any(p.match(decoded) for p in self._worker_routes):
                return False
            return self._intent(path, None) is not None
        navigation = (headers.get("sec-fetch-mode") or "") == "navigate"
        return self._intent(path, None if navigation else "none") is not None

    def _intent(self, raw_path: str, not_found: Any) -> Intent | None:
        return self.folder.intent(decode_path(raw_path), not_found)

    async def respond(self, request: Any) -> Any:
        """The asset response to ``request`` (a 404 with no body when nothing matches)."""
        parts = urlsplit(request.url)
        raw_path = parts.path or "/"
        intent = await asyncio.to_thread(self._intent, raw_path, None)
        if intent is None:
            return workers.Response(None, status=404)
        if request.method.upper() not in ("GET", "HEAD"):
            return workers.Response(None, status=405)
        decoded = decode_path(raw_path)
        destination = intent.redirect if intent.redirect is not None else decoded
        encoded = encode_path(destination)
        if intent.redirect is not None or encoded != raw_path:
            query = f"?{parts.query}" if parts.query else ""
            return workers.Response(None, status=307, headers={"location": encoded + query})
        assert intent.file is not None and intent.etag is not None
        headers = {"etag": f'"{intent.etag}"'}
        content_type = _content_type(intent.file.name)
        if content_type is not None:
            headers["content-type"] = content_type
        if request._headers.get("authorization") is None and request._headers.get("range") is None:
            headers["cache-control"] = CACHE_CONTROL
        if (request._headers.get("if-none-match") or "") in (
            headers["etag"],
            f"W/{headers['etag']}",
        ):
            return workers.Response(None, status=304, headers=headers)
        # A HEAD response keeps its body here: the server sends its length and drops it.
        body = await asyncio.to_thread(intent.file.read_bytes)
        return workers.Response(body, status=intent.status, headers=headers)


class AssetsBinding:
    """``env.ASSETS`` (``[assets] binding``): ``fetch`` a request from the static assets."""

    __slots__ = ("_server",)

    def __init__(self, server: AssetServer) -> None:
        self._server = server

    def __repr__(self) -> str:
        return f"<Fetcher ASSETS {self._server.config.directory}>"

    def fetch(self, resource: Any, **kwargs: Any) -> Awaitable[Any]:
        """The asset response to ``fetch(resource, **options)``'s request."""
        if "fetcher" in kwargs:
            raise TypeError("fetch() got multiple values for keyword argument 'fetcher'")
        request = workers.Request._for_fetch(resource, kwargs)
        return call(lambda: follow_redirects(self._server.respond, request))

    #: ``workers.fetch(..., fetcher=env.ASSETS.fetch)`` hands this fetcher the request itself.
    fetch.__doemu_fetcher__ = True  # type: ignore[attr-defined]
