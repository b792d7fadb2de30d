"""HTTP bodies between the network and user code: read whole when small, streamed otherwise.

* **Request bodies.** One that declares a length up to :data:`EAGER_BODY` is read before the
  handler runs (the common case costs no stream machinery); a larger one, or a chunked one,
  becomes ``request.body``, a stream fed from the connection as the handler reads it, so a large
  upload is never held whole in memory. A request with neither ``Content-Length`` nor
  ``Transfer-Encoding`` has no body (RFC 9112 section 6.3), whatever its method. Either way the
  server's size limit applies: past it the read fails with a 413.
* **Response bodies.** ``bytes`` go out in one message with their length. A stream body goes out
  chunk by chunk as it is produced: headers at once, no ``content-length``, each chunk when the
  producer writes it, and only as fast as the client takes it (uvicorn's ``send`` waits while the
  socket's buffer is full, and the stream's writer waits for the server). A client that goes
  away cancels the stream, so the producer's next write fails.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

from ..compat.fetch_api import Response
from ..compat.readable import ReadableStream, core_of, stream_from_iterator
from ..compat.streams import StreamCore
from ..errors import HttpError

__all__ = ["EAGER_BODY", "RequestBody", "read_request_body", "send_response"]

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_log = logging.getLogger("doemu.server")

#: Request bodies that declare at most this many bytes are read whole before the handler runs.
EAGER_BODY = 256 * 1024


class RequestBody:
    """A request's body as the handler gets it, and whether the connection has delivered it all.

    Only once it has may the server listen for the client going away (the same ``receive``
    delivers both). The stream's generator holds the one-item ``_done`` list, never this object:
    no reference cycle for the collector to find on every streamed request.
    """

    __slots__ = ("_done", "data")

    def __init__(self) -> None:
        self.data: bytes | ReadableStream | None = None
        self._done = [False]

    @property
    def complete(self) -> bool:
        return self._done[0]


async def read_request_body(scope: Message, receive: Receive, max_body: int) -> RequestBody:
    """The body of an HTTP request (see the module docstring); 400/413 on bad input."""
    declared: int | None = None
    chunked = False
    for name, value in scope["headers"]:
        if name == b"transfer-encoding":
            chunked = True
        elif name == b"content-length":
            try:
                declared = int(value)
            except ValueError:
                raise HttpError(400, "invalid Content-Length header") from None
            if declared < 0:
                raise HttpError(400, "invalid Content-Length header")
            if declared > max_body:
                raise HttpError(
                    413, f"request body of {declared} bytes exceeds the {max_body} limit"
                )
    body = RequestBody()
    if declared is not None and declared <= EAGER_BODY:
        # The common case, kept to a plain loop: no generator, no stream.
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise HttpError(400, "client disconnected before sending the whole body")
            chunk = message.get("body", b"")
            if chunk:
                chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body._done[0] = True
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        body.data = data or None
        return body
    if declared is None and not chunked:
        body._done[0] = True  # neither a length nor chunks: the request has no body
        return body
    body.data = stream_from_iterator(_chunks(receive, max_body, body._done))
    return body


async def _chunks(receive: Receive, max_body: int, done: list[bool]) -> AsyncIterator[bytes]:
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise HttpError(400, "client disconnected before sending the whole body")
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > max_body:
                raise HttpError(413, f"request body exceeds the {max_body} byte limit")
            yield chunk
        if not message.get("more_body", False):
            done[0] = True
            return


def _header_list(response: Response, length: int | None) -> list[tuple[bytes, bytes]]:
    headers = [
        (k.encode("latin-1"), v.encode("latin-1"))
        for k, v in response._headers.items()
        if k != "content-length"  # always the real length: a wrong one breaks the connection
    ]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    return headers


async def send_response(
    send: Send,
    response: Response,
    *,
    head: bool = False,
    receive: Receive | None = None,
) -> None:
    """Send ``response`` (``receive``, when given, is watched for the client going away)."""
    data = response._body
    if not isinstance(data, ReadableStream):
        body = data or b""
        await send(
            {
                "type": "http.response.start",
                "status": response._status,
                "headers": _header_list(response, len(body)),
            }
        )
        await send({"type": "http.response.body", "body": b"" if head else body})
        return
    core = core_of(data)
    if core.locked:
        raise HttpError(500, "fetch() returned a Response whose body stream is locked to a reader")
    core.locked = True
    headers = _header_list(response, None)
    await send({"type": "http.response.start", "status": response._status, "headers": headers})
    if head:
        core.cancel("a HEAD response has no body")
        await send({"type": "http.response.body", "body": b""})
        return
    await _stream(send, core, receive)


async def _stream(send: Send, core: StreamCore, receive: Receive | None) -> None:
    gone: asyncio.Future[Any] | None = None
    if receive is not None:
        gone = asyncio.ensure_future(_disconnected(receive))
    try:
        while True:
            read = core.read()
            if gone is not None and not read.done():
                await asyncio.wait((read, gone), return_when=asyncio.FIRST_COMPLETED)
                if not read.done():
                    read.cancel()  # nobody will take this chunk
                    core.cancel("the client disconnected")
                    return
            try:
                chunk = read.result()
            except Exception as exc:
                # The producer failed (aborted the stream, raised): the response ends short,
                # which is all HTTP can say after the headers went out.
                _log.warning("a streamed response body failed mid-way: %s", exc)
                return
            if chunk is None:
                break
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except OSError:
        core.cancel("the client disconnected")  # uvicorn's ClientDisconnected is an OSError
    finally:
        if gone is not None:
            gone.cancel()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
