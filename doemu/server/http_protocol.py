"""doemu's HTTP/1.1 protocol for uvicorn: httptools' protocol, but a request pipelined before
garbage is answered before the garbage is refused.

uvicorn's httptools protocol feeds everything one read brings to the parser. When a client
pipelines a valid request and then bytes that are not HTTP in the same write, the parser calls
back for the whole valid request (uvicorn creates its ASGI task) and only then fails on the
garbage; uvicorn writes its 400 at once and closes the connection, so the valid request's response
is written to a closed transport and lost, and the answer the client does get is out of order.
HTTP/1.1 answers pipelined requests in the order they came (RFC 9112 section 9.3.2), so this
protocol holds the 400 back until every request parsed before the garbage has been answered in
full, then sends it and closes, as uvicorn would have.

The request the parser was in when it failed (say a bad chunk in its body) is the bad one and is
never answered itself: waiting behind others, it is dropped from the queue before it starts; if it
is already running (nothing was before it), the 400 goes out at once as in uvicorn, and its app
sees the client disconnect.

The 400 itself carries the server's usual JSON ``{"error": ...}`` body rather than uvicorn's
plain text.

Imported by ``doemu dev`` as it starts: uvicorn's default ``http="auto"`` imports the same
httptools module then, so this costs the start-up nothing.
"""

from __future__ import annotations

import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)

__all__ = ["DoemuHttpProtocol"]


class DoemuHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the 400 for garbage held back (see the module docs)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The cycle of the request being parsed, from its headers' end to its message's end.
        self._parsing: RequestResponseCycle | None = None
        #: The 400's message while earlier responses are still on their way.
        self._held_400: str | None = None

    def data_received(self, data: bytes) -> None:
        if self._held_400 is None:  # after garbage nothing is parsed: it is all refused
            super().data_received(data)

    def on_message_begin(self) -> None:
        self._parsing = None
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        before = self.cycle
        super().on_headers_complete()
        if self.cycle is not before:  # not an upgrade: this request got its cycle
            self._parsing = self.cycle

    def on_message_complete(self) -> None:
        self._parsing = None
        super().on_message_complete()

    def send_400_response(self, msg: str) -> None:
        """Refuse the garbage now, or once the requests before it have been answered."""
        bad, self._parsing = self._parsing, None
        queued = next((i for i, (cycle, _) in enumerate(self.pipeline) if cycle is bad), None)
        if queued is not None:
            del self.pipeline[queued]  # queued behind a running request: it never starts
            waiting = True
        elif bad is not None:
            waiting = False  # the bad request is the one running: nothing is before it
        else:
            cycle = self.cycle
            waiting = bool(self.pipeline) or (cycle is not None and not cycle.response_complete)
        if waiting:
            self._held_400 = msg
        else:
            self._refuse(msg)

    def on_response_complete(self) -> None:
        last = not self.pipeline
        super().on_response_complete()  # starts the next queued request, if any
        if last and self._held_400 is not None and not self.transport.is_closing():
            self._unset_keepalive_if_required()
            self._refuse(self._held_400)

    def _refuse(self, msg: str) -> None:
        """uvicorn's 400 and close, with a JSON body like every other error doemu answers."""
        body = json.dumps({"error": msg}).encode()
        head = [STATUS_LINE[400]]
        head += [name + b": " + val + b"\r\n" for name, val in self.server_state.default_headers]
        head.append(b"content-type: application/json\r\ncontent-length: %d\r\n" % len(body))
        head.append(b"connection: close\r\n\r\n")
        self.transport.write(b"".join(head) + body)
        self.transport.close()
