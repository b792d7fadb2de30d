"""A minimal asyncio client for one streamed HTTP/1.1 response (SSE) — bench/serverload.py.

While the response streams in, the client does as little as it can, so that a rate measures the
server and not the client: it appends what arrives to one buffer and notes the time of the
first body bytes, of the first bytes holding a given marker, and of the end (the chunked
terminator, the declared length, or the connection closing when the response has neither).
Decoding the chunked framing and splitting the events happen afterwards
(:meth:`StreamedResponse.events`), off the clock. Loopback only; one request per connection.
"""

from __future__ import annotations

import asyncio
import socket
import time

from benchlib import LOOPBACK, HttpError

# A chunked body ends with a zero-size chunk and an empty trailer. A data chunk's payload here
# is SSE text (JSON with escaped control characters, ``\n`` separators, no ``\r``), so these
# bytes can only be the terminator.
_TERMINATOR = b"\r\n0\r\n\r\n"


class _Protocol(asyncio.Protocol):
    def __init__(self, owner: StreamedResponse) -> None:
        self.owner = owner

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.owner._made(transport)  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        self.owner._data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.owner._lost(exc)


class StreamedResponse:
    """One request whose response is read as it streams (see the module docstring).

    ``await StreamedResponse.open(port, "GET", path)`` connects and sends the request;
    ``await r.headers()`` waits for the status line and headers; ``await r.finished()`` waits
    for the end of the body. Times are ``time.perf_counter()`` values: ``t_connect`` (before
    the connect), ``t_sent``, ``t_headers``, ``t_first_body``, ``t_marker`` (the first bytes
    holding ``marker``) and ``t_end``.
    """

    def __init__(self, marker: bytes | None, timed: bool = False) -> None:
        self.marker = marker
        #: With ``timed``: (arrival time, body length after it) per read, for event_times().
        self.stamps: list[tuple[float, int]] | None = [] if timed else None
        self.transport: asyncio.Transport | None = None
        self.head = bytearray()
        self.body = bytearray()
        self.status = 0
        self.header_map: dict[str, str] = {}
        self.chunked = False
        self.length: int | None = None
        self.t_connect = self.t_sent = 0.0
        self.t_headers: float | None = None
        self.t_first_body: float | None = None
        self.t_marker: float | None = None
        self.t_end: float | None = None
        loop = asyncio.get_running_loop()
        self._headers: asyncio.Future[None] = loop.create_future()
        self._done: asyncio.Future[None] = loop.create_future()

    @classmethod
    async def open(
        cls,
        port: int,
        method: str,
        path: str,
        body: bytes = b"",
        marker: bytes | None = None,
        timed: bool = False,
    ) -> StreamedResponse:
        self = cls(marker, timed)
        self.t_connect = time.perf_counter()
        loop = asyncio.get_running_loop()
        await loop.create_connection(lambda: _Protocol(self), LOOPBACK, port)
        assert self.transport is not None
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {LOOPBACK}:{port}\r\n"
            f"Accept: text/event-stream\r\nAccept-Encoding: identity\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.transport.write(head + body)
        self.t_sent = time.perf_counter()
        return self

    # -- the protocol's callbacks (on the clock: keep them short) --------------------------------
    def _made(self, transport: asyncio.Transport) -> None:
        self.transport = transport

    def _data(self, data: bytes) -> None:
        now = time.perf_counter()
        if self.t_headers is None:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            self._parse_head(bytes(self.head[:end]))
            self.t_headers = now
            data = bytes(self.head[end + 4 :])
            self.head.clear()
            self._headers.set_result(None)
            if not data and not (self.length == 0 and not self.chunked):
                return
        if self.t_first_body is None:
            self.t_first_body = now
        if self.t_marker is None and self.marker is not None and self.marker in data:
            self.t_marker = now
        self.body += data
        if self.stamps is not None:
            self.stamps.append((now, len(self.body)))
        if self.chunked:
            if self.body.endswith(_TERMINATOR) or self.body == _TERMINATOR[2:]:
                self._end(now)
        elif self.length is not None and len(self.body) >= self.length:
            self._end(now)

    def _lost(self, exc: Exception | None) -> None:
        if not self._headers.done():
            self._headers.set_exception(HttpError(f"connection lost before headers: {exc!r}"))
        if not self._done.done():
            if self.chunked:
                self._done.set_exception(
                    HttpError(f"connection lost before the end of the body: {exc!r}")
                )
            else:
                self._end(time.perf_counter())

    def _end(self, now: float) -> None:
        self.t_end = now
        if not self._done.done():
            self._done.set_result(None)
        if self.transport is not None:
            self.transport.close()

    def _parse_head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split(" ", 2)[1])
        for line in lines[1:]:
            key, _, value = line.partition(":")
            self.header_map[key.strip().lower()] = value.strip()
        self.chunked = self.header_map.get("transfer-encoding", "").lower() == "chunked"
        if not self.chunked and "content-length" in self.header_map:
            self.length = int(self.header_map["content-length"])

    # -- the caller's side -----------------------------------------------------------------------
    async def headers(self, limit_s: float) -> int:
        await asyncio.wait_for(asyncio.shield(self._headers), limit_s)
        return self.status

    async def finished(self, limit_s: float) -> None:
        await asyncio.wait_for(asyncio.shield(self._done), limit_s)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def payload(self) -> bytes:
        """The body with the chunked framing removed (off the clock)."""
        if not self.chunked:
            return bytes(self.body)
        out, pos, body = [], 0, self.body
        while True:
            eol = body.find(b"\r\n", pos)
            if eol < 0:
                raise HttpError("truncated chunked body")
            size = int(bytes(body[pos:eol]).split(b";")[0], 16)
            if size == 0:
                return b"".join(out)
            start = eol + 2
            out.append(bytes(body[start : start + size]))
            if body[start + size : start + size + 2] != b"\r\n":
                raise HttpError("malformed chunked body")
            pos = start + size + 2

    def event_times(self) -> list[float]:
        """When each event of :meth:`events` was complete: the arrival time of the read that
        brought its last byte (off the clock; needs ``timed``)."""
        assert self.stamps is not None, "open(..., timed=True) records arrival times"
        # payload offset -> raw body offset, chunk by chunk
        spans: list[tuple[int, int, int]] = []  # (payload start, raw start, size)
        body, pos, payload = self.body, 0, 0
        if self.chunked:
            while True:
                eol = body.find(b"\r\n", pos)
                size = int(bytes(body[pos:eol]).split(b";")[0], 16)
                if size == 0:
                    break
                spans.append((payload, eol + 2, size))
                payload += size
                pos = eol + 2 + size + 2
        else:
            spans.append((0, 0, len(body)))
        data = self.payload()
        times, start, span, read = [], 0, 0, 0
        for block in data.split(b"\n\n"):
            end = start + len(block)  # the last byte of the event (its text), in the payload
            start = end + 2
            if not any(ln.startswith(b"data:") for ln in block.split(b"\n")):
                continue
            last = max(end - 1, 0)
            while span + 1 < len(spans) and spans[span + 1][0] <= last:
                span += 1
            p0, r0, _ = spans[span]
            raw = r0 + (last - p0)
            while self.stamps[read][1] <= raw:
                read += 1
            times.append(self.stamps[read][0])
        return times

    def events(self) -> list[bytes]:
        """The SSE events' ``data`` (one per event, lines joined), comments skipped."""
        out = []
        for block in self.payload().split(b"\n\n"):
            lines = [ln[5:].lstrip(b" ") for ln in block.split(b"\n") if ln.startswith(b"data:")]
            if lines:
                out.append(b"\n".join(lines))
        return out
