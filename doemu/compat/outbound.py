"""``workers.fetch``: outbound HTTP from user code, on httpx.

``await fetch(resource, **options)`` takes a URL or a ``Request`` and Cloudflare's keywords
(``method``, ``headers``, ``body``, ``redirect``, ``cf``, ``fetcher``, ``signal``…) and returns a
``Response`` whose body is a stream read from the connection as user code reads it: a provider's
server-sent events can be consumed chunk by chunk, or handed straight to the object's own
``Response``. ``response.abort()`` stops reading and closes the connection.

* One pooled ``httpx.AsyncClient`` per event loop (closed with the runtime). No read timeout:
  a model's stream may pause for minutes, and deciding when a stream is stalled is the caller's
  job; connecting times out after :data:`CONNECT_TIMEOUT_S`.
* Failures are :class:`~doemu.errors.FetchError` (an ``OSError``, as Pyodide's ``AbortError``
  is on Cloudflare) naming the URL: unreachable host, refused connection, malformed URL, a
  redirect with ``redirect="error"``. An HTTP error status is a response, not an exception.
* The body is decoded (``content-encoding`` undone, as ``fetch`` does), so the returned headers
  drop ``content-encoding`` and ``content-length``: passing the response on stays consistent.
* ``cf`` options have no local meaning: accepted, and logged once per key.
* The output gate: a request leaves an object only once the writes made before it are durable
  (workerd holds outgoing requests as it holds responses), so a side effect a ledger recorded
  as ``started`` can never reach the network before that record is on disk.
* ``fetcher=`` sends the request elsewhere: a callable ``(request) -> Response`` (doemu's own,
  as a Durable Object stub's ``fetch``), or JavaScript's shape ``(url, init) -> Response``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import weakref
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ..errors import FetchError
from . import _state
from .headers import Headers
from .readable import ReadableStream, core_of, stream_from_iterator
from .requests import Request
from .responses import Response

if TYPE_CHECKING:
    import httpx

__all__ = ["CONNECT_TIMEOUT_S", "close_clients", "fetch"]

_log = logging.getLogger("doemu.fetch")

#: How long connecting to a host may take before ``fetch`` fails.
CONNECT_TIMEOUT_S = 10.0
_NO_BODY_STATUSES = frozenset({101, 204, 205, 304})
_DROPPED_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
    weakref.WeakKeyDictionary()
)
_cf_logged: set[str] = set()


def _client() -> httpx.AsyncClient:
    import httpx

    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None or client.is_closed:
        timeout = httpx.Timeout(None, connect=CONNECT_TIMEOUT_S)
        client = _clients[loop] = httpx.AsyncClient(timeout=timeout, follow_redirects=False)
    return client


async def close_clients() -> None:
    """Close the connection pool of the running loop (the runtime calls this as it closes)."""
    client = _clients.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.aclose()


async def fetch(resource: Any, **options: Any) -> Response:
    """Send ``resource`` (a URL or a ``Request``) with ``options``; see the module docstring."""
    fetcher = options.pop("fetcher", None)
    try:
        request = Request._for_fetch(resource, options)
    except TypeError as exc:
        if "Invalid URL" in str(exc):
            raise FetchError(f"fetch() failed: {exc}") from None
        raise
    if fetcher is not None:
        return await _through(fetcher, request)
    for key in sorted(request._cf or {}):
        if key not in _cf_logged:
            _cf_logged.add(key)
            _log.info("fetch(): cf option %r has no local meaning; ignored", key)
    barrier = _state.before_output(hold=False)
    if barrier is not None:
        await barrier
    return await _send(request)


async def _through(fetcher: Any, request: Request) -> Response:
    """``fetch(..., fetcher=f)``: doemu's own fetchers take the request; others, JS's shape."""
    if getattr(fetcher, "__doemu_fetcher__", False):
        result = fetcher(request)
    else:
        init = {"method": request._method, "headers": request._headers.copy()}
        if request._body is not None:
            init["body"] = request._body
        result = fetcher(request._url, init)
    if inspect.isawaitable(result):
        result = await result
    if not isinstance(result, Response):
        raise TypeError(f"fetch()'s fetcher must return a Response, got {type(result).__name__}")
    return result


async def _send(request: Request) -> Response:
    import httpx

    url = request._url
    if not url.startswith(("http://", "https://")):
        raise FetchError(f"fetch() failed: only http: and https: URLs can be fetched, got {url!r}")
    client = _client()
    content = _content(request._body)
    outgoing = client.build_request(
        request._method, url, headers=list(request._headers.items()), content=content
    )
    follow = request._redirect == "follow"
    try:
        response = await client.send(outgoing, stream=True, follow_redirects=follow)
    except httpx.TooManyRedirects as exc:
        raise FetchError(f"fetch() to {url} failed: too many redirects ({exc})") from None
    except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
        raise FetchError(f"fetch() failed: invalid URL {url!r}: {exc}") from None
    except httpx.HTTPError as exc:
        reason = str(exc) or type(exc).__name__
        raise FetchError(f"fetch() to {url} failed: {reason}") from None
    if request._redirect == "error" and response.is_redirect:
        await response.aclose()
        raise FetchError(f"fetch() to {url} was redirected and redirect is 'error'")
    return _response(request, response)


def _content(body: bytes | ReadableStream | None) -> bytes | AsyncIterator[bytes] | None:
    if body is None or isinstance(body, bytes):
        return body
    core = core_of(body)
    core.locked = True

    async def chunks() -> AsyncIterator[bytes]:
        while (chunk := await core.read()) is not None:
            yield chunk

    return chunks()


def _response(request: Request, response: httpx.Response) -> Response:
    headers = Headers._trusted(
        [
            (k.lower(), v)
            for k, v in response.headers.multi_items()
            if k.lower() not in _DROPPED_HEADERS
        ]
    )
    if request._method == "HEAD" or response.status_code in _NO_BODY_STATUSES:
        body: ReadableStream | None = None
        asyncio.get_running_loop().create_task(response.aclose())
    else:
        body = stream_from_iterator(response.aiter_bytes(), on_cancel=response.aclose)
    result = Response._from_parts(
        response.status_code, headers, body, status_text=response.reason_phrase or None
    )
    result._url = str(response.url)
    result._redirected = bool(response.history)

    def abort(reason: object = None) -> None:
        if body is not None:
            core_of(body).cancel(reason if reason is not None else "fetch() was aborted")
        else:
            asyncio.get_running_loop().create_task(response.aclose())

    result._abort = abort
    return result
